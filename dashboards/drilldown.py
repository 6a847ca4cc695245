"""The fleet pages' questions: one cluster, node, GPU or job, its telemetry, health events and the pods that held it.

Resolution by range (`resolution(f)`): up to 2 days the lake's own samples (gpu_samples, every scrape, with the
temperature, clocks, clocks event reasons and ECC counters only they have); up to 14 days 5-minute buckets
(gpu_5min); up to 92 days hours (gpu_hourly); beyond, days summed from the hours, so a year of one node is
8 GPUs x 365 points, not 70,080. Every question names its date partitions (`date BETWEEN`) and its GPU or node, so
DuckDB opens only the range's files and keeps only that GPU's rows.

Holds (security): when the viewer may see some tenants only (`f.scope`), or has picked one (`f.tenant`), a page
shows a GPU only if those tenants held it (gpu_allocations, through TENANT_SQL) in the range, and its telemetry and
health events only inside the times they held it: a sample whose time, or a bucket whose whole span, lies in one
of their holds (`inside`). A GPU, node or cluster they never held answers as one that does not exist. Pods come
from gpu_allocations, so each is the scope's own; the samples' pod columns are never shown.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import polars as pl

from gpuledger.dashboards.filters import CLUSTER_SQL, PHYSICAL_SQL, TENANT_SQL, Filters

GIB = 2**30
NATIVE_MAX_DAYS = 2
FIVE_MIN_MAX_DAYS = 14
HOURLY_MAX_DAYS = 92  # a quarter of hours per GPU: 2,208 points; beyond, days
ROWS_MAX = 1000  # pods and events listed on one page


@dataclass(frozen=True)
class Resolution:
    table: str
    time: str  # the table's time column
    width: dt.timedelta  # one row's span (a sample: none)
    daily: bool  # hours summed into days
    label: str

    @property
    def native(self) -> bool:
        return self.table == "gpu_samples"


NATIVE = Resolution("gpu_samples", "ts", dt.timedelta(0), False, "every sample (the lake's native resolution)")
FIVE_MIN = Resolution("gpu_5min", "bucket_start", dt.timedelta(minutes=5), False, "5-minute means")
HOURLY = Resolution("gpu_hourly", "hour", dt.timedelta(hours=1), False, "hourly means")
DAILY = Resolution("gpu_hourly", "hour", dt.timedelta(hours=1), True, "daily means (of the hourly rollup)")
NATIVE_ONLY = "temperature, SM and memory clocks, clocks event reasons and ECC counters"


def resolution(f: Filters) -> Resolution:
    if f.days <= NATIVE_MAX_DAYS:
        return NATIVE
    if f.days <= FIVE_MIN_MAX_DAYS:
        return FIVE_MIN
    return HOURLY if f.days <= HOURLY_MAX_DAYS else DAILY


def restricted(f: Filters) -> bool:
    """Whether the pages show only what some tenants held: the viewer's scope, or a tenant picked in the bar."""
    return f.scope is not None or f.tenant is not None


# Optional narrowing, each binding its value twice (null: no narrowing): GPUs by a list, a node and its cluster.
_GPUS_SQL = "(CAST(? AS VARCHAR[]) IS NULL OR list_contains(CAST(? AS VARCHAR[]), gpu_uuid))"
_NODE_SQL = "(CAST(? AS VARCHAR) IS NULL OR node = ?) AND (CAST(? AS VARCHAR) IS NULL OR cluster = ?)"


# -- holds -----------------------------------------------------------------------------------------------------------
HOLDS_SCHEMA = {"gpu_uuid": pl.String, "s": pl.Datetime("us", "UTC"), "e": pl.Datetime("us", "UTC")}


def holds(data, f: Filters, *, gpu_uuids: list[str] | None = None, node: str | None = None, cluster=None):
    """When the tenants of `f` held each GPU (of `gpu_uuids`, or of one node) in the range: `holds_of` their pods."""
    return holds_of(pods(data, f, gpu_uuids=gpu_uuids, node=node, cluster=cluster, limit=None), f)


