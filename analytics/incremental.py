"""The job-level tables, recomputed only where new data can change them, from only the jobs that can change them.

Units of work. job_hourly, cost_allocation, cost_daily, queue_depth and fleet_hourly are computed one UTC day at a
time, from the allocation intervals overlapping that day (clipped to it), that day's gpu_hourly and, for
queue_depth, the jobs waiting at some tick of it. A day is always computed the same way, alone, whether the run is
the first one or the thousandth, so a day recomputed by an incremental run is the row-for-row twin of the same day
in a run from scratch. job_stats sums each job's job_hourly and cost_allocation rows in a fixed order (sorted, one
job at a time), for the same reason. gpu_allocations and job_stats are rewritten only in the partitions whose rows
changed, every partition sorted by its key.

What a run loads. The jobs' newest rows are kept from run to run (analytics/job_state.py): a run reads the jobs files
that changed, and loads the jobs still live plus those that finished on or after `load_from`: the earliest day a
change can reach (a changed job's old and new days, the days `now` moved over, the telemetry window and the days
of late raw files), less twice the waste window's reach and the longest any job has held its GPUs (a time-sliced
job's intervals are cut where its neighbours on the GPU start and end): analytics/planner.py's `load_from`. Jobs
that finished before it are not read at all: the cost of a run follows the new data and the open jobs, not the
length of the history.

What is dirty (analytics/planner.py's `job_days`; state under `<lake>/_state/analytics/incremental/`, written after
the tables):
- allocation intervals that differ from those in gpu_allocations (a new job, a new state, a late-arriving event).
  An interval whose end alone moved (an open job, `now` having moved) dirties the days between the old and the
  new end; any other change, every day of both.
- days whose gpu_hourly file changed (by the Store's stamps: the telemetry pass rewrote it, for new hours, late raw
  files or changed allocations), and the days GPUs seen for the first time were held; a GPU
  whose model, node or parent changed (cost_allocation prices a GPU by the model seen on it) recomputes every day;
- the waits of changed jobs: the days they waited; the days between the last `now` and this;
- with a waste window of W hours, a job-hour's waste depends on W - 1 hours either side: neighbouring days too.
A lake without this state (new, or written by a version before it), a state of another version, jobs files
removed, or a change of the settings the tables depend on (rates, cost method, idle policy, waste rule, energy
price) recomputes every day once and says so. The config's `cluster` is not one of them: a run computes every
cluster of the lake, each keyed by its `cluster` column, so analysing with another cluster's config changes nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import polars as pl

from gpuledger import schema
from gpuledger.analytics import planner
from gpuledger.analytics.allocation import allocations, gpu_of_pod
from gpuledger.analytics.cost import cost_daily, energy_daily
from gpuledger.analytics.cost_allocation import cost_allocation, gpu_attributes, gpus_seen
from gpuledger.analytics.fleet import fleet_hourly
from gpuledger.analytics.job_state import KEY, JobStore, NeedsRebuild
from gpuledger.analytics.jobs import job_stats, use_and_cost
from gpuledger.analytics.queue_time import queue_depth
from gpuledger.analytics.state_store import state_dir
from gpuledger.analytics.sums import exact_sum
from gpuledger.analytics.utilization import job_hourly
from gpuledger.analytics.waste import allocation_hours
from gpuledger.atomic import write_atomic, write_bytes_atomic
from gpuledger.config import Config
from gpuledger.lake import LakeWriter, file_stamps, has_data, partition_file, remove_files, scan, stamp_day, table_days
from gpuledger.store import LakeRef

log = logging.getLogger(__name__)
STATE_VERSION = 4  # 2: the jobs' newest rows kept (job_state.py); 3: tenant_hours and counts per cluster;
# 4: counts per partition profile (a 1g.10gb ask is a MIG instance, not 1/7 of any GPU: gpuledger/partitions.py)
COUNT_KEY = ("cluster", "gpu_model", "gpus", "mig_profile")
PER_DAY = planner.PER_DAY
DAY = dt.timedelta(days=1)
UTC = dt.timezone.utc
# An interval is the same one in two runs when these agree; its end (and `open`) may move.
_ALLOC_KEY = ["cluster", "job_id", "tenant", "namespace", "pod", "node", "gpu_model", "gpu_uuid", "share", "start"]
_QUEUE = ["cluster", "job_id", "gpu_model", "gpus", "submitted_at", "left_at"]
_ALLOC_SORT = ["start", "cluster", "job_id", "gpu_uuid"]
CHUNK_DAYS = 31  # per-day tables computed and written this many days at a time


def _midnight(d: dt.date) -> dt.datetime:
    return dt.datetime.combine(d, dt.time(), UTC)


def _lit(t: dt.datetime) -> pl.Expr:
    return pl.lit(t).dt.cast_time_unit("us")


def _days(a: dt.datetime, b: dt.datetime) -> set[dt.date]:
    return set(planner.days_of(a, b))


def _span_days(frame: pl.DataFrame, start: str, end: str) -> set[dt.date]:
    out: set[dt.date] = set()
    for a, b in frame.select(start, end).drop_nulls().unique().iter_rows():
        out |= _days(a, b)
    return out


def config_digest(cfg: Config) -> str:
    """The settings a job-level row depends on; another value recomputes every day."""
    a = cfg.analytics
    rates = sorted((r.gpu_model, r.usd_per_gpu_hour, r.effective_from.isoformat()) for r in cfg.rates)
    key = (STATE_VERSION, rates, a.cost_method, a.idle_policy, a.platform_tenant, a.usd_per_kwh)
    key += (a.waste_threshold_pct, a.waste_window_h)
    return hashlib.sha256(repr(key).encode()).hexdigest()[:16]


class _State:
    """The last run's inputs, as far as the job-level tables are concerned."""

    def __init__(self, lake: LakeRef):
        self.dir = state_dir(lake) / "incremental"
        try:
            self.meta = json.loads((self.dir / "state.json").read_text())
        except (FileNotFoundError, ValueError):
            self.meta = None

    def frame(self, name: str) -> pl.DataFrame | None:
        p = self.dir / f"{name}.parquet"
        return pl.read_parquet(p) if p.exists() else None

    def save(self, frames: dict[str, pl.DataFrame], meta: dict) -> None:
        # The tables are written before this, and state.json last: a run stopped midway leaves the last run's state,
        # whose diff against the lake's inputs is a superset of this run's, so the next run redoes what it must.
        for name, f in frames.items():
            write_atomic(self.dir / f"{name}.parquet", lambda tmp, f=f: f.write_parquet(tmp))
        write_bytes_atomic(self.dir / "state.json", json.dumps(meta, sort_keys=True).encode())


