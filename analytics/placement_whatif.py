"""Placement what-if: what a fragmentation-aware scheduler (FGD) would free on this fleet, against what was measured.

The period's real jobs are replayed, in arrival order, on the period's real inventory, under each policy of
analytics/fragmentation/replay.py (the artifact's FGD and BestFit: the replay whose curves tests/analytics/
test_fragmentation.py checks against the paper's), and compared with the lake's measured `fragmentation` rows.

Inputs (`Inputs`, read from the lake by `read_inputs`):
- Jobs: every job of the cluster alive in [start, end): submitted before the end and not finished before the start
  (so the load already running when the period opens is part of it), GPU jobs only, ordered by submission time.
  A share of one GPU is one pod of share x 1000 milli; k >= 1 GPUs is k whole GPUs (a fractional k rounds up),
  as analytics/frag_series.py reads requests. A partition ask (jobs.mig_profile: a MIG profile, an AMD compute
  partition, an Ascend vNPU template) is a pod of `profile` its instance type asking that many instances, each of
  one instance's share (frag_series.job_pods; gpuledger/partitions.py). Jobs carry no CPU request, so CPU never
  blocks a placement.
- Inventory: the cluster's nodes seen in the period (`nodes`: model and GPU count; CPU from a `cpu_milli` label,
  as an imported trace has, else unlimited). A job of a model the inventory lacks is no placement question and is
  left out. Each node's `gpu_layout` (partitions.py's replay frame) is from the period's gpu_hourly rows
  (`layouts`): a physical GPU that had partition rows is replayed with the last layout it reported in the period
  (its partitions' instance types, sorted); a GPU with none, or a node whose GPUs report no telemetry (an imported
  trace), is whole (null). A node's GPUs are taken in gpu_uuid order, as many as its GPU count (the ones telemetry
  does not name are whole).
- Workload M (what "fragmented" means): the one the measured table used (frag_series): the cluster's imported pod
  shapes when it has them (one M for the whole cluster, and then a job may only use nodes of its own model), else
  each GPU model's own jobs, every job the lake holds (then each model is replayed on its own nodes).

The replay (the artifact's method): pods placed one by one on an empty fleet, no departures, until arrived GPU
demand reaches ARRIVAL_CAP x capacity (later pods would only meet a full fleet). Per policy and GPU model:
- At the measured load, the comparison point: the measured rows' mean allocated GPUs over the period (`load_gpus`,
  gpus - free_gpus of each hour, averaged). The replay is read after the pods that leave its allocated GPUs
  closest to that load (with a cluster-wide M, the models' loads summed; `load_gpus` of a policy's row is the
  replay's own, which whole pods can leave a little off): free_gpus, fragmented_gpus (F(M) of the replayed node
  state, in GPUs) and frag_pct (fragmented over free, %).
- At capacity, the artifact's headline (its "100% arrived"): after the first pods whose demand reaches the
  model's (or the cluster's) GPUs: arrived_gpus, allocated_gpus, placed_pct (allocated over arrived, %) and
  pods_unplaced (pods that found no node). If the period's demand never reaches it, at its last pod.
- The curve (`curves`): arrival_bins of the replay log, fragmentation and allocation against arrived demand.

"Freed" (per model; the fleet row sums the models):
    freed_gpus      = measured mean fragmented GPUs - the policy's fragmented GPUs at the same load
    freed_gpu_hours = freed_gpus x the model's measured hours in the period (the hours its fragmentation rows cover)
    freed_usd       = freed_gpus x the sum, over those hours, of the model's rate per GPU-hour
i.e. free capacity that the typical jobs could not use under today's placement but could under the policy, held
for every measured hour and priced like any GPU-hour of that model (analytics/cost_allocation.charge_periods: the
rate card's matching rule and effective dates; an hour takes the rate in effect at its start). Negative when the
policy fragments more than was measured. A model with no rate has null freed_usd and is named in `unpriced`. It is
an estimate: the replay places the same jobs without departures, so it shows what the policy's packing leaves at
that load, not an hour-by-hour rerun of the period.

Frames in, frames out; `read_inputs` is the only function that reads (through gpuledger.lake.scan: either store).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from gpuledger.analytics.cost_allocation import charge_periods
from gpuledger.analytics.frag_series import (
    NO_CPU_LIMIT,
    ask_shape,
    instance_types,
    latest_nodes,
    partition_asks,
    task_types_of,
    task_types_of_shapes,
)
from gpuledger.analytics.fragmentation import POLICIES, arrival_bins, node_fragmentation, replay
from gpuledger.analytics.fragmentation.metric import MILLI
from gpuledger.config import Rate
from gpuledger.errors import UsageError
from gpuledger.partitions import format_layout, free_instances, parse_layout, split_layout

log = logging.getLogger(__name__)

MEASURED = "measured"  # the row of what the lake measured under today's scheduler
ARRIVAL_CAP = 1.3  # the artifact replays to 130% of capacity: past 100% the curves show who fills up first
SEED = 0  # the node order that breaks ties (replay.py); one fixed seed, so a rerun gives the same figures

SUMMARY_SCHEMA = pl.Schema(
    {
        "policy": pl.String,
        "gpu_model": pl.String,  # null: the fleet (every model summed)
        "gpus": pl.Int64,
        "load_gpus": pl.Float64,
        "free_gpus": pl.Float64,
        "fragmented_gpus": pl.Float64,
        "frag_pct": pl.Float64,
        "arrived_gpus": pl.Float64,
        "allocated_gpus": pl.Float64,
        "placed_pct": pl.Float64,
        "pods_unplaced": pl.Int64,
        "freed_gpus": pl.Float64,
        "freed_gpu_hours": pl.Float64,
        "freed_usd": pl.Float64,
    }
)
CURVE_SCHEMA = pl.Schema(
    {
        "policy": pl.String,
        "gpu_model": pl.String,  # null: one curve for the whole cluster (a cluster-wide M)
        "arrived_pct": pl.Int64,
        "alloc_pct": pl.Float64,
        "frag_pct": pl.Float64,
    }
)
NODE_COLUMNS = ("node", "gpu_model", "gpu_count", "labels", "first_seen", "last_seen")
JOB_COLUMNS = ("job_id", "gpu_model", "gpus", "mig_profile", "submitted_at")
LAYOUT_COLUMNS = ("node", "gpu_uuid", "layout")
MEASURED_COLUMNS = ("ts", "gpu_model", "gpus", "free_gpus", "fragmented_gpus")


@dataclass(frozen=True)
class Inputs:
    """What the what-if reads, for one cluster and period (see the module's docstring).

    nodes: NODE_COLUMNS (latest_nodes rows). jobs: JOB_COLUMNS, the period's. workload: gpu_model, gpus,
    mig_profile, pods (every job of the cluster, counted). shapes: pod_shapes rows (cpu_milli, gpu_milli, num_gpu,
    gpu_spec, pods), maybe none. measured: MEASURED_COLUMNS, the period's fragmentation rows. layouts:
    LAYOUT_COLUMNS (gpu_layouts: each physical GPU telemetry saw in the period, layout null when whole), maybe none.
    """

    nodes: pl.DataFrame
    jobs: pl.DataFrame
    workload: pl.DataFrame
    shapes: pl.DataFrame
    measured: pl.DataFrame
    layouts: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema={c: pl.String for c in LAYOUT_COLUMNS}))


@dataclass(frozen=True)
class Comparison:
    summary: pl.DataFrame  # SUMMARY_SCHEMA: measured then each policy, per model, then the fleet rows
    curves: pl.DataFrame  # CURVE_SCHEMA
    unpriced: list[str]  # models with freed GPUs and no rate


def period(first: dt.date, last: dt.date) -> tuple[dt.datetime, dt.datetime]:
    """[first 00:00, the day after last 00:00) UTC: the CLI's and the dashboards' inclusive day ranges."""
    if first > last:
        raise UsageError(f"--from {first} is after --to {last}")
    start = dt.datetime.combine(first, dt.time(), dt.timezone.utc)
    return start, dt.datetime.combine(last + dt.timedelta(days=1), dt.time(), dt.timezone.utc)


def last_measured_day(lake, cluster: str) -> dt.date:
    """The last UTC day of the cluster's measured fragmentation (the default period ends there)."""
    from gpuledger.lake import scan

    last = scan(lake, "fragmentation").filter(pl.col("cluster") == cluster).select(pl.col("ts").max()).collect().item()
    if last is None:
        raise UsageError(
            f"no measured fragmentation for cluster {cluster!r} in the lake: run `gpuledger analyze` first"
        )
    return last.date()


def read_inputs(lake, cluster: str, start: dt.datetime, end: dt.datetime, model: str | None = None) -> Inputs:
    """The Inputs of `cluster` over [start, end) from the lake (either store); `model`: that GPU model only."""
    from gpuledger.analytics.jobs import latest
    from gpuledger.lake import scan

    mine = pl.col("cluster") == cluster
    nodes = latest_nodes(scan(lake, "nodes"), cluster).filter(
        (pl.col("first_seen") < end) & (pl.col("last_seen") >= start)
    )
    every = (
        latest(scan(lake, "jobs").filter(mine))
        .filter((pl.col("gpus") > 0) & pl.col("gpu_model").is_not_null())
        .select(*JOB_COLUMNS, "finished_at")
        .collect()
    )
    alive = (pl.col("submitted_at") < end) & (pl.col("finished_at").is_null() | (pl.col("finished_at") > start))
    jobs = every.filter(alive).select(JOB_COLUMNS)
    workload = every.group_by("gpu_model", "gpus", "mig_profile").agg(pl.len().cast(pl.Int64).alias("pods"))
    shapes = scan(lake, "pod_shapes").filter(mine).collect()
    days = pl.col("date").is_between(start.date(), end.date())
    hourly = (
        scan(lake, "gpu_hourly")
        .filter(mine & days & (pl.col("hour") >= start) & (pl.col("hour") < end))
        .select("hour", "node", "gpu_uuid", "parent_gpu_uuid", "mig_profile")
        .collect()
    )
    measured = (
        scan(lake, "fragmentation")
        .filter(mine & pl.col("date").is_between(start.date(), end.date()))
        .filter((pl.col("ts") >= start) & (pl.col("ts") < end))
        .select(MEASURED_COLUMNS)
        .collect()
    )
    if model is not None:
        nodes, jobs, workload, measured = (
            f.filter(pl.col("gpu_model") == model) for f in (nodes, jobs, workload, measured)
        )
    return Inputs(nodes, jobs, workload, shapes, measured, gpu_layouts(hourly))


def gpu_layouts(hourly: pl.DataFrame) -> pl.DataFrame:
    """LAYOUT_COLUMNS from gpu_hourly rows (hour, node, gpu_uuid, parent_gpu_uuid, mig_profile): each physical GPU
    (a row of its own, or named by its partitions' parent_gpu_uuid) on the node it last reported from, and the
    last layout it had: the instance types of its partition rows of its latest hour with any (sorted, joined by
    ","); null for a GPU never partitioned in these rows. A partition of unknown profile is left out."""
    own = hourly.filter(pl.col("parent_gpu_uuid").is_null()).select("hour", "node", "gpu_uuid")
    kids = hourly.filter(pl.col("parent_gpu_uuid").is_not_null())
    gpus = (
        pl.concat([own, kids.select("hour", "node", pl.col("parent_gpu_uuid").alias("gpu_uuid"))])
        .sort("hour", "node")
        .group_by("gpu_uuid")
        .agg(pl.col("node").last())
    )
    typed = kids.with_columns(instance_types(pl.col("mig_profile")).alias("type")).drop_nulls("type")
    last = typed.filter(pl.col("hour") == pl.col("hour").max().over("parent_gpu_uuid"))
    layout = last.group_by(pl.col("parent_gpu_uuid").alias("gpu_uuid")).agg(
        pl.col("type").sort().str.join(",").alias("layout")
    )
    return gpus.join(layout, on="gpu_uuid", how="left").select(LAYOUT_COLUMNS).sort("node", "gpu_uuid")


def check(inputs: Inputs, cluster: str, start: dt.datetime, end: dt.datetime) -> None:
    """UsageError naming what is missing: no inventory, no jobs on it, or no measured figures to compare with."""
    when = f"cluster {cluster!r} from {start:%Y-%m-%d} to {end - dt.timedelta(microseconds=1):%Y-%m-%d}"
    inventory = _inventory(inputs.nodes, inputs.layouts)
    if inventory.is_empty():
        raise UsageError(f"no GPU nodes in the lake's nodes table for {when}: there is no inventory to replay on")
    jobs = inputs.jobs.filter(pl.col("gpu_model").is_in(inventory["model"].unique().to_list()))
    if jobs.is_empty():
        raise UsageError(f"no GPU jobs of the inventory's models were submitted or running for {when}")
    if inputs.measured.is_empty():
        raise UsageError(f"no measured fragmentation for {when}: run `gpuledger analyze` over that period first")


def _inventory(nodes: pl.DataFrame, layouts: pl.DataFrame | None = None) -> pl.DataFrame:
    """replay()'s cluster frame: node, model, cpu_milli (the cpu_milli label, else unlimited), gpus and gpu_layout
    (per GPU: null whole, else its layout; see the module's docstring)."""
    cpu = pl.col("labels").list.eval(pl.element().filter(pl.element().struct.field("key") == "cpu_milli"))
    inv = nodes.filter((pl.col("gpu_count") > 0) & pl.col("gpu_model").is_not_null()).select(
        "node",
        pl.col("gpu_model").alias("model"),
        cpu.list.first().struct.field("value").cast(pl.Int64, strict=False).fill_null(NO_CPU_LIMIT).alias("cpu_milli"),
        pl.col("gpu_count").cast(pl.Int64).alias("gpus"),
    )
    if layouts is None:
        layouts = pl.DataFrame(schema={c: pl.String for c in LAYOUT_COLUMNS})
    layouts = holdable(layouts, inv)
    per_node = layouts.sort("node", "gpu_uuid").group_by("node", maintain_order=True).agg(pl.col("layout"))
    seen = pl.col("layout").fill_null(pl.lit([], pl.List(pl.String))).list.head(pl.col("gpus"))
    whole = pl.lit(None, pl.String).repeat_by(pl.col("gpus") - seen.list.len())
    return (
        inv.join(per_node, on="node", how="left", maintain_order="left")
        .with_columns(pl.concat_list(seen, whole).alias("gpu_layout"))
        .drop("layout")
    )


def holdable(layouts: pl.DataFrame, inv: pl.DataFrame) -> pl.DataFrame:
    """The layouts the node's model can hold (gpuledger.partitions.parse_layout); one the vendor's rule refuses (a
    model whose figures partitions.py does not know, telemetry of a layout changing mid-hour) is replayed whole,
    with a warning naming the GPU: the replay cannot place on a layout the device could not have."""
    models = dict(inv.select("node", "model").iter_rows())
    keep, verdict = [], {}  # (layout, model) -> why it is refused, None when it holds: each read once
    for node, gpu, layout in layouts.select(LAYOUT_COLUMNS).iter_rows():
        key = (layout, models.get(node))
        if layout is not None and key not in verdict:
            try:
                parse_layout(*key)
                verdict[key] = None
            except ValueError as e:
                verdict[key] = str(e)
        why = verdict.get(key)
        if why is not None:
            log.warning("what-if: GPU %s of node %s replayed whole: its layout %s: %s", gpu, node, layout, why)
        keep.append(why is None)
    return layouts.with_columns(pl.when(pl.Series(keep, dtype=pl.Boolean)).then("layout").alias("layout"))


def _pods(jobs: pl.DataFrame, spec: bool) -> pl.DataFrame:
    """replay()'s pods, in arrival order: a share of one GPU, whole GPUs, or instances of a partition type
    (`profile`, frag_series.partition_asks); `spec`: only the job's own model."""
    return (
        partition_asks(jobs.sort("submitted_at", "job_id", nulls_last=True))
        .select(
            "gpu_model",
            pl.lit(0, pl.Int64).alias("cpu_milli"),
            *ask_shape(clip=True),
            (pl.col("gpu_model") if spec else pl.lit("")).alias("gpu_spec"),
            "profile",
        )
        .with_columns((pl.col("num_gpu") * pl.col("gpu_milli")).alias("demand_milli"))
    )


def _first_reaching(cum: np.ndarray, target: float) -> int:
    """How many pods it takes for cumulative demand to reach `target` (all of them if it never does)."""
    return min(int(np.searchsorted(cum, target, side="left")) + 1, len(cum))


def _closest(allocated: np.ndarray, target: float) -> int:
    """How many pods (0 to all) leave allocated GPU milli closest to `target`; the fewest on a tie. Pods come whole
    (a 4-GPU pod moves the load by 4), so the first to reach the target may overshoot it by more than the one
    before falls short."""
    return int(np.argmin(np.abs(np.concatenate([[0], allocated]) - target)))


def _state_after(cluster: pl.DataFrame, pods: pl.DataFrame, log: pl.DataFrame, k: int) -> pl.DataFrame:
    """Node state (node_fragmentation's input) after the first k pods of a replay: its log says where each went.
    With the cluster's gpu_layout, each GPU's `gpu_partitions` too: its layout less the instances placed on it (a
    partition pod's gpu_index names the GPU of each instance it took, a GPU once per instance)."""
    asked = ["gpu_milli", "cpu_milli", *(["profile"] if "profile" in pods.columns else [])]
    placed = log.head(k).with_columns(pods.head(k).select(asked)).filter(pl.col("node").is_not_null())
    cpu_used = placed.group_by("node").agg(pl.col("cpu_milli").sum().alias("cpu_used"))
    held = (
        placed.explode("gpu_index")
        .drop_nulls("gpu_index")
        .group_by("node", "gpu_index")
        .agg(pl.col("gpu_milli").sum().alias("held"))
    )
    per_gpu = (
        cluster.select("node", "model", pl.int_ranges(pl.col("gpus")).alias("gpu_index"))
        .explode("gpu_index")
        .join(held, on=["node", "gpu_index"], how="left")
        .with_columns((MILLI - pl.col("held").fill_null(0)).alias("free"))
        .sort("node", "gpu_index")
    )
    partitioned = "gpu_layout" in cluster.columns
    if partitioned:
        per_gpu = per_gpu.join(_free_instances(cluster, placed), on=["node", "gpu_index"], how="left")
    free = per_gpu.group_by("node", maintain_order=True).agg(
        pl.col("free").alias("gpu_free_milli"), *([pl.col("partitions").alias("gpu_partitions")] if partitioned else [])
    )
    return (
        cluster.join(cpu_used, on="node", how="left")
        .join(free, on="node", how="left")
        .select(
            "node",
            "model",
            (pl.col("cpu_milli") - pl.col("cpu_used").fill_null(0)).alias("cpu_free_milli"),
            pl.col("gpu_free_milli").fill_null([]),
            *([pl.col("gpu_partitions").fill_null([])] if partitioned else []),
        )
    )


def _free_instances(cluster: pl.DataFrame, placed: pl.DataFrame) -> pl.DataFrame:
    """(node, gpu_index, partitions) of each partitioned GPU: its layout less the instances the placed pods hold
    (gpuledger.partitions.free_instances), joined by ","."""
    layouts = (
        cluster.select("node", pl.col("gpu_layout"), pl.int_ranges(pl.col("gpus")).alias("gpu_index"))
        .explode("gpu_layout", "gpu_index")
        .drop_nulls("gpu_layout")
    )
    out = {"node": [], "gpu_index": [], "partitions": []}
    held: dict[tuple[str, int], list[str]] = {}
    if "profile" in placed.columns:
        taken = placed.filter(pl.col("profile").fill_null("") != "").explode("gpu_index").drop_nulls("gpu_index")
        for node, index, profile in taken.select("node", "gpu_index", "profile").iter_rows():
            held.setdefault((node, index), []).append(profile)
    for node, layout, index in layouts.iter_rows():
        out["node"].append(node)
        out["gpu_index"].append(index)
        out["partitions"].append(format_layout(free_instances(split_layout(layout), held.get((node, index), []))))
    return pl.DataFrame(out, schema={"node": pl.String, "gpu_index": pl.Int64, "partitions": pl.String})


def _replay_group(
    cluster: pl.DataFrame, pods: pl.DataFrame, task_types: pl.DataFrame, load_gpus: float | None, policy: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One replay: per model the figures at the measured load and at capacity (SUMMARY_SCHEMA less freed), and
    its curve. `load_gpus` None: no measured load, so no figures at it."""
    capacity = int(cluster["gpus"].sum())
    demand = pods["demand_milli"].to_numpy()
    before = np.cumsum(demand) - demand
    pods = pods.filter(pl.Series(before < ARRIVAL_CAP * MILLI * capacity))
    asks = ["cpu_milli", "num_gpu", "gpu_milli", "gpu_spec", *(["profile"] if "profile" in pods.columns else [])]
    result = replay(cluster, pods.select(asks), task_types, policy, SEED)
    log = result.log
    cum = log["arrived_gpu_milli"].to_numpy()
    models = cluster.group_by("model").agg(pl.col("gpus").sum()).rename({"model": "gpu_model"})

    k_cap = _first_reaching(cum, MILLI * capacity)
    at_cap = (
        pods.head(k_cap)
        .with_columns(log.head(k_cap).select(pl.col("node").is_null().alias("unplaced")))
        .group_by("gpu_model")
        .agg(
            (pl.col("demand_milli").sum() / MILLI).alias("arrived_gpus"),
            (pl.col("demand_milli").filter(~pl.col("unplaced")).sum() / MILLI).alias("allocated_gpus"),
            pl.col("unplaced").sum().cast(pl.Int64).alias("pods_unplaced"),
        )
    )
    out = models.join(at_cap, on="gpu_model", how="left").with_columns(
        pl.col("arrived_gpus", "allocated_gpus").fill_null(0.0), pl.col("pods_unplaced").fill_null(0)
    )
    if load_gpus is not None:
        k = _closest(log["allocated_gpu_milli"].to_numpy(), MILLI * load_gpus)
        frag = node_fragmentation(_state_after(cluster, pods, log, k), task_types)
        at_load = frag.group_by(pl.col("model").alias("gpu_model")).agg(
            (pl.col("unallocated_milli").sum() / MILLI).alias("free_gpus"),
            (pl.col("frag_milli").sum() / MILLI).alias("fragmented_gpus"),
        )
        placed = pods.head(k).filter(log.head(k)["node"].is_not_null())
        held = placed.group_by("gpu_model").agg((pl.col("demand_milli").sum() / MILLI).alias("load_gpus"))
        out = out.join(at_load, on="gpu_model", how="left").join(held, on="gpu_model", how="left")
        out = out.with_columns(pl.col("load_gpus").fill_null(0.0))
    curve = arrival_bins(log, capacity)
    return out.with_columns(pl.lit(policy).alias("policy")), curve.with_columns(pl.lit(policy).alias("policy"))


def _pct(part: str, whole: str) -> pl.Expr:
    """part / whole in %, null (not NaN) when the whole is 0: no free GPU has no fragmented share."""
    return pl.when(pl.col(whole) > 0).then(100 * pl.col(part) / pl.col(whole))


def _measured(measured: pl.DataFrame) -> pl.DataFrame:
    """Per model over the period: the most GPUs, and the hourly means of allocated, free and fragmented GPUs."""
    return measured.group_by("gpu_model").agg(
        pl.col("gpus").max().cast(pl.Int64),
        (pl.col("gpus") - pl.col("free_gpus")).mean().alias("load_gpus"),
        pl.col("free_gpus").mean(),
        pl.col("fragmented_gpus").mean(),
    )


def hour_prices(measured: pl.DataFrame, rates: Iterable[Rate], start: dt.datetime, end: dt.datetime) -> pl.DataFrame:
    """Per model: its measured hours in [start, end), and what one GPU costs over them at the rate card (each hour
    at the rate in effect at its start; null if any of them has no rate)."""
    hours = measured.select("gpu_model", "ts").unique()
    periods = charge_periods(hours["gpu_model"].unique().to_list(), rates, start, end)
    within = (pl.col("period_start") <= pl.col("ts")) & (pl.col("ts") < pl.col("period_end"))
    return (
        hours.join(periods, on="gpu_model")
        .filter(within)
        .group_by("gpu_model")
        .agg(
            pl.len().cast(pl.Float64).alias("hours"),
            pl.when(pl.col("usd_per_gpu_hour").is_not_null().all())
            .then(pl.col("usd_per_gpu_hour").sum())
            .alias("usd_per_gpu"),
        )
    )


def compare(
    inputs: Inputs,
    rates: Sequence[Rate],
    start: dt.datetime,
    end: dt.datetime,
    policies: Sequence[str] = POLICIES,
) -> Comparison:
    """The measured figures and each policy's replay, per GPU model and for the fleet (see the module's docstring).

    Call `check` first: this assumes an inventory, jobs on it and measured rows."""
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise UsageError(f"unknown policy {', '.join(unknown)}; policies are: {', '.join(POLICIES)}")
    inventory = _inventory(inputs.nodes, inputs.layouts).sort("node")
    models = sorted(inventory["model"].unique().to_list())
    jobs = inputs.jobs.filter(pl.col("gpu_model").is_in(models))
    meas = _measured(inputs.measured.filter(pl.col("gpu_model").is_in(models)))
    load = dict(zip(meas["gpu_model"], meas["load_gpus"], strict=True))
    shapes = inputs.shapes.filter(pl.col("pods") > 0) if inputs.shapes.height else inputs.shapes
    if shapes.height:  # one M for the cluster (frag_series does the same): one replay over every node
        known = [load[m] for m in models if load.get(m) is not None]
        groups = [
            (None, inventory, _pods(jobs, spec=True), task_types_of_shapes(shapes), sum(known) if known else None)
        ]
    else:
        groups = [
            (
                m,
                inventory.filter(pl.col("model") == m),
                _pods(jobs.filter(pl.col("gpu_model") == m), spec=False),
                task_types_of(inputs.workload.filter(pl.col("gpu_model") == m)),
                load.get(m),
            )
            for m in models
        ]
    rows, curves = [], []
    for policy in policies:
        for name, cluster, pods, task_types, load_gpus in groups:
            if pods.is_empty() or task_types.is_empty():
                continue
            row, curve = _replay_group(cluster, pods, task_types, load_gpus, policy)
            rows.append(row)
            curves.append(curve.with_columns(pl.lit(name, pl.String).alias("gpu_model")))
    price = hour_prices(inputs.measured.filter(pl.col("gpu_model").is_in(models)), rates, start, end)
    replayed = pl.concat(rows, how="diagonal_relaxed").join(
        meas.select("gpu_model", pl.col("fragmented_gpus").alias("_measured")), on="gpu_model", how="left"
    )
    freed = pl.col("_measured") - pl.col("fragmented_gpus")
    replayed = (
        replayed.join(price, on="gpu_model", how="left")
        .with_columns(
            _pct("fragmented_gpus", "free_gpus").alias("frag_pct"),
            _pct("allocated_gpus", "arrived_gpus").alias("placed_pct"),
            freed.alias("freed_gpus"),
            (freed * pl.col("hours")).alias("freed_gpu_hours"),
            (freed * pl.col("usd_per_gpu")).alias("freed_usd"),
        )
        .filter(pl.col("gpu_model").is_in(models))
    )
    measured_rows = meas.with_columns(
        pl.lit(MEASURED).alias("policy"), _pct("fragmented_gpus", "free_gpus").alias("frag_pct")
    )
    per_model = pl.concat([measured_rows, replayed], how="diagonal_relaxed").select(SUMMARY_SCHEMA.names())
    order = {p: i for i, p in enumerate([MEASURED, *policies])}
    per_model = per_model.sort(pl.col("policy").replace_strict(order, return_dtype=pl.Int64), "gpu_model")
    fleet = _fleet(per_model, order)
    unpriced = sorted(
        replayed.filter(pl.col("usd_per_gpu").is_null() & (pl.col("freed_gpus") != 0))["gpu_model"].unique()
    )
    return Comparison(
        summary=pl.concat([per_model, fleet]).cast(SUMMARY_SCHEMA),
        curves=pl.concat(curves).select(CURVE_SCHEMA.names()).cast(CURVE_SCHEMA)
        if curves
        else pl.DataFrame(schema=CURVE_SCHEMA),
        unpriced=unpriced,
    )


def _fleet(per_model: pl.DataFrame, order: dict[str, int]) -> pl.DataFrame:
    """Per policy, every model summed (rates and shares recomputed from the sums)."""
    summed = ("gpus", "load_gpus", "free_gpus", "fragmented_gpus", "arrived_gpus", "allocated_gpus", "pods_unplaced")
    summed += ("freed_gpus", "freed_gpu_hours", "freed_usd")
    # A column no row of the policy has (the measured rows' allocation, say) stays null, not 0.
    kept = [pl.when(pl.col(c).is_not_null().any()).then(pl.col(c).sum()).alias(c) for c in summed]
    return (
        per_model.group_by("policy", maintain_order=True)
        .agg(kept)
        .with_columns(
            pl.lit(None, pl.String).alias("gpu_model"),
            _pct("fragmented_gpus", "free_gpus").alias("frag_pct"),
            _pct("allocated_gpus", "arrived_gpus").alias("placed_pct"),
        )
        .select(SUMMARY_SCHEMA.names())
        .sort(pl.col("policy").replace_strict(order, return_dtype=pl.Int64))
    )


def placement_whatif(
    lake,
    rates: Sequence[Rate],
    cluster: str,
    start: dt.datetime,
    end: dt.datetime,
    policies: Sequence[str] = POLICIES,
    model: str | None = None,
) -> Comparison:
    """read_inputs, check and compare: the CLI's `gpuledger whatif placement` and the fragmentation page's replay
    (the CLI binds the lake and the rate card and hands it to dashboards.app.create_app)."""
    inputs = read_inputs(lake, cluster, start, end, model)
    check(inputs, cluster, start, end)
    return compare(inputs, rates, start, end, policies)