def holds_of(allocations: pl.DataFrame, f: Filters) -> pl.DataFrame:
    """The holds of these gpu_allocations rows (TENANT_SQL's: the tenants of `f`), cut to the range, overlapping and
    touching ones merged. A page that lists the pods anyway derives the holds from them: one read of the year's
    gpu_allocations files (~0.14 s on a year of 1,000 GPUs) rather than two."""
    cut = allocations.drop_nulls("gpu_uuid").select(
        "gpu_uuid",
        pl.max_horizontal("start", pl.lit(f.start_ts, HOLDS_SCHEMA["s"])).alias("s"),
        pl.min_horizontal("end", pl.lit(f.end_ts, HOLDS_SCHEMA["e"])).alias("e"),
    )
    return merge(cut.filter(pl.col("s") < pl.col("e"))) if cut.height else pl.DataFrame(schema=HOLDS_SCHEMA)


def merge(intervals: pl.DataFrame) -> pl.DataFrame:
    """Per GPU, the union of its [s, e) intervals as disjoint ones: two jobs of a tenant back to back are one hold,
    so a 5-minute bucket across their seam counts as held."""
    ordered = intervals.sort("gpu_uuid", "s")
    reach = pl.col("e").cum_max().shift(1).over("gpu_uuid")  # the furthest end of the earlier intervals
    island = (reach.is_null() | (pl.col("s") > reach)).cast(pl.Int64).cum_sum().over("gpu_uuid")
    return (
        ordered.with_columns(island.alias("_island"))
        .group_by("gpu_uuid", "_island", maintain_order=True)
        .agg(pl.col("s").min(), pl.col("e").max())
        .drop("_island")
        .cast(HOLDS_SCHEMA)
    )


def inside(frame: pl.DataFrame, held: pl.DataFrame, width: dt.timedelta, t: str = "t") -> pl.DataFrame:
    """The rows of `frame` whose [t, t + width) lies wholly within one hold of their gpu_uuid (a sample: t in it).
    `held` is disjoint per GPU (`merge`), so the one hold that can contain a row is the last to start at or before
    it: an as-of join, linear in the rows (a join on the GPU alone made a year of a node's hours times a tenant's
    holds, ~35M pairs and 10 s)."""
    if frame.is_empty():
        return frame
    rows = frame.with_row_index("_row").sort(t)
    marks = held.sort("s").with_columns(pl.col("s").alias("_s"))
    # Both sides are sorted on their keys just above (polars cannot check it within `by` groups, and would warn).
    found = rows.join_asof(marks, left_on=t, right_on="_s", by="gpu_uuid", strategy="backward", check_sortedness=False)
    within = pl.col("e").is_not_null() & (pl.col(t) < pl.col("e")) & (pl.col(t) + width <= pl.col("e"))
    keep = found.filter(within)["_row"]
    return frame.with_row_index("_row").filter(pl.col("_row").is_in(keep.implode())).drop("_row")


# -- telemetry -------------------------------------------------------------------------------------------------------
def _series_sql(res: Resolution, where: str) -> str:
    if res.native:
        return (
            "SELECT ts AS t, cluster, node, gpu_uuid, gpu_index, parent_gpu_uuid, mig_profile, model, "
            "util_gpu_pct, 100 * sm_active_ratio AS sm_active_pct, mem_used_bytes / 2^30 AS mem_used_gib, "
            "mem_total_bytes / 2^30 AS mem_total_gib, power_w, power_limit_w, temp_c, sm_clock_mhz, mem_clock_mhz, "
            "throttle_reasons, ecc_corrected_total, ecc_uncorrected_total, 1 AS samples "
            f"FROM gpu_samples WHERE {where} ORDER BY gpu_uuid, ts"
        )
    return (
        f"SELECT {res.time} AS t, cluster, node, gpu_uuid, parent_gpu_uuid, model, util_gpu_pct_mean AS util_gpu_pct, "
        "100 * sm_active_ratio_mean AS sm_active_pct, mem_used_bytes_max / 2^30 AS mem_used_gib, "
        "power_w_mean AS power_w, 100 * allocated_ratio AS allocated_pct, samples "
        f"FROM {res.table} WHERE {where} ORDER BY gpu_uuid, {res.time}"
    )


