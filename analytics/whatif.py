"""Capacity what-if: replay recent demand on a changed fleet and compare wait and allocation with today's.

Method (docs/dashboards.md):
- Demand: the jobs submitted in the window (job_stats), each with its GPU model, GPUs, submission time and how
  long it held its GPUs (held_s; a job still running is held until the window's end; a job still waiting gets the
  median hold of its model's jobs of the same size, else of its model).
- Supply: the nodes the lake knows (the `nodes` view: model and GPU count per node), each GPU in the layout
  telemetry last reported for it in the window (gpu_hourly's partition rows: placement_whatif.gpu_layouts, a layout
  its model cannot hold is replayed whole; a GPU with no partition rows is whole). "Add N GPUs of model X" adds
  nodes of that model's most common size (the last one smaller if N is not a multiple), all of their GPUs whole;
  "remove N" takes GPUs off that model's nodes, last node first, and on a node its whole GPUs before its
  partitioned ones (a partitioned GPU goes with its layout, once the node has no whole GPU left).
- Partitions (gpuledger/partitions.py's rules, as gpuledger.placement applies them): a job whose mig_profile is a
  partition ask asks `instances` free instances of its instance type on one node (frag_series.partition_asks:
  gpus / one instance's share, rounded), and waits for them; a partitioned GPU takes no whole-GPU job and no
  share. A partition ask that no node of its model can hold (no layout with enough instances of its type, e.g. a
  layout changed since) is replayed as its share of a whole GPU, as before layouts were read, so nothing that ran
  becomes unplaceable for lack of layouts.
- Idle rule: "reclaim GPUs idle for more than T hours" ends every job whose efficiency (busy / allocated
  GPU-hours) is below `idle_threshold` after T hours held, as a reclaiming controller would.
- Placement: the scheduler the simulated fleet uses (gpuledger.placement: FIFO per model with bounded backfill,
  best fit on nodes), so "today" is the same replay on the unchanged fleet, and the comparison is like for like.
  The measured figures of the window are returned beside both.
- Figures per model: jobs, wait mean / p50 / p90 (s), allocation (GPU-hours held in the window / GPU-hours the
  fleet had; a partition ask holds its instances' shares), and jobs that never fit (asking for more whole GPUs
  than any node of the model has whole, or a share where the model has no whole GPU).
- Bounds (`check`, for the dashboards' inputs): a scenario changes a GPU model the fleet has, removes at most
  the GPUs it has and adds at most MAX_ADD_PER_FLEET_GPU times the fleet's GPUs; the idle rule's T lies within
  the replayed window, which is at most MAX_WINDOW_DAYS long.
"""

from __future__ import annotations

import datetime as dt
import heapq
import math
from dataclasses import dataclass

import polars as pl

from gpuledger.analytics.frag_series import partition_asks
from gpuledger.analytics.placement_whatif import LAYOUT_COLUMNS, gpu_layouts, holdable
from gpuledger.partitions import parse_layout
from gpuledger.placement import Node, Placement, Scheduler

RESULT_SCHEMA = pl.Schema(
    {
        "variant": pl.String,  # measured, today (replayed), scenario
        "gpu_model": pl.String,
        "gpus": pl.Int64,
        "jobs": pl.Int64,
        "wait_mean_s": pl.Float64,
        "wait_p50_s": pl.Float64,
        "wait_p90_s": pl.Float64,
        "allocation_pct": pl.Float64,
        "unplaceable_jobs": pl.Int64,
    }
)


# Adding more than 4x today's fleet is a different cluster, not a what-if; and the replay's cost grows with the
# nodes (an unbounded 10,000,000 GPUs would be 1.25 M nodes: a minute of CPU and hundreds of MB per request).
MAX_ADD_PER_FLEET_GPU = 4
MAX_WINDOW_DAYS = 31  # the dashboards replay 7 days; a month of a 1,000-GPU fleet is ~100,000 jobs (4.4 weeks)


