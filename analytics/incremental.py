"""The job-level tables, recomputed only where new data can change them.

Units of work. job_hourly, cost_allocation, cost_daily, queue_depth and fleet_hourly are computed one UTC day at a
time, from the allocation intervals overlapping that day (clipped to it), that day's gpu_hourly and, for
queue_depth, the jobs waiting at some tick of it. A day is always computed the same way, alone, whether the run is
the first one or the thousandth, so a day recomputed by an incremental run is the row-for-row twin of the same day
in a run from scratch. job_stats sums each job's job_hourly and cost_allocation rows in a fixed order (sorted, one
job at a time), for the same reason. gpu_allocations and job_stats (one row per job) are computed whole, which is
cheap, and only partitions whose rows changed are rewritten.

What is dirty (state under `<lake>/_state/analytics/incremental/`, written after the tables):
- allocation intervals that differ from the last run's (a new job, a new state, a late-arriving event: the diff is
  of what the jobs table now says, whenever the row was written). An interval whose end alone moved (an open job,
  `now` having moved) dirties the days between the old and the new end; any other change, every day of both.
- days whose gpu_hourly file changed (by size and mtime), and GPUs whose model, node or parent telemetry reports
  changed (cost_allocation prices a GPU by the model seen on it): the days they were held;
- queue rows (submitted, left, size) that changed: the days they waited; the days between the last `now` and this;
- with a waste window of W hours, a job-hour's waste depends on W - 1 hours either side: neighbouring days too.
A lake without this state (new, or written by a version before it), a state of another version, or a change of the
settings the tables depend on (rates, cost method, idle policy, waste rule, energy price, cluster) recomputes every
day once and says so.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import polars as pl

from gpuledger import schema
from gpuledger.analytics.cost import cost_daily, energy_daily
from gpuledger.analytics.cost_allocation import cost_allocation, gpu_attributes, gpus_seen
from gpuledger.analytics.fleet import fleet_hourly
from gpuledger.analytics.jobs import use_and_cost
from gpuledger.analytics.queue_time import queue_depth
from gpuledger.analytics.utilization import job_hourly
from gpuledger.analytics.waste import allocation_hours
from gpuledger.atomic import write_atomic, write_bytes_atomic
from gpuledger.config import Config
from gpuledger.lake import LakeWriter, scan
from gpuledger.lake_lock import publishing

log = logging.getLogger(__name__)
STATE_VERSION = 1
PER_DAY = ("job_hourly", "cost_allocation", "cost_daily", "queue_depth", "fleet_hourly")
DAY = dt.timedelta(days=1)
UTC = dt.timezone.utc
# An interval is the same one in two runs when these agree; its end (and `open`) may move.
_ALLOC_KEY = ["cluster", "job_id", "tenant", "namespace", "pod", "node", "gpu_model", "gpu_uuid", "share", "start"]
_QUEUE = ["cluster", "job_id", "gpu_model", "gpus", "submitted_at", "left_at"]


def _midnight(d: dt.date) -> dt.datetime:
    return dt.datetime.combine(d, dt.time(), UTC)


def _lit(t: dt.datetime) -> pl.Expr:
    return pl.lit(t).dt.cast_time_unit("us")


def _days(a: dt.datetime, b: dt.datetime) -> set[dt.date]:
    """UTC days of [a, b] (both ends: a boundary moved across midnight changes both days' rows)."""
    lo, hi = min(a, b).date(), max(a, b).date()
    return {lo + dt.timedelta(days=k) for k in range((hi - lo).days + 1)}


def _span_days(frame: pl.DataFrame, start: str, end: str) -> set[dt.date]:
    out: set[dt.date] = set()
    for a, b in frame.select(start, end).drop_nulls().unique().iter_rows():
        out |= _days(a, b)
    return out


def config_digest(cfg: Config) -> str:
    """The settings a job-level row depends on; another value recomputes every day."""
    a = cfg.analytics
    rates = sorted((r.gpu_model, r.usd_per_gpu_hour, r.effective_from.isoformat()) for r in cfg.rates)
    key = (STATE_VERSION, cfg.cluster, rates, a.cost_method, a.idle_policy, a.platform_tenant, a.usd_per_kwh)
    key += (a.waste_threshold_pct, a.waste_window_h)
    return hashlib.sha256(repr(key).encode()).hexdigest()[:16]


class _State:
    """The last run's inputs, as far as the job-level tables are concerned."""

    def __init__(self, lake: Path):
        self.dir = Path(lake) / "_state" / "analytics" / "incremental"
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


def _file_stamps(lake: Path, table: str) -> dict[str, list[int]]:
    out = {}
    for f in sorted(Path(lake, table).glob(schema.table(table).file_glob)):
        st = f.stat()
        out[str(f.relative_to(lake))] = [st.st_mtime_ns, st.st_size]
    return out


def _stamp_day(rel: str) -> dt.date:
    return dt.date.fromisoformat(Path(rel).parent.name.removeprefix("date="))


def _changed_intervals(old: pl.DataFrame, new: pl.DataFrame) -> set[dt.date]:
    """Days whose allocation intervals differ between two runs (see the module docstring)."""
    key = [c for c in _ALLOC_KEY if c in new.columns]
    o = old.select(*key, pl.col("end").alias("_old_end"))
    n = new.select(*key, pl.col("end").alias("_new_end"))
    both = n.join(o, on=key, how="full", coalesce=True, nulls_equal=True)
    days: set[dt.date] = set()
    moved = both.filter(pl.col("_old_end").is_not_null() & pl.col("_new_end").is_not_null())
    for a, b in moved.filter(pl.col("_old_end") != pl.col("_new_end")).select("_old_end", "_new_end").iter_rows():
        days |= _days(a, b)
    alone = both.filter(pl.col("_old_end").is_null() | pl.col("_new_end").is_null())
    alone = alone.with_columns(pl.coalesce("_new_end", "_old_end").alias("_end"))
    return days | _span_days(alone, "start", "_end")


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

    def __init__(self, lake: Path):
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


def _first_tick(stats: pl.DataFrame) -> dt.datetime | None:
    first = stats["submitted_at"].min()
    return None if first is None else first.replace(minute=first.minute - first.minute % 5, second=0, microsecond=0)


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
            "submitted_at", "job_id"
        )
        out = queue_depth(waiting.lazy(), lo, hi, "5m").with_columns(pl.lit(self.cfg.cluster).alias("cluster"))
        return out.collect()

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