def series(data, f: Filters, *, gpu_uuid=None, node=None, cluster=None) -> tuple[pl.DataFrame, Resolution]:
    """(telemetry rows of one GPU and its MIG instances, or of every GPU of one node, at `resolution(f)`, the
    resolution). Held-only when `restricted(f)`. Columns: t, identity, util_gpu_pct, sm_active_pct, mem_used_gib,
    power_w, samples, and the native-only ones at native resolution (allocated_pct at the others)."""
    frame, res = read_series(data, f, gpu_uuid=gpu_uuid, node=node, cluster=cluster)
    held = None
    if restricted(f) and frame.height:
        held = holds(data, f, gpu_uuids=frame["gpu_uuid"].unique().to_list(), node=node, cluster=cluster)
    return finish_series(frame, res, held), res


def read_series(data, f: Filters, *, gpu_uuid=None, node=None, cluster=None) -> tuple[pl.DataFrame, Resolution]:
    """The rows `series` starts from: every row of the range (whoever held the GPU), hours where it sums days.
    Not for showing before `finish_series` cuts them to the holds."""
    res = resolution(f)
    if res.daily and not restricted(f):  # whole days of every holder: the snapshot's days (gpu_daily)
        return _daily_series(data, f, gpu_uuid=gpu_uuid, node=node, cluster=cluster), res
    time = res.time
    where = (
        f"date BETWEEN ? AND ? AND {time} >= ? AND {time} < ? AND {CLUSTER_SQL} "
        f"AND (CAST(? AS VARCHAR) IS NULL OR gpu_uuid = ? OR parent_gpu_uuid = ?) AND {_NODE_SQL}"
    )
    params = [f.start, f.end, f.start_ts, f.end_ts, *f.cluster_args, gpu_uuid, gpu_uuid, gpu_uuid]
    return data.frame(_series_sql(res, where), params + [node, node, cluster, cluster], lake=True), res


def _daily_series(data, f: Filters, *, gpu_uuid=None, node=None, cluster=None) -> pl.DataFrame:
    """`daily(hourly rows)` read from the snapshot's days: the same means (each hour weighted by its samples) and
    peaks, without reading the range's hours from the lake."""
    return data.frame(
        "SELECT timezone('UTC', CAST(date AS TIMESTAMP)) AS t, cluster, node, gpu_uuid, parent_gpu_uuid, model, "
        "util_sum / util_n AS util_gpu_pct, 100 * sm_sum / sm_n AS sm_active_pct, power_sum / power_n AS power_w, "
        "100 * allocated_samples / samples AS allocated_pct, mem_used_bytes_max / 2^30 AS mem_used_gib, samples "
        f"FROM gpu_daily WHERE date BETWEEN ? AND ? AND {CLUSTER_SQL} "
        f"AND (CAST(? AS VARCHAR) IS NULL OR gpu_uuid = ? OR parent_gpu_uuid = ?) AND {_NODE_SQL} ORDER BY gpu_uuid, t",
        [f.start, f.end, *f.cluster_args, gpu_uuid, gpu_uuid, gpu_uuid, node, node, cluster, cluster],
    )


def finish_series(frame: pl.DataFrame, res: Resolution, held: pl.DataFrame | None) -> pl.DataFrame:
    """`read_series`' rows inside `held` (None: all of them), then summed into days where `res` says (after the cut:
    a day's mean is of the held hours only)."""
    if held is not None:
        frame = inside(frame, held, res.width)
    return daily(frame) if res.daily else frame


def daily(hourly: pl.DataFrame) -> pl.DataFrame:
    """Hourly rows summed into UTC days: means weighted by each hour's samples, the day's peak memory."""
    w = pl.col("samples")
    mean = lambda c: ((pl.col(c) * w).sum() / w.filter(pl.col(c).is_not_null()).sum()).alias(c)  # noqa: E731
    return (
        hourly.with_columns(pl.col("t").dt.truncate("1d"))
        .group_by("t", "cluster", "node", "gpu_uuid", "parent_gpu_uuid", "model", maintain_order=True)
        .agg(
            *(mean(c) for c in ("util_gpu_pct", "sm_active_pct", "power_w", "allocated_pct")),
            pl.col("mem_used_gib").max(),
            w.sum(),
        )
        .sort("gpu_uuid", "t")
    )