class ScenarioError(ValueError):
    """A what-if input outside what the fleet makes sensible; the message names each input and its allowed range."""


@dataclass(frozen=True)
class Scenario:
    model: str | None = None  # the GPU model whose count changes
    delta_gpus: int = 0  # GPUs added (> 0) or removed (< 0)
    idle_reclaim_h: float | None = None  # end idle jobs after this many hours held; None: no idle rule
    idle_threshold: float = 0.05  # a job is idle when busy / allocated GPU-hours is below this

    def describe(self) -> str:
        parts = []
        if self.model and self.delta_gpus:
            parts.append(f"{self.delta_gpus:+d} {self.model} GPUs")
        if self.idle_reclaim_h is not None:
            parts.append(f"reclaim jobs under {self.idle_threshold:.0%} busy after {self.idle_reclaim_h:g} h")
        return ", ".join(parts) or "no change"


@dataclass(frozen=True)
class _Job:
    model_key: str
    gpus: float
    submitted_s: float
    hold_s: float
    # A partition ask: `instances` instances of this canonical type, each of `instance_milli` (partition_asks).
    partition: str | None = None
    instances: int = 0
    instance_milli: int = 0

    @property
    def whole(self) -> int:
        return int(math.ceil(self.gpus)) if self.gpus >= 1 else 0

    @property
    def milli(self) -> int:
        if self.partition is not None:
            return self.instance_milli
        return 1000 if self.gpus >= 1 else max(1, int(round(self.gpus * 1000)))


Layout = tuple[str, ...] | None  # a GPU's instance types (partitions.parse_layout), None whole
FleetNode = tuple[str, int, tuple[Layout, ...] | None]  # model, GPUs, per GPU its layout (None: every GPU whole)


def fleet_nodes(
    nodes: pl.DataFrame, scenario: Scenario | None = None, layouts: pl.DataFrame | None = None
) -> list[FleetNode]:
    """(model, GPUs, layouts) per node, changed as the scenario says (the module's docstring). `layouts`:
    LAYOUT_COLUMNS rows (placement_whatif.gpu_layouts), attached by node name; `nodes` then needs its `node`
    column. A node's partitioned GPUs come first (gpu_uuid order), its whole ones after: removal takes from the end."""
    per_node = _node_layouts(nodes, layouts)
    out: list[FleetNode] = []
    for i, (m, g) in enumerate(nodes.select("gpu_model", "gpu_count").iter_rows()):
        if not m or not g:
            continue
        parted = per_node.get(i, ())[: int(g)]
        out.append((m, int(g), (*parted, *[None] * (int(g) - len(parted))) if parted else None))
    if scenario is None or not scenario.model or not scenario.delta_gpus:
        return out
    sizes = [g for m, g, _ in out if m == scenario.model]
    if scenario.delta_gpus > 0:
        size = max(set(sizes), key=sizes.count) if sizes else 8
        left = scenario.delta_gpus
        while left > 0:
            out.append((scenario.model, min(size, left), None))
            left -= size
        return out
    left = -scenario.delta_gpus
    for i in range(len(out) - 1, -1, -1):
        m, g, lay = out[i]
        if m != scenario.model or left <= 0:
            continue
        take = min(g, left)
        out[i] = (m, g - take, lay[: g - take] if lay is not None else None)
        left -= take
    return [(m, g, lay if lay is not None and any(x is not None for x in lay) else None) for m, g, lay in out if g > 0]