def _replace_days(lake: Path, writer: LakeWriter, table: str, days: Iterable[dt.date], out: pl.DataFrame) -> None:
    """The table's partitions of `days` become `out`'s rows of those days; a day without rows loses its file."""
    if out.height:
        out = _with_date(table, out)
        writer.write_partitions(table, out, table)
    have = set(out["date"].unique().to_list()) if out.height else set()
    gone = [Path(lake, table, f"date={d.isoformat()}", f"part-{table}.parquet") for d in days if d not in have]
    gone = [p for p in gone if p.exists()]
    if gone:
        with publishing(lake):  # not from under a query that listed it (gpuledger.lake_lock)
            for p in gone:
                p.unlink()


def _read_jobs_rows(lake: Path, table: str, days: Iterable[dt.date], jobs: pl.Series) -> pl.DataFrame:
    frames = [scan(lake, table, date=d).filter(pl.col("job_id").is_in(jobs.implode())).collect() for d in sorted(days)]
    frames = [f for f in frames if f.height]
    return pl.concat(frames) if frames else scan(lake, table).clear().collect()


def job_tables(
    lake: Path,
    writer: LakeWriter,
    now: dt.datetime,
    cfg: Config,
    allocs: pl.DataFrame,
    stats: pl.DataFrame,
    write_whole: Callable[[str, pl.DataFrame], tuple[int, int]],
    from_s: float | None = None,
) -> list[tuple[str, int, int, float]]:
    """Write gpu_allocations, job_hourly, cost_allocation, cost_daily, job_stats, queue_depth and fleet_hourly.

    `allocs` and `stats`: this run's allocation intervals and per-job stats (analytics/allocation.py, jobs.py);
    `write_whole(table, frame)` writes a table computed whole, returning (days, rows). Returns (table, days, rows,
    seconds) per table, days being the partitions recomputed."""
    t0 = time.perf_counter()
    lake = Path(lake)
    state = _State(lake)
    digest = config_digest(cfg)
    meta = state.meta or {}
    prev_allocs, prev_queue, prev_gpus, prev_use = (state.frame(n) for n in ("allocs", "queue", "gpus", "use"))
    full = None
    if state.meta is None:
        if any(Path(lake, t).is_dir() for t in PER_DAY):
            full = "they were written by a version without incremental state"
        else:
            full = "a first run"
    elif meta.get("version") != STATE_VERSION or any(f is None for f in (prev_allocs, prev_queue, prev_gpus, prev_use)):
        full = "their incremental state is of another version or incomplete"
    elif meta.get("config") != digest:
        full = "rates, cost or waste settings changed since the last run"
    if full:  # a new lake's first run is no news; any other rebuild is said as a warning
        (log.info if full == "a first run" else log.warning)(
            "analytics: recomputing the job-level tables whole once (%s); later runs are incremental", full
        )
    reports = []

    mark = time.perf_counter()
    days_w, rows_w = write_whole("gpu_allocations", allocs)
    reports.append(("gpu_allocations", days_w, rows_w, time.perf_counter() - mark))

    stamps = _file_stamps(lake, "gpu_hourly")
    old_stamps = meta.get("hourly_files", {})
    hourly_days = {_stamp_day(r) for r, s in stamps.items() if old_stamps.get(r) != s}
    hourly_days |= {_stamp_day(r) for r in old_stamps if r not in stamps}
    # The model, node and parent telemetry saw on each GPU, from the days that changed (all of them at first).
    seen_days = (
        sorted({_stamp_day(r) for r in stamps}) if full else sorted(hourly_days & {_stamp_day(r) for r in stamps})
    )
    gpus = gpus_seen(
        prev_gpus if not full else None, [gpu_attributes(scan(lake, "gpu_hourly", date=d)) for d in seen_days]
    )
    queue = _queue_frame(stats)
    first_tick = _first_tick(stats)
    prev_now = dt.datetime.fromtimestamp(meta.get("now_s", now.timestamp()), UTC)

    if full:
        everything = _span_days(allocs, "start", "end") | {_stamp_day(r) for r in stamps}
        if first_tick is not None:
            everything |= _days(first_tick, now)
        dirty = dict.fromkeys(PER_DAY, everything)
    else:
        moved = _days(prev_now, now)
        if from_s is not None:
            moved |= _days(dt.datetime.fromtimestamp(from_s, UTC), now)
        alloc_days = _changed_intervals(prev_allocs, allocs)
        # A GPU's model, node or parent that changed (not merely seen again later): the days it was held.
        seen = ["gpu_uuid", "parent_gpu_uuid", "gpu_model_seen", "gpu_node"]
        now_seen, was_seen = gpus.select(seen), prev_gpus.select(seen)
        changed_gpus = pl.concat(
            [
                now_seen.join(was_seen, on=seen, how="anti", nulls_equal=True)["gpu_uuid"],
                was_seen.join(now_seen, on=seen, how="anti", nulls_equal=True)["gpu_uuid"],
            ]
        )
        gpu_days = _span_days(
            pl.concat(
                [allocs.select("gpu_uuid", "start", "end"), prev_allocs.select("gpu_uuid", "start", "end")]
            ).filter(pl.col("gpu_uuid").is_in(changed_gpus.implode())),
            "start",
            "end",
        )
        reach = math.ceil((cfg.analytics.waste_window_h - 1) / 24)
        base = alloc_days | hourly_days | moved
        job_days = {d + dt.timedelta(days=k) for d in base for k in range(-reach, reach + 1)}
        cost_days = base | gpu_days
        queue_days = _changed_waits(prev_queue, queue, now, prev_now) | moved
        dirty = {
            "job_hourly": job_days,
            "cost_allocation": cost_days,
            "cost_daily": cost_days,
            "queue_depth": queue_days,
            "fleet_hourly": queue_days | hourly_days | moved,
        }
    if not full:
        log.debug(
            "job-level days: allocations %s, gpu_hourly %s, GPU attributes %s, queue %s, now %s",
            *(
                sorted(d.isoformat() for d in x)
                for x in (alloc_days, hourly_days, gpu_days, dirty["queue_depth"], moved)
            ),
        )
    outs, seconds, unpriced = _per_day(lake, dirty, allocs, stats, gpus, now, cfg, first_tick)
    if unpriced:
        log.warning(
            "cost: no rate in effect for all or part of the time of GPU model(s) %s (no [[rates]] entry, or time "
            "before its first effective_from); that time's cost is null: add rates that cover it",
            ", ".join(sorted(unpriced)),
        )
    use = None
    for table in PER_DAY:
        mark = time.perf_counter()
        t = schema.table(table)
        if full:  # days an earlier version wrote that have no rows now
            dirty[table] = dirty[table] | {
                _stamp_day(str(p.relative_to(lake))) for p in Path(lake, table).glob(t.file_glob)
            }
        _replace_days(lake, writer, table, dirty[table], outs[table])
        reports.append((table, len(dirty[table]), outs[table].height, seconds[table] + time.perf_counter() - mark))
        if table == "cost_daily":  # job_stats reads job_hourly and cost_allocation as just written
            mark = time.perf_counter()
            use = _job_use(lake, allocs, prev_allocs, dirty, prev_use, full)
            days_w, rows_w = write_whole("job_stats", stats.join(use, on=["cluster", "job_id"], how="left"))
            reports.append(("job_stats", days_w, rows_w, time.perf_counter() - mark))
    state.save(
        {"allocs": allocs, "queue": queue, "gpus": gpus, "use": use},
        {"version": STATE_VERSION, "config": digest, "now_s": now.timestamp(), "hourly_files": stamps},
    )
    log.debug("job-level tables in %.1f s", time.perf_counter() - t0)
    return reports