def _changed_intervals(old: pl.DataFrame, new: pl.DataFrame) -> tuple[planner.Span, ...]:
    """The times whose allocation intervals differ between two runs (see the module docstring): between the old and
    the new end of an interval whose end alone moved, the whole of any other."""
    key = [c for c in _ALLOC_KEY if c in new.columns]
    o = old.select(*key, pl.col("end").alias("_old_end"))
    n = new.select(*key, pl.col("end").alias("_new_end"))
    both = n.join(o, on=key, how="full", coalesce=True, nulls_equal=True)
    moved = both.filter(pl.col("_old_end").is_not_null() & pl.col("_new_end").is_not_null())
    moved = moved.filter(pl.col("_old_end") != pl.col("_new_end"))
    spans = moved.select(
        pl.min_horizontal("_old_end", "_new_end").alias("lo"), pl.max_horizontal("_old_end", "_new_end").alias("hi")
    )
    alone = both.filter(pl.col("_old_end").is_null() | pl.col("_new_end").is_null())
    alone = alone.select(pl.col("start").alias("lo"), pl.coalesce("_new_end", "_old_end").alias("hi"))
    return tuple(
        planner.Span(a, b, "allocation changed")
        for f in (spans, alone)
        for a, b in f.drop_nulls().unique().sort(f.columns).iter_rows()
    )


def _span_set(spans: Iterable[planner.Span]) -> set[dt.date]:
    return set().union(*(planner.days_of(s.lo, s.hi) for s in spans))


def _queue_frame(stats: pl.DataFrame) -> pl.DataFrame:
    return stats.select(
        "cluster",
        "job_id",
        "gpu_model",
        "gpus",
        "submitted_at",
        pl.coalesce("scheduled_at", "finished_at").alias("left_at"),
    )


def _changed_waits(old: pl.DataFrame, new: pl.DataFrame, now: dt.datetime, prev_now: dt.datetime) -> set[dt.date]:
    """Days in which a job that waited (in either run) has changed how it waited."""
    diff = pl.concat(
        [new.join(old, on=_QUEUE, how="anti", nulls_equal=True), old.join(new, on=_QUEUE, how="anti", nulls_equal=True)]
    )
    far = max(now, prev_now)
    return _span_days(diff.with_columns(pl.col("left_at").fill_null(_lit(far))), "submitted_at", "left_at")


class _Hourly:
    """gpu_hourly by day, read once per run and dropped when the day loop has passed it."""

    def __init__(self, lake: LakeRef):
        self.lake, self.days = lake, {}

    def day(self, d: dt.date) -> pl.DataFrame:
        if d not in self.days:
            # Sorted: a day's rows enter every computation in one order, however the file was written.
            self.days[d] = scan(self.lake, "gpu_hourly", date=d).collect().sort("hour", "gpu_uuid")
        return self.days[d]

    def window(self, lo: dt.datetime, hi: dt.datetime) -> pl.DataFrame:
        days = sorted(_days(lo, hi - dt.timedelta(microseconds=1)))
        f = pl.concat([self.day(d) for d in days]) if len(days) > 1 else self.day(days[0])
        return f.filter((pl.col("hour") >= _lit(lo)) & (pl.col("hour") < _lit(hi)))

    def forget_before(self, d: dt.date) -> None:
        for k in [k for k in self.days if k < d]:
            del self.days[k]