def _node_layouts(nodes: pl.DataFrame, layouts: pl.DataFrame | None) -> dict[int, tuple[Layout, ...]]:
    """Row index of `nodes` -> its partitioned GPUs' layouts, in gpu_uuid order (a layout its model cannot hold is
    left whole, with placement_whatif's warning)."""
    if layouts is None or layouts.is_empty() or "node" not in nodes.columns:
        return {}
    inv = nodes.select("node", pl.col("gpu_model").alias("model"))
    held = holdable(layouts.select(LAYOUT_COLUMNS).filter(pl.col("node").is_in(inv["node"].to_list())), inv)
    models = dict(inv.iter_rows())
    by_node: dict[str, list[Layout]] = {}
    for node, _, layout in held.drop_nulls("layout").sort("node", "gpu_uuid").iter_rows():
        by_node.setdefault(node, []).append(parse_layout(layout, models.get(node)))
    return {i: tuple(by_node[n]) for i, n in enumerate(nodes["node"]) if n in by_node}


def demand(stats: pl.DataFrame, start: dt.datetime, end: dt.datetime, scenario: Scenario | None = None) -> pl.DataFrame:
    """The window's jobs with the hold time the replay gives them (see the module's docstring)."""
    window_end_s = end.timestamp()
    jobs = stats.filter(
        (pl.col("submitted_at") >= start)
        & (pl.col("submitted_at") < end)
        & pl.col("gpu_model").is_not_null()
        & (pl.col("gpus") > 0)
    ).with_columns(
        pl.when(pl.col("held_s").is_not_null() & (pl.col("held_s") > 0))
        .then(pl.col("held_s"))
        .when(pl.col("scheduled_at").is_not_null())
        .then(pl.lit(window_end_s) - pl.col("scheduled_at").dt.epoch("us") / 1e6)
        .otherwise(None)
        .alias("hold_s")
    )
    by_size = jobs.group_by("gpu_model", "gpus").agg(pl.col("hold_s").median().alias("_size_h"))
    by_model = jobs.group_by("gpu_model").agg(pl.col("hold_s").median().alias("_model_h"))
    jobs = (
        jobs.join(by_size, on=["gpu_model", "gpus"], how="left")
        .join(by_model, on="gpu_model", how="left")
        .with_columns(pl.coalesce("hold_s", "_size_h", "_model_h", pl.lit(3600.0)).alias("hold_s"))
    )
    if scenario is not None and scenario.idle_reclaim_h is not None:
        idle = pl.col("efficiency").is_not_null() & (pl.col("efficiency") < scenario.idle_threshold)
        cap = scenario.idle_reclaim_h * 3600
        jobs = jobs.with_columns(
            pl.when(idle).then(pl.min_horizontal("hold_s", pl.lit(cap))).otherwise(pl.col("hold_s")).alias("hold_s")
        )
    # A partition ask (mig_profile, where `stats` has it: job_stats does not, the capacity page joins it from jobs)
    return (
        partition_asks(jobs)
        .select(
            "job_id",
            "gpu_model",
            "gpus",
            (pl.col("submitted_at").dt.epoch("us") / 1e6).alias("submitted_s"),
            "hold_s",
            pl.when(pl.col("profile") != "").then("profile").alias("partition"),
            "instances",
            "instance_milli",
        )
        .sort("submitted_s", "job_id")
    )