def _per_day(lake, dirty, allocs, stats, gpus, now, cfg, first_tick):
    """Each dirty day's rows of each per-day table, in day order (gpu_hourly read once per day)."""
    hourly = _Hourly(lake)
    outs: dict[str, list[pl.DataFrame]] = {t: [] for t in PER_DAY}
    seconds = dict.fromkeys(PER_DAY, 0.0)
    unpriced: set[str] = set()
    reach_back = dt.timedelta(hours=cfg.analytics.waste_window_h - 1) + DAY
    for d in sorted(set().union(*dirty.values())):
        day = _Day(d, allocs, stats, hourly, gpus.lazy(), now, cfg, first_tick)
        mark = time.perf_counter()
        if d in dirty["job_hourly"]:
            outs["job_hourly"].append(day.job_hourly())
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
    return frames, seconds, unpriced


def _tick(seconds: dict[str, float], table: str, mark: float) -> float:
    now = time.perf_counter()
    seconds[table] += now - mark
    return now


def _job_use(lake, allocs, prev_allocs, dirty, prev_use, full) -> pl.DataFrame:
    """use_and_cost of every job: recomputed for jobs with rows in a recomputed day, kept for the others."""
    if full:
        return use_and_cost(scan(lake, "job_hourly").collect(), scan(lake, "cost_allocation").collect())
    touched = pl.concat([allocs.select("job_id", "start", "end"), prev_allocs.select("job_id", "start", "end")])
    days = sorted(dirty["job_hourly"] | dirty["cost_allocation"])
    hit = pl.concat(
        [_overlapping(touched, _midnight(d), _midnight(d) + DAY, clip=False).select("job_id") for d in days]
        or [touched.clear().select("job_id")]
    )["job_id"].unique()
    # Every day those jobs held GPUs: their rows elsewhere are summed with the recomputed ones.
    theirs = allocs.filter(pl.col("job_id").is_in(hit.implode()))
    span = _span_days(theirs, "start", "end")
    fresh = use_and_cost(
        _read_jobs_rows(lake, "job_hourly", span, hit), _read_jobs_rows(lake, "cost_allocation", span, hit)
    )
    kept = prev_use.filter(~pl.col("job_id").is_in(hit.implode()))
    return pl.concat([kept, fresh], how="vertical_relaxed").sort("cluster", "job_id")