def summary(frame: pl.DataFrame) -> pl.DataFrame:
    """Per GPU over the rows shown: sample-weighted mean utilization, SM activity and power, peak memory; at native
    resolution also the peak temperature and the share of samples whose clocks something other than idleness held
    down (any clocks event reason but GpuIdle)."""
    if frame.is_empty():
        return pl.DataFrame()
    w = pl.col("samples")
    aggs = [
        pl.col("model").last(),
        pl.col("parent_gpu_uuid").last(),
        ((pl.col("util_gpu_pct") * w).sum() / w.filter(pl.col("util_gpu_pct").is_not_null()).sum()).alias(
            "util_gpu_pct_mean"
        ),
        ((pl.col("sm_active_pct") * w).sum() / w.filter(pl.col("sm_active_pct").is_not_null()).sum()).alias(
            "sm_active_pct_mean"
        ),
        pl.col("mem_used_gib").max().alias("mem_used_gib_max"),
        ((pl.col("power_w") * w).sum() / w.filter(pl.col("power_w").is_not_null()).sum()).alias("power_w_mean"),
        w.sum().alias("samples"),
    ]
    native = "temp_c" in frame.columns
    if native:
        limited = (pl.col("throttle_reasons") & ~1) != 0  # ~1: every bit but GpuIdle (clock_events.IDLE)
        aggs += [
            pl.col("gpu_index").last(),
            pl.col("mig_profile").last(),
            pl.col("temp_c").max().alias("temp_c_max"),
            (100 * limited.sum() / pl.col("throttle_reasons").count()).alias("clocks_limited_pct"),
        ]
    out = frame.group_by("cluster", "node", "gpu_uuid", maintain_order=True).agg(aggs)
    order = ["gpu_index", "gpu_uuid"] if native else ["gpu_uuid"]
    return out.sort(order, nulls_last=True)


# -- events, pods ----------------------------------------------------------------------------------------------------
def events(data, f: Filters, *, gpu_uuids=None, node=None, cluster=None, held: pl.DataFrame | None = None):
    """Health events (Xid, ECC, lost, throttle, ...) of these GPUs, or of one node, in the range, newest first.
    Held-only when `restricted(f)`: an event of a held GPU while held (a node's own events, with no GPU, drop)."""
    if not data.has("health_events"):
        return pl.DataFrame()
    frame = data.frame(
        "SELECT ts, cluster, node, gpu_uuid, kind, code, detail FROM health_events "
        f"WHERE date BETWEEN ? AND ? AND ts >= ? AND ts < ? AND {CLUSTER_SQL} "
        f"AND {_GPUS_SQL} AND {_NODE_SQL} ORDER BY ts DESC, gpu_uuid LIMIT {ROWS_MAX}",
        [f.start, f.end, f.start_ts, f.end_ts, *f.cluster_args, gpu_uuids, gpu_uuids, node, node, cluster, cluster],
    )
    if restricted(f) and frame.height:
        if held is None:
            held = holds(data, f, gpu_uuids=gpu_uuids, node=node, cluster=cluster)
        frame = inside(frame.drop_nulls("gpu_uuid"), held, dt.timedelta(0), t="ts")
    return frame


def pods(data, f: Filters, *, gpu_uuids=None, node=None, cluster=None, job_id=None, in_range=True, limit=ROWS_MAX):
    """The pods that held these GPUs, this node's GPUs or this job's (gpu_allocations), with when and what share,
    newest first; only the viewer's tenants' (TENANT_SQL). `in_range`: holds overlapping the range only. `limit`:
    the first rows (None: all, to derive holds from)."""
    window, window_args = (
        ('AND date <= ? AND start < ? AND "end" > ? ', [f.end, f.end_ts, f.start_ts]) if in_range else ("", [])
    )
    return data.frame(
        'SELECT cluster, node, gpu_uuid, job_id, tenant, namespace, pod, share, start, "end", open '
        f"FROM gpu_allocations WHERE {_GPUS_SQL} AND {_NODE_SQL} AND (CAST(? AS VARCHAR) IS NULL OR job_id = ?) "
        f"{window}AND {TENANT_SQL} ORDER BY start DESC, gpu_uuid, job_id{_limit(limit)}",
        [gpu_uuids, gpu_uuids, node, node, cluster, cluster, job_id, job_id, *window_args, *f.tenant_args],
        lake=True,
    )


def _limit(rows: int | None) -> str:
    return "" if rows is None else f" LIMIT {int(rows)}"