def replay(nodes: list[FleetNode], jobs: pl.DataFrame, start: dt.datetime, end: dt.datetime) -> pl.DataFrame:
    """Place the jobs in submission order on the nodes (fleet_nodes'); per model: wait figures and allocation in the
    window. A partition ask no node can hold as many instances of its type as it asks is replayed as its share."""
    sched = Scheduler(
        [Node(i, f"n{i}", m, [1000] * g, layouts=list(lay) if lay else None) for i, (m, g, lay) in enumerate(nodes)]
    )
    biggest: dict[str, int] = {}  # the most whole GPUs a node of the model has
    most_of: dict[tuple[str, str], int] = {}  # (model, instance type): the most instances of it one node has
    for n in sched.nodes:
        biggest[n.model_key] = max(biggest.get(n.model_key, 0), sum(1 for f in n.free_milli if f == 1000))
        for t, k in n.free_of.items():
            most_of[(n.model_key, t)] = max(most_of.get((n.model_key, t), 0), k)
    t0, t1 = start.timestamp(), end.timestamp()
    waits: dict[str, list[float]] = {}
    held: dict[str, float] = {}
    unplaceable: dict[str, int] = {}
    events: list[tuple[float, int, Placement, str]] = []
    order = 0

    def start_job(job: _Job, p: Placement, now: float) -> None:
        nonlocal order
        waits.setdefault(job.model_key, []).append(now - job.submitted_s)
        end_s = now + job.hold_s
        gpus = len(p.gpus) * p.milli / 1000
        held[job.model_key] = held.get(job.model_key, 0.0) + gpus * max(0.0, min(end_s, t1) - max(now, t0))
        order += 1
        heapq.heappush(events, (end_s, order, p, job.model_key))

    if "partition" not in jobs.columns:  # demand()'s frame of a fleet without partition asks, built by hand
        jobs = jobs.with_columns(pl.lit(None, pl.String).alias("partition"), instances=None, instance_milli=None)
    arrivals = []
    cols = ("gpu_model", "gpus", "submitted_s", "hold_s", "partition", "instances", "instance_milli")
    for m, g, s, h, t, k, milli in jobs.select(cols).iter_rows():
        if t is not None and most_of.get((m, t), 0) >= k:
            arrivals.append(_Job(m, float(g), float(s), float(h), t, int(k), int(milli)))
        else:
            arrivals.append(_Job(m, float(g), float(s), float(h)))
    i = 0
    while i < len(arrivals) or events:
        if i < len(arrivals) and (not events or arrivals[i].submitted_s < events[0][0]):
            job = arrivals[i]
            i += 1
            need = 0 if job.partition is not None else job.whole if job.gpus >= 1 else 1
            if job.model_key not in sched.pending or need > biggest.get(job.model_key, 0):
                unplaceable[job.model_key] = unplaceable.get(job.model_key, 0) + 1
                continue
            sched.submit(job)
            for j, p in sched.schedule(job.model_key):
                start_job(j, p, job.submitted_s)
        else:
            now, _, p, model = heapq.heappop(events)
            sched.release(p)
            for j, pl_ in sched.schedule(model):
                start_job(j, pl_, now)
    capacity: dict[str, int] = {}
    for m, g, _ in nodes:
        capacity[m] = capacity.get(m, 0) + g
    rows = []
    for m in sorted(set(capacity) | set(waits) | set(unplaceable)):
        w = sorted(waits.get(m, []))
        rows.append(
            {
                "gpu_model": m,
                "gpus": capacity.get(m, 0),
                "jobs": len(w),
                "wait_mean_s": sum(w) / len(w) if w else None,
                "wait_p50_s": _quantile(w, 0.5),
                "wait_p90_s": _quantile(w, 0.9),
                "allocation_pct": 100 * held.get(m, 0.0) / (capacity[m] * (t1 - t0)) if capacity.get(m) else None,
                "unplaceable_jobs": unplaceable.get(m, 0),
            }
        )
    return pl.DataFrame(rows, schema={k: v for k, v in RESULT_SCHEMA.items() if k != "variant"})