def _overlapping(allocs: pl.DataFrame, lo: dt.datetime, hi: dt.datetime, clip: bool) -> pl.DataFrame:
    a = allocs.filter((pl.col("end") > _lit(lo)) & (pl.col("start") < _lit(hi)))
    if clip:
        a = a.with_columns(
            pl.max_horizontal("start", _lit(lo)).alias("start"), pl.min_horizontal("end", _lit(hi)).alias("end")
        )
    return a


class _Day:
    """One UTC day of the per-day tables (the module docstring's unit of work)."""

    def __init__(self, d: dt.date, allocs, stats, hourly: _Hourly, gpus, now, cfg: Config, first_tick):
        self.d, self.lo, self.hi = d, _midnight(d), _midnight(d) + DAY
        self.allocs, self.stats, self.hourly, self.gpus, self.now, self.cfg = allocs, stats, hourly, gpus, now, cfg
        self.first_tick = first_tick
        self.unpriced: list[str] = []

    def job_hourly(self) -> pl.DataFrame:
        a = self.cfg.analytics
        margin = dt.timedelta(hours=a.waste_window_h - 1)  # a waste run is decided within W - 1 hours either side
        lo, hi = self.lo - margin, self.hi + margin
        held = _overlapping(self.allocs, lo, hi, clip=True)
        out = job_hourly(held.lazy(), self.hourly.window(lo, hi).lazy(), a.waste_threshold_pct, a.waste_window_h)
        return out.filter((pl.col("hour") >= _lit(self.lo)) & (pl.col("hour") < _lit(self.hi))).collect()

    def tenant_hours(self) -> pl.DataFrame:
        """GPU-hours held per (cluster, tenant, hour) up to now: fair-share usage's input (analytics/decisions.py)."""
        end = min(self.hi, self.now)
        if end <= self.lo:
            return pl.DataFrame()
        held = allocation_hours(_overlapping(self.allocs, self.lo, end, clip=True).lazy())
        # An exact sum: the same hour summed in another run, with other jobs beside it, gives the same bits.
        return (
            held.group_by("cluster", "tenant", "hour").agg(exact_sum(pl.col("gpu_hours")).alias("gpu_hours")).collect()
        )

    def cost_allocation(self) -> pl.DataFrame:
        end = min(self.hi, self.now)
        if end <= self.lo:
            return pl.DataFrame()
        a = self.cfg.analytics
        held = _overlapping(self.allocs, self.lo, end, clip=False)
        hourly = self.hourly.day(self.d)
        if held.is_empty() and hourly.is_empty():
            return pl.DataFrame()
        return cost_allocation(held.lazy(), hourly.lazy(), self.cfg.rates, self.lo, end, a.cost_method, self.gpus)

    def cost_daily(self, allocation: pl.DataFrame) -> pl.DataFrame:
        if allocation.is_empty():
            return pl.DataFrame()
        a = self.cfg.analytics
        out, self.unpriced = cost_daily(allocation, a.idle_policy, a.platform_tenant or None)
        held = allocation_hours(_overlapping(self.allocs, self.lo, self.hi, clip=True).lazy())
        energy = energy_daily(held, self.hourly.day(self.d).lazy(), a.usd_per_kwh).collect()
        out = out.join(energy, on=["cluster", "date", "tenant", "gpu_model"], how="left", nulls_equal=True)
        return out.with_columns(
            pl.col("date").cast(pl.Datetime("us")).dt.replace_time_zone("UTC").alias("day_start"),
            pl.lit(a.cost_method).alias("method"),
        )

    def queue_depth(self) -> pl.DataFrame:
        if self.first_tick is None:
            return pl.DataFrame()
        lo, hi = max(self.first_tick, self.lo), min(self.now, self.hi)
        if hi <= lo:
            return pl.DataFrame()
        left = pl.coalesce("scheduled_at", "finished_at")
        waiting = self.stats.filter((pl.col("submitted_at") < _lit(hi)) & (left.is_null() | (left > _lit(lo)))).sort(
            "submitted_at", "cluster", "job_id"
        )
        # Per cluster: each cluster's queue is its own (the lake holds every cluster's jobs).
        return queue_depth(waiting.lazy(), lo, hi, "5m", by=("cluster", "gpu_model")).collect()

    def fleet_hourly(self, queue: pl.DataFrame) -> pl.DataFrame:
        if queue.is_empty():
            queue = pl.DataFrame(schema=schema.table("queue_depth").polars_schema)
        hourly = self.hourly.day(self.d)
        if hourly.is_empty() and queue.is_empty():
            return pl.DataFrame()
        return fleet_hourly(hourly.lazy(), queue.lazy()).collect()


def _with_date(table: str, out: pl.DataFrame) -> pl.DataFrame:
    t = schema.table(table)
    return out.with_columns(pl.col(t.time_column).dt.date().alias("date"))