# -- fleet and cluster -----------------------------------------------------------------------------------------------
def held_by_node(data, f: Filters, cluster: str | None = None) -> pl.DataFrame:
    """Per cluster and node, what the tenants of `f` held in the range: GPUs and GPU-hours (shares x time)."""
    return data.frame(
        "SELECT cluster, node, gpu_model, count(DISTINCT gpu_uuid) AS gpus_held, "
        'sum(share * epoch(least("end", ?) - greatest(start, ?))) / 3600 AS gpu_hours_held FROM gpu_allocations '
        'WHERE date <= ? AND start < ? AND "end" > ? AND (CAST(? AS VARCHAR) IS NULL OR cluster = ?) '
        f"AND (CAST(? AS VARCHAR) IS NULL OR gpu_model = ?) AND {TENANT_SQL} GROUP BY ALL ORDER BY 1, 2",
        [f.end_ts, f.start_ts, f.end, f.end_ts, f.start_ts, cluster, cluster, f.model, f.model] + f.tenant_args,
        lake=True,
    )


def nodes(data, f: Filters, cluster: str | None = None) -> pl.DataFrame:
    """The nodes (one row each: the latest model, GPU count and memory), of one cluster or all."""
    return data.frame(
        "SELECT cluster, node, gpu_model, gpu_count, gpu_mem_bytes / 2^30 AS gpu_mem_gib, first_seen, last_seen "
        f"FROM nodes WHERE {CLUSTER_SQL} AND (CAST(? AS VARCHAR) IS NULL OR cluster = ?) "
        "AND (CAST(? AS VARCHAR) IS NULL OR gpu_model = ?) ORDER BY cluster, node",
        [*f.cluster_args, cluster, cluster, f.model, f.model],
    )


def node_use(data, f: Filters, cluster: str) -> pl.DataFrame:
    """Per node of a cluster over the range (physical GPUs, the hourly rollup): GPUs reporting, the share of their
    samples with a pod on them (allocated_pct) and their mean utilization. A physical GPU's day is its own row, or,
    for a GPU known by its partitions only (AMD CPX), its partitions' mean: equal partitions sampled at the same
    instants, so that is the GPU's (analytics/gpu_hourly.py `physical`, here by day)."""
    return data.frame(
        "WITH p AS (SELECT node, date, coalesce(parent_gpu_uuid, gpu_uuid) AS gpu, avg(samples) AS samples, "
        "avg(allocated_samples) AS allocated_samples, avg(util_sum) AS util_sum FROM gpu_daily d "
        f"WHERE date BETWEEN ? AND ? AND cluster = ? AND {PHYSICAL_SQL.format(t='gpu_daily', k='date')} "
        f"AND {CLUSTER_SQL} AND (CAST(? AS VARCHAR) IS NULL OR model = ?) GROUP BY ALL) "
        "SELECT node, count(DISTINCT gpu) AS gpus_reporting, 100 * sum(allocated_samples) / sum(samples) "
        "AS allocated_pct, sum(util_sum) / sum(samples) AS util_gpu_pct_mean FROM p GROUP BY node ORDER BY node",
        [f.start, f.end, cluster, *f.cluster_args, f.model, f.model],
    )


def fleet_use(data, f: Filters, cluster: str | None = None) -> pl.DataFrame:
    """Per cluster, GPUs in the fleet, allocated and busy over the range (means of fleet_hourly's hours)."""
    return data.frame(
        "WITH h AS (SELECT cluster, hour, sum(gpus) AS g, sum(allocated_gpus) AS a, sum(busy_gpus) AS b "
        f"FROM fleet_hourly WHERE date BETWEEN ? AND ? AND {CLUSTER_SQL} AND (CAST(? AS VARCHAR) IS NULL OR "
        "cluster = ?) AND (CAST(? AS VARCHAR) IS NULL OR gpu_model = ?) GROUP BY ALL) "
        "SELECT cluster, avg(g) AS gpus_mean, avg(a) AS allocated_gpus_mean, avg(b) AS busy_gpus_mean, "
        "100 * sum(a) / nullif(sum(g), 0) AS allocated_pct, 100 * sum(b) / nullif(sum(a), 0) AS busy_pct_of_allocated "
        "FROM h GROUP BY cluster ORDER BY cluster",
        [f.start, f.end, *f.cluster_args, cluster, cluster, f.model, f.model],
    )