def _quantile(sorted_values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default, DuckDB's quantile_cont)."""
    if not sorted_values:
        return None
    pos = q * (len(sorted_values) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def measured(stats: pl.DataFrame, fleet: pl.DataFrame, start: dt.datetime, end: dt.datetime) -> pl.DataFrame:
    """What the window actually saw: waits of the jobs submitted in it, allocation from fleet_hourly."""
    jobs = stats.filter(
        (pl.col("submitted_at") >= start) & (pl.col("submitted_at") < end) & pl.col("queue_s").is_not_null()
    )
    waits = jobs.group_by("gpu_model").agg(
        pl.len().cast(pl.Int64).alias("jobs"),
        pl.col("queue_s").mean().alias("wait_mean_s"),
        pl.col("queue_s").quantile(0.5, "linear").alias("wait_p50_s"),
        pl.col("queue_s").quantile(0.9, "linear").alias("wait_p90_s"),
    )
    alloc = (
        fleet.filter((pl.col("hour") >= start) & (pl.col("hour") < end))
        .group_by("gpu_model")
        .agg(
            pl.col("gpus").max().cast(pl.Int64).alias("gpus"),
            (100 * pl.col("allocated_gpus").sum() / pl.col("gpus").sum()).alias("allocation_pct"),
        )
    )
    return (
        alloc.join(waits, on="gpu_model", how="full", coalesce=True)
        .with_columns(pl.lit(0, pl.Int64).alias("unplaceable_jobs"))
        .select([c for c in RESULT_SCHEMA if c != "variant"])
        .sort("gpu_model")
    )


def whatif(
    nodes: pl.DataFrame,
    stats: pl.DataFrame,
    fleet: pl.DataFrame,
    start: dt.datetime,
    end: dt.datetime,
    scenario: Scenario,
    hourly: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Measured, replayed today and the scenario, one row per variant and model (RESULT_SCHEMA). `hourly`: the
    window's gpu_hourly rows (hour, node, gpu_uuid, parent_gpu_uuid, mig_profile; partition rows are enough) the
    layouts come from; None: every GPU whole."""
    cols = ("node", "gpu_uuid", "parent_gpu_uuid", "mig_profile")  # typed even where a lake's query found no row
    layouts = gpu_layouts(hourly.with_columns(pl.col(cols).cast(pl.String))) if hourly is not None else None
    today = demand(stats, start, end)
    # The idle rule is the only part of a scenario that changes demand; without it both replays share one.
    changed_demand = demand(stats, start, end, scenario) if scenario.idle_reclaim_h is not None else today
    base = replay(fleet_nodes(nodes, layouts=layouts), today, start, end)
    changed = replay(fleet_nodes(nodes, scenario, layouts), changed_demand, start, end)
    return pl.concat(
        [
            measured(stats, fleet, start, end).with_columns(pl.lit("measured").alias("variant")),
            base.with_columns(pl.lit("today").alias("variant")),
            changed.with_columns(pl.lit("scenario").alias("variant")),
        ],
        how="diagonal_relaxed",
    ).select(RESULT_SCHEMA.names())


def check(scenario: Scenario, nodes: pl.DataFrame, start: dt.datetime, end: dt.datetime) -> None:
    """Raise ScenarioError naming every input of the scenario outside its bounds (the module's docstring)."""
    fleet = fleet_nodes(nodes)
    have = sorted({m for m, _, _ in fleet})
    fleet_gpus = sum(g for _, g, _ in fleet)
    problems = []
    window_h = (end - start).total_seconds() / 3600
    if not 0 < window_h <= MAX_WINDOW_DAYS * 24:
        problems.append(
            f"the replayed window must be longer than 0 and at most {MAX_WINDOW_DAYS} days, not {start} to {end}"
        )
    if scenario.model and scenario.model not in have:
        problems.append(
            f"GPU model {scenario.model!r} is not in this fleet (its nodes have: {', '.join(have) or 'none'})"
        )
    elif scenario.delta_gpus:
        if not scenario.model:
            problems.append("GPUs to add needs a GPU model")
        else:
            model_gpus = sum(g for m, g, _ in fleet if m == scenario.model)
            most = MAX_ADD_PER_FLEET_GPU * fleet_gpus
            if not -model_gpus <= scenario.delta_gpus <= most:
                problems.append(
                    f"GPUs to add must be between -{model_gpus} and +{most} for {scenario.model}, not "
                    f"{scenario.delta_gpus:+d} (it has {model_gpus} GPUs to remove; at most "
                    f"{MAX_ADD_PER_FLEET_GPU}x the fleet's {fleet_gpus} GPUs can be added)"
                )
    t = scenario.idle_reclaim_h
    if t is not None and not (math.isfinite(t) and 0 <= t <= max(window_h, 0)):
        problems.append(
            f"the reclaim time must be between 0 and {max(window_h, 0):g} hours (the replayed window), not {t:g}"
        )
    if not 0 <= scenario.idle_threshold <= 1:
        problems.append(
            f"the idle threshold must be between 0 and 1 (a share of busy time), not {scenario.idle_threshold:g}"
        )
    if problems:
        raise ScenarioError("; ".join(problems))


def for_dashboard(
    nodes: pl.DataFrame,
    stats: pl.DataFrame,
    fleet: pl.DataFrame,
    start: dt.datetime,
    end: dt.datetime,
    model: str | None,
    delta_gpus: int,
    idle_reclaim_h: float | None,
    hourly: pl.DataFrame | None = None,
) -> tuple[str, pl.DataFrame]:
    """The what-if as the capacity page calls it (handed to dashboards.app.create_app by the CLI).

    For one GPU model (the one picked): models never share GPUs, so the others' figures cannot change with
    it, and replaying only its jobs keeps the answer interactive (a week of a 1,000-GPU fleet: 22,000 jobs).
    Raises ScenarioError (a ValueError) naming each input outside its bounds (`check`). `hourly`: as `whatif`'s
    (layouts attach by node name, so the cut to the model keeps its nodes' own).
    """
    scenario = Scenario(model, delta_gpus, idle_reclaim_h)
    check(scenario, nodes, start, end)  # against the whole fleet, before it is cut to the model
    if model:
        nodes, stats, fleet = (f.filter(pl.col("gpu_model") == model) for f in (nodes, stats, fleet))
    return scenario.describe(), whatif(nodes, stats, fleet, start, end, scenario, hourly)


STRICTER_RULES_H = (0.5, 1.0, 2.0)  # the waste page's "what a stricter rule would have freed"


def idle_rule_freed(
    stats: pl.DataFrame,
    start: dt.datetime,
    end: dt.datetime,
    hours: tuple[float, ...] = STRICTER_RULES_H,
    idle_threshold: float = Scenario.idle_threshold,
) -> pl.DataFrame:
    """GPU-hours the what-if's idle rule would have given back, per rule and tenant: for each `hours` T, the jobs
    submitted in the window (`demand`'s) whose efficiency is below `idle_threshold` lose what they held beyond T,
    times their GPUs. `stats` is job_stats' rows (job_id, tenant, gpu_model, gpus, submitted_at, scheduled_at,
    held_s, efficiency). Columns: idle_after_h, tenant, jobs (cut short), freed_gpu_hours."""
    today = demand(stats, start, end).select("job_id", "gpus", "hold_s")
    tenants = stats.select("job_id", "tenant").unique("job_id")
    out = []
    for h in hours:
        cut = demand(stats, start, end, Scenario(idle_reclaim_h=h, idle_threshold=idle_threshold))
        freed = (
            today.join(cut.select("job_id", pl.col("hold_s").alias("_cut")), on="job_id")
            .with_columns(((pl.col("hold_s") - pl.col("_cut")) * pl.col("gpus") / 3600).alias("freed_gpu_hours"))
            .filter(pl.col("freed_gpu_hours") > 0)
            .join(tenants, on="job_id", how="left")
            .group_by("tenant")
            .agg(pl.len().alias("jobs"), pl.col("freed_gpu_hours").sum())
            .with_columns(pl.lit(float(h)).alias("idle_after_h"))
        )
        out.append(freed)
    schema = {"idle_after_h": pl.Float64, "tenant": pl.String, "jobs": pl.Int64, "freed_gpu_hours": pl.Float64}
    if not out:
        return pl.DataFrame(schema=schema)
    return (
        pl.concat(out, how="diagonal_relaxed")
        .select([pl.col(c).cast(t) for c, t in schema.items()])
        .sort("idle_after_h", "freed_gpu_hours", "tenant", descending=[False, True, False])
    )