def _replace_days(lake: LakeRef, writer: LakeWriter, table: str, days: Iterable[dt.date], out: pl.DataFrame) -> None:
    """The table's partitions of `days` become `out`'s rows of those days; a day without rows loses its file."""
    if out.height:
        out = _with_date(table, out)
        writer.write_partitions(table, out, table)
    have = set(out["date"].unique().to_list()) if out.height else set()
    remove_files(lake, [partition_file(table, d) for d in days if d not in have])


def _per_day(lake, dirty, allocs, stats, gpus, now, cfg, first_tick):
    """Each dirty day's rows of each per-day table, in day order (gpu_hourly read once per day)."""
    hourly = _Hourly(lake)
    outs: dict[str, list[pl.DataFrame]] = {t: [] for t in (*PER_DAY, "tenant_hours")}
    seconds = dict.fromkeys(PER_DAY, 0.0)
    unpriced: set[str] = set()
    reach_back = dt.timedelta(hours=cfg.analytics.waste_window_h - 1) + DAY
    for d in sorted(set().union(*dirty.values())):
        day = _Day(d, allocs, stats, hourly, gpus.lazy(), now, cfg, first_tick)
        mark = time.perf_counter()
        if d in dirty["job_hourly"]:
            outs["job_hourly"].append(day.job_hourly())
            outs["tenant_hours"].append(day.tenant_hours())
        mark = _tick(seconds, "job_hourly", mark)
        if d in dirty["cost_allocation"]:  # cost_daily's days are cost_allocation's
            ca = day.cost_allocation()
            outs["cost_allocation"].append(ca)
            mark = _tick(seconds, "cost_allocation", mark)
            outs["cost_daily"].append(day.cost_daily(ca))
            unpriced |= set(day.unpriced)
            mark = _tick(seconds, "cost_daily", mark)
        queue = None
        if d in dirty["queue_depth"]:
            queue = day.queue_depth()
            outs["queue_depth"].append(queue)
        mark = _tick(seconds, "queue_depth", mark)
        if d in dirty["fleet_hourly"]:
            if queue is None:
                queue = scan(lake, "queue_depth", date=d).collect()
            outs["fleet_hourly"].append(day.fleet_hourly(queue))
        _tick(seconds, "fleet_hourly", mark)
        hourly.forget_before((_midnight(d) - reach_back).date())
    frames = {}
    for table, parts in outs.items():
        parts = [p for p in parts if p.height]
        frames[table] = pl.concat(parts, how="diagonal_relaxed") if parts else pl.DataFrame()
    hours = frames.pop("tenant_hours")
    if hours.is_empty():
        cols = {"cluster": pl.String, "tenant": pl.String, "hour": pl.Datetime("us", "UTC"), "gpu_hours": pl.Float64}
        hours = pl.DataFrame(schema=cols)
    return frames, seconds, unpriced, hours


def _tick(seconds: dict[str, float], table: str, mark: float) -> float:
    now = time.perf_counter()
    seconds[table] += now - mark
    return now


def _read_jobs_rows(lake: LakeRef, table: str, days: Iterable[dt.date], jobs: pl.DataFrame) -> pl.DataFrame:
    """The rows of these (cluster, job_id) in the given days of a per-day table."""
    frames = [scan(lake, table, date=d).join(jobs.lazy(), on=KEY, how="semi").collect() for d in sorted(days)]
    frames = [f for f in frames if f.height]
    return pl.concat(frames) if frames else scan(lake, table).clear().collect()


def _start(d: dt.date | None) -> pl.Expr:
    return pl.lit(True) if d is None else pl.col("start") >= _lit(_midnight(d))


def job_allocations(lake: LakeRef, rows: pl.DataFrame, now: dt.datetime) -> pl.DataFrame:
    """Allocation intervals of these jobs (their newest rows). A job whose rows name no GPU takes the GPUs
    telemetry saw its pod on, read only from the days it held GPUs: every sample of a large fleet would be the
    slowest read of a run, for a few pods."""
    unnamed = rows.filter(pl.col("scheduled_at").is_not_null() & (pl.col("gpu_uuids").list.len().fill_null(0) == 0))
    pods = None
    if unnamed.height:
        lo = unnamed["scheduled_at"].min().date()
        hi = now if unnamed["finished_at"].null_count() else unnamed["finished_at"].max()
        names = unnamed["pod"].drop_nulls().unique().implode()
        days = [lo + dt.timedelta(days=k) for k in range((hi.date() - lo).days + 1)]
        pods = gpu_of_pod(
            pl.concat([scan(lake, "gpu_samples", date=d).filter(pl.col("pod").is_in(names)) for d in days])
        )
    return allocations(rows.lazy(), now, pods).collect()


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The jobs a run loads and what changed in them: prepared before the telemetry pass (which needs the
    allocations and the times whose allocations changed), used after it by `job_tables`."""

    now: dt.datetime
    cfg: Config
    full: str | None  # why every day is recomputed; None for an incremental run
    store: JobStore
    load_from: dt.date | None  # the jobs finished before this day are not loaded (None: all are)
    rows: pl.DataFrame  # newest rows of the loaded jobs
    allocs: pl.DataFrame  # their allocation intervals
    stats: pl.DataFrame  # their job_stats, without use and cost
    before: pl.DataFrame  # newest rows, before this run, of the jobs whose newest row changed
    after: pl.DataFrame  # ... and after
    lmax_s: float
    first_submitted: dt.datetime | None
    counts: pl.DataFrame  # (cluster, gpu_model, gpus, mig_profile, n) of every job: the fragmentation workload
    prev_now: dt.datetime
    from_s: float | None
    # The times whose allocation intervals differ from gpu_allocations' (none in a full run: every day is redone).
    alloc_spans: tuple[planner.Span, ...] = ()

    def allocations_from(self, t: dt.datetime) -> pl.DataFrame:
        """The intervals that end after t: t must be at or after the first day loaded."""
        if self.load_from is not None and t < _midnight(self.load_from):
            raise ValueError(f"allocations from {t} asked of a plan loaded from {self.load_from}")
        return self.allocs.filter(pl.col("end") > _lit(t))

    def workload(self) -> pl.DataFrame:
        """(cluster, gpu_model, gpus, mig_profile, pods): how many jobs ever seen asked for each request (kept as
        counts: a row per job would be 0.7M rows a year of 1,000 GPUs)."""
        return self.counts.rename({"n": "pods"})

    def clusters(self) -> list[str]:
        """Every cluster with a job in the lake: the clusters the whole-table jobs compute."""
        return sorted(self.counts["cluster"].drop_nulls().unique().to_list())


def _spans(rows: pl.DataFrame, now: dt.datetime) -> set[dt.date]:
    """Every day a job of these rows waited or held GPUs (up to now while open)."""
    f = rows.with_columns(pl.coalesce("finished_at", _lit(now)).alias("_end"))
    return _span_days(f, "submitted_at", "_end")


def _full_reason(state: _State, digest: str, lake: LakeRef) -> str | None:
    meta = state.meta
    if meta is None:
        return (
            "a first run"
            if not any(has_data(lake, t) for t in PER_DAY)
            else ("they were written by a version without incremental state")
        )
    kept = ("gpus", "tenant_hours", "counts")
    if meta.get("version") != STATE_VERSION or not all((state.dir / f"{n}.parquet").exists() for n in kept):
        return "their incremental state is of another version or incomplete"
    if meta.get("config") != digest:
        return "rates, cost or waste settings changed since the last run"
    return None


def prepare(
    lake: LakeRef,
    now: dt.datetime,
    cfg: Config,
    from_s: float | None = None,
    needed_from: dt.datetime | None = None,
    force: str | None = None,
) -> Plan:
    """Bring the jobs' state up to date and load the jobs this run can touch.

    `needed_from`: the earliest time another pass of the run needs allocations from (the telemetry window's start;
    None: the lake's start). `force`: recompute every day, for this reason."""
    state = _State(lake)
    digest = config_digest(cfg)
    full = force or _full_reason(state, digest, lake)
    meta = state.meta or {}
    store = JobStore(state.dir, lake)
    if not full:
        if "jobs_files" not in meta:
            full = "their incremental state is of another version or incomplete"
        else:
            try:
                before, after = store.refresh(meta["jobs_files"])
            except NeedsRebuild as e:
                full = str(e)
    if full:
        (log.info if full == "a first run" else log.warning)(
            "analytics: recomputing the job-level tables whole once (%s); later runs are incremental", full
        )
        before, after = store.refresh(None)

    prev_now = dt.datetime.fromtimestamp(meta.get("now_s", now.timestamp()), UTC) if not full else now
    sealed = after.filter(pl.col("finished_at").is_not_null() & pl.col("scheduled_at").is_not_null())
    held_s = (pl.col("finished_at") - pl.col("scheduled_at")).dt.total_seconds()
    lmax_s = max(float(meta.get("lmax_s", 0.0)) if not full else 0.0, float(sealed.select(held_s.max()).item() or 0.0))
    first = after["submitted_at"].min()
    first_submitted = meta.get("first_submitted_s")
    first_submitted = (
        dt.datetime.fromtimestamp(first_submitted, UTC) if first_submitted is not None and not full else None
    )
    if first is not None and (first_submitted is None or first < first_submitted):
        first_submitted = first
    counts = _counts(after) if full else _add_counts(state.frame("counts"), after, before)

    load_from = None
    if not full:
        live_s = (
            store.live.filter(pl.col("scheduled_at").is_not_null())
            .select((_lit(now) - pl.col("scheduled_at")).dt.total_seconds().max())
            .item()
        )
        # gpu_hourly's days this run rewrites are in the telemetry window and the late raw files' days, which the
        # caller's needed_from covers.
        touched = _clock_days(prev_now, now, from_s) | _spans(before, prev_now) | _spans(after, now)
        needed = None if needed_from is None else needed_from.date()
        load_from = planner.load_from(touched, needed, cfg.analytics.waste_window_h, max(lmax_s, float(live_s or 0.0)))
    rows = store.rows_from(load_from)
    allocs = job_allocations(lake, rows, now)
    stats = job_stats(rows.lazy(), now).collect()
    spans = ()
    if not full:
        spans = _changed_intervals(_written_allocations(lake, load_from, now), allocs.filter(_start(load_from)))
    return Plan(
        now=now,
        cfg=cfg,
        full=full,
        store=store,
        load_from=load_from,
        rows=rows,
        allocs=allocs,
        stats=stats,
        before=before,
        after=after,
        lmax_s=lmax_s,
        first_submitted=first_submitted,
        counts=counts,
        prev_now=prev_now,
        from_s=from_s,
        alloc_spans=spans,
    )


def _clock_days(prev_now: dt.datetime, now: dt.datetime, from_s: float | None) -> set[dt.date]:
    """The days `now` moved over since the last run, and a --from window's."""
    days = _days(prev_now, now)
    if from_s is not None:
        days |= _days(dt.datetime.fromtimestamp(from_s, UTC), now)
    return days


def _allocation_days(lake: LakeRef, load_from: dt.date | None, now: dt.datetime) -> set[dt.date] | None:
    """The gpu_allocations partitions a run compares and rewrites: those from `load_from` (the intervals of the jobs
    it loaded start there or later) to now; None: every partition."""
    if load_from is None:
        return None
    days = {d for d in table_days(lake, "gpu_allocations") if d >= load_from}
    return days | {load_from + dt.timedelta(days=k) for k in range((now.date() - load_from).days + 1)}


def _written_allocations(lake: LakeRef, load_from: dt.date | None, now: dt.datetime) -> pl.DataFrame:
    """The last run's intervals of the partitions `_allocation_days` names."""
    days = _allocation_days(lake, load_from, now)
    days = table_days(lake, "gpu_allocations") if days is None else days
    return pl.concat(
        [scan(lake, "gpu_allocations", date=d).collect() for d in sorted(days)]
        or [scan(lake, "gpu_allocations").clear().collect()],
        how="vertical_relaxed",
    ).drop("date")


def _counts(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.group_by(COUNT_KEY).agg(pl.len().cast(pl.Int64).alias("n"))


def _add_counts(prev: pl.DataFrame, after: pl.DataFrame, before: pl.DataFrame) -> pl.DataFrame:
    minus = _counts(before).with_columns(-pl.col("n"))
    out = pl.concat([prev, _counts(after), minus], how="vertical_relaxed").group_by(COUNT_KEY).agg(pl.col("n").sum())
    return out.filter(pl.col("n") != 0)


def write_changed_partitions(
    lake: LakeRef,
    writer: LakeWriter,
    table: str,
    out: pl.DataFrame,
    days: set[dt.date] | None = None,
    sort: list[str] | None = None,
) -> tuple[int, int]:
    """The table's partitions of `days` (all of them when None) become `out`'s rows of those days (sorted by `sort`,
    else as they come): only those whose rows changed are written (a content hash per partition in
    `_state/analytics/<table>.partitions.json`: a run touches a handful of files, not thousands; a missing file is
    written regardless), and a day without rows loses its file. Returns (days, rows) written or kept."""
    out = _with_date(table, out) if out.height else out
    manifest_path = state_dir(lake) / f"{table}.partitions.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (FileNotFoundError, ValueError):
        manifest = {}
    on_disk = table_days(lake, table)
    if days is None:
        scope = on_disk | (set(out["date"].unique().to_list()) if out.height else set())
    else:
        scope = days
    changed, have = [], set()
    if out.height:
        for (d,), part in out.partition_by("date", as_dict=True).items():
            if d not in scope:
                continue
            have.add(d)
            part = part if sort is None else part.sort(sort, nulls_last=True)
            rel = f"date={d.isoformat()}"
            digest = str(part.hash_rows(seed=0).sum())
            if manifest.get(rel) != digest or d not in on_disk:
                changed.append(part)
            manifest[rel] = digest
    if changed:
        writer.write_partitions(table, pl.concat(changed), table)
    gone = [d for d in scope if d not in have]
    for d in gone:
        manifest.pop(f"date={d.isoformat()}", None)
    remove_files(lake, [partition_file(table, d) for d in gone if d in on_disk])
    write_bytes_atomic(manifest_path, json.dumps(manifest, sort_keys=True).encode())
    return len(have), (out.filter(pl.col("date").is_in(list(have))).height if have else 0)


@dataclass(frozen=True)
class JobTables:
    """What `job_tables` did, for the passes after it."""

    reports: list[tuple[str, int, int, float]]  # (table, days recomputed, rows, seconds) per table
    plan: Plan  # the plan they followed: another one, for every day, when a GPU's model, node or parent changed
    tenant_hours: pl.DataFrame  # GPU-hours per (cluster, tenant, hour), kept from run to run
    gpus: pl.DataFrame  # the model, node and parent seen on each GPU


def job_tables(lake: LakeRef, writer: LakeWriter, plan: Plan) -> JobTables:
    """Write gpu_allocations, job_hourly, cost_allocation, cost_daily, job_stats, queue_depth and fleet_hourly."""
    t0 = time.perf_counter()
    state = _State(lake)
    hourly = _HourlyChanges(lake, state.meta or {}, plan.full, state.frame("gpus"))
    if hourly.moved_gpu and not plan.full:  # a GPU seen before with another model, node or parent: rare, costly
        plan = prepare(lake, plan.now, plan.cfg, plan.from_s, force="a GPU's model, node or parent changed")
        hourly = _HourlyChanges(lake, {}, plan.full, None)
    cfg, now, full = plan.cfg, plan.now, plan.full
    reports = []
    first_tick = _tick_of(plan.first_submitted)
    if full:
        inputs = _span_days(plan.allocs, "start", "end") | {stamp_day(r) for r in hourly.stamps}
        if first_tick is not None:
            inputs |= _days(first_tick, now)
        day_plan = planner.full_days(full, inputs, {t: table_days(lake, t) for t in PER_DAY})
    else:
        new_gpus = plan.allocs.filter(pl.col("gpu_uuid").is_in(hourly.new_gpus.implode()))
        waits = _changed_waits(
            _queue_frame(job_stats(plan.before.lazy(), now).collect()),
            _queue_frame(job_stats(plan.after.lazy(), now).collect()),
            now,
            plan.prev_now,
        )
        changes = planner.Changes(
            allocations=frozenset(_span_set(plan.alloc_spans)),
            gpu_hourly=frozenset(hourly.days),
            new_gpus=frozenset(_span_days(new_gpus, "start", "end")),
            clock=frozenset(_clock_days(plan.prev_now, now, plan.from_s)),
            waits=frozenset(waits),
            waste_window_h=cfg.analytics.waste_window_h,
        )
        day_plan = planner.job_days(changes)
        log.debug("job-level days to recompute: %s", {d.isoformat(): sorted(w) for d, w in day_plan.why.items()})
    dirty = day_plan.days

    mark = time.perf_counter()
    in_scope = plan.allocs.filter(_start(plan.load_from))
    write_scope = None if full else _allocation_days(lake, plan.load_from, now)  # None: every partition
    days_w, rows_w = write_changed_partitions(lake, writer, "gpu_allocations", in_scope, write_scope, _ALLOC_SORT)
    reports.append(("gpu_allocations", days_w, rows_w, time.perf_counter() - mark))

    # A month of days at a time: a year's rows of every table at once would hold GBs (a first run).
    days = day_plan.all_days()
    rows, seconds, unpriced, hours = dict.fromkeys(PER_DAY, 0), dict.fromkeys(PER_DAY, 0.0), set(), []
    for k in range(0, len(days), CHUNK_DAYS):
        chunk = days[k : k + CHUNK_DAYS]
        sub = {t: dirty[t] & set(chunk) for t in PER_DAY}
        # The chunk's days in two halves, in two threads (each day is computed alone: the rows do not depend on it;
        # polars releases the GIL, and a day is a chain of small queries whose Python and I/O then overlap).
        halves = [set(chunk[: (len(chunk) + 1) // 2]), set(chunk[(len(chunk) + 1) // 2 :])]

        def half(days_of: set[dt.date], sub=sub):
            dirty_of = {t: sub[t] & days_of for t in PER_DAY}
            return _per_day(lake, dirty_of, plan.allocs, plan.stats, hourly.gpus, now, cfg, first_tick)

        with ThreadPoolExecutor(2) as pool:
            done = list(pool.map(half, [h for h in halves if h]))
        outs = {
            t: pl.concat([o[t] for o, *_ in done if o[t].height] or [pl.DataFrame()], how="diagonal_relaxed")
            for t in PER_DAY
        }
        secs = {t: sum(x[1][t] for x in done) for t in PER_DAY}
        unpriced |= set().union(*(x[2] for x in done))
        hours += [x[3] for x in done]
        for table in PER_DAY:
            mark = time.perf_counter()
            _replace_days(lake, writer, table, sub[table], outs[table])
            rows[table] += outs[table].height
            seconds[table] += secs[table] + time.perf_counter() - mark
    hours = pl.concat(hours, how="vertical_relaxed")
    if unpriced:
        log.warning(
            "cost: no rate in effect for all or part of the time of GPU model(s) %s (no [[rates]] entry, or time "
            "before its first effective_from); that time's cost is null: add rates that cover it",
            ", ".join(sorted(unpriced)),
        )
    for table in PER_DAY:
        reports.append((table, len(dirty[table]), rows[table], seconds[table]))
        if table == "cost_daily":  # job_stats reads job_hourly and cost_allocation as just written
            mark = time.perf_counter()
            reports.append(("job_stats", *_write_job_stats(lake, writer, plan, dirty), time.perf_counter() - mark))
    prev_hours = None if full else state.frame("tenant_hours")
    if prev_hours is not None:
        redone = sorted(dirty["job_hourly"])
        prev_hours = prev_hours.filter(~pl.col("hour").dt.date().is_in(redone))
    tenant_hours = pl.concat([f for f in (prev_hours, hours) if f is not None and f.height] or [hours]).sort(
        "cluster", "tenant", "hour"
    )
    plan.store.save()
    meta = {
        "version": STATE_VERSION,
        "config": config_digest(cfg),
        "now_s": now.timestamp(),
        "hourly_files": hourly.stamps,
        "jobs_files": plan.store.stamps,
        "lmax_s": plan.lmax_s,
        "first_submitted_s": None if plan.first_submitted is None else plan.first_submitted.timestamp(),
    }
    counts = plan.counts.sort(COUNT_KEY, nulls_last=True)
    state.save({"gpus": hourly.gpus, "tenant_hours": tenant_hours, "counts": counts}, meta)
    log.debug("job-level tables in %.1f s", time.perf_counter() - t0)
    return JobTables(reports, plan, tenant_hours, hourly.gpus)


class _HourlyChanges:
    """gpu_hourly's days rewritten since the last run (by file size and mtime: taken after the telemetry pass), and
    the model, node and parent telemetry saw on each GPU (cost_allocation prices a GPU by the model seen on it)."""

    def __init__(self, lake: LakeRef, meta: dict, full: str | None, prev_gpus: pl.DataFrame | None):
        self.stamps = file_stamps(lake, "gpu_hourly")
        old = meta.get("hourly_files", {})
        self.days = {stamp_day(r) for r, s in self.stamps.items() if old.get(r) != s}
        self.days |= {stamp_day(r) for r in old if r not in self.stamps}
        have = {stamp_day(r) for r in self.stamps}
        seen_days = sorted(have) if full or prev_gpus is None else sorted(self.days & have)
        self.gpus = gpus_seen(
            None if full else prev_gpus, [gpu_attributes(scan(lake, "gpu_hourly", date=d)) for d in seen_days]
        )
        self.new_gpus, self.moved_gpu = pl.Series("gpu_uuid", [], pl.String), False
        if not full and prev_gpus is not None:
            seen = ["gpu_uuid", "parent_gpu_uuid", "gpu_model_seen", "gpu_node"]
            was = prev_gpus.select(seen)
            moved = self.gpus.select(seen).join(was, on=seen, how="anti", nulls_equal=True)
            self.new_gpus = moved.join(was, on="gpu_uuid", how="anti")["gpu_uuid"]
            self.moved_gpu = moved.height > self.new_gpus.len()


def _tick_of(first: dt.datetime | None) -> dt.datetime | None:
    return None if first is None else first.replace(minute=first.minute - first.minute % 5, second=0, microsecond=0)


def _write_job_stats(lake: LakeRef, writer: LakeWriter, plan: Plan, dirty) -> tuple[int, int]:
    """job_stats rows of the jobs whose row can have changed: changed, still open, or with rows in a day just
    recomputed (their use and cost); the others' rows stay as written."""
    if plan.full:
        # Only the columns the sums need: a year of both tables whole is GBs.
        used = ("allocated_gpu_hours", "busy_gpu_hours", "idle_gpu_hours")
        hours = scan(lake, "job_hourly").select(*KEY, "hour", "measured", *used)
        cost = scan(lake, "cost_allocation").select(*KEY, "period_start", "gpu_uuid", "slice_uuid", "cost_usd")
        use = use_and_cost(hours.collect(), cost.collect())
        out = plan.stats.join(use, on=KEY, how="left")
        return write_changed_partitions(lake, writer, "job_stats", out, None, KEY)
    days = sorted(dirty["job_hourly"] | dirty["cost_allocation"])
    hit = pl.concat(
        [_overlapping(plan.allocs, _midnight(d), _midnight(d) + DAY, clip=False).select(KEY) for d in days]
        + [plan.after.select(KEY), plan.store.live.select(KEY)]
    ).unique()
    stats = plan.stats.join(hit, on=KEY, how="semi")
    span = _span_days(plan.allocs.join(hit, on=KEY, how="semi"), "start", "end")
    use = use_and_cost(
        _read_jobs_rows(lake, "job_hourly", span, hit), _read_jobs_rows(lake, "cost_allocation", span, hit)
    )
    fresh = _with_date("job_stats", stats.join(use, on=KEY, how="left"))
    parts = set(fresh["date"].unique().to_list()) | set(plan.before["submitted_at"].dt.date().unique().to_list())
    if not parts:  # no job's row can have changed (a run again to the same end)
        return 0, 0
    kept = pl.concat([scan(lake, "job_stats", date=d).collect() for d in sorted(parts)], how="vertical_relaxed").join(
        hit, on=KEY, how="anti"
    )
    out = pl.concat([kept, fresh.select(kept.columns)], how="vertical_relaxed").drop("date")
    days_w, _ = write_changed_partitions(lake, writer, "job_stats", out, parts, KEY)
    return days_w, fresh.height
