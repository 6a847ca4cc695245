"""Runs the analytics jobs over the lake: incremental (a watermark per job) and idempotent.

Telemetry jobs (gpu_5min, gpu_hourly, job_5min) recompute the hours since the watermark, the hours of raw files new
or rewritten since the last run however old (a spool's flush of the last minutes, a node's spool flushed days late,
a compacted day), and the hours whose allocations changed; each UTC day's output
is one file, its earlier rows kept (analytics/planner.py says which hours). Fragmentation follows the same hours.
Job-level tables recompute only the days and jobs new data can change (analytics/incremental.py); the snapshot
tables (WHOLE) are recomputed whole. The same input gives the same files, so re-running changes nothing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from gpuledger import schema
from gpuledger.analytics import planner
from gpuledger.analytics.day_memo import by_day
from gpuledger.analytics.decisions import decayed_usage, decisions, models_by_cluster
from gpuledger.analytics.forecast import VERSION, day_means, demand_forecast
from gpuledger.analytics.frag_series import fragmentation_series, latest_nodes
from gpuledger.analytics.gpu_hourly import ahead, gpu_5min, gpu_hourly
from gpuledger.analytics.incremental import JobTables, Plan, job_tables, prepare, write_changed_partitions
from gpuledger.analytics.node_claims import claims, clashes
from gpuledger.analytics.state_store import STATE, state_dir
from gpuledger.analytics.sums import exact_sum
from gpuledger.analytics.utilization import job_5min
from gpuledger.analytics.waste import idle_holds
from gpuledger.atomic import write_atomic, write_bytes_atomic
from gpuledger.config import Config, check_quota_models, defaults
from gpuledger.errors import GpuledgerError, LakeError
from gpuledger.lake import LakeWriter, file_stamps, has_data, partition_file, read_file, scan, scan_files
from gpuledger.lake_check import checked_stamps
from gpuledger.quota_requests import active_grants
from gpuledger.store import LakeRef, open_store

log = logging.getLogger(__name__)
# Samples reach the lake after their time (a spool flushes every few minutes), and a run sees them by their file's
# stamp (a new file's hours are recomputed). A lake whose stamps were not kept (analysed by a version before them)
# has nothing to compare, so its next pass over samples recomputes this much before the watermark instead, as every
# run once did: at 10,000 GPUs those two extra hours were two thirds of an hourly run's pass, and after midnight they
# made it rewrite all of yesterday's files. Fragmentation keeps it (0.1 s of the run): an hour's figure is measured
# against the workload of every job seen so far (analytics/frag_series.py), which the jobs of the next hours change.
LOOKBACK_S = 2 * 3600
CHUNK_DAYS = 7  # telemetry rollups computed and written this many UTC days at a time
DAY_THREADS = 2  # days of the pass over raw samples computed at once (benchmarks/RESULTS.md, issue 15 item 1)
_NO_ALLOCATIONS = pl.DataFrame(
    schema={c: d for c, d in schema.table("gpu_allocations").polars_schema.items() if c != "date"}
)


def _lit(t: dt.datetime) -> pl.Expr:
    return pl.lit(t).dt.cast_time_unit("us")


def _tenants(now: dt.datetime, cfg: Config, clusters: list[str]) -> pl.LazyFrame:
    """The config's tenants, so SQL (chargeback against budgets) can read them from the lake like everything else:
    one row per (cluster, tenant) for every cluster of the lake, as the views join them to each cluster's cost.
    A budget is the tenant's across clusters (docs/finops.md); each cluster's row repeats it."""
    ts = [(c, t) for c in clusters for t in cfg.tenants]
    return pl.LazyFrame(
        {
            "computed_at": [now] * len(ts),
            "cluster": [c for c, _ in ts],
            "tenant": [t.name for _, t in ts],
            "namespaces": [list(t.namespaces) for _, t in ts],
            "weight": [t.weight for _, t in ts],
            "budget_usd_per_month": [t.budget_usd_per_month for _, t in ts],
            "budget_gpu_hours_per_month": [t.budget_gpu_hours_per_month for _, t in ts],
        },
        schema=schema.table("tenants").file_schema,
    )


def _demand_forecast(lake: LakeRef, now: dt.datetime) -> pl.LazyFrame:
    """demand_forecast, refitted only when its input (each complete day's demand) changed: the fits take 20 s of a
    30-day lake's hourly run, and an hour that is not the day's last changes no complete day. Rows are the last
    fit's, computed_at being its time: unchanged rows leave the table's files as they are (a new computed_at would
    rewrite a year of daily partitions, most of the cost of a run after one new hour).
    The change is seen from each day's means, kept per fleet_hourly day (analytics/day_memo.py)."""
    memo = state_dir(lake) / "demand_forecast.memo.parquet"
    today = dt.datetime.combine(now.date(), dt.time(), dt.timezone.utc)
    daily = by_day(lake, "fleet_hourly", "day_means", lambda day: day_means(day).collect())
    daily = daily.filter(pl.col("day") < today).sort("cluster", "gpu_model", "day")
    key = f"{VERSION}:{daily.height}:{daily.hash_rows(seed=0).sum() if daily.height else 0}"
    if memo.exists():
        kept = pl.read_parquet(memo)
        if kept.height and kept["_key"][0] == key:
            return kept.drop("_key").lazy()
    out = demand_forecast(scan(lake, "fleet_hourly"), now).collect()
    write_atomic(memo, lambda tmp: out.with_columns(pl.lit(key).alias("_key")).write_parquet(tmp))
    return out.lazy()


def _idle_holds(lake: LakeRef, plan: Plan, cfg: Config) -> pl.LazyFrame:
    """Idle GPUs of open jobs, from gpu_hourly's days since the oldest of them began only (a run reads no history)."""
    now = plan.now
    held = plan.allocs.lazy().filter(pl.col("open"))
    first = held.select(pl.col("start").min()).collect().item()
    hourly = scan(lake, "gpu_hourly")
    hourly = hourly.clear() if first is None else hourly.filter(pl.col("date") >= first.date())
    return idle_holds(held, hourly, cfg.analytics.waste_threshold_pct, now)


def _decisions(lake: LakeRef, done: JobTables, cfg: Config) -> pl.LazyFrame:
    """Each cluster's rows, for its own webhook: GPUs held, quotas, fair share and idle GPUs are the cluster's own
    (its webhook admits its own Pods); the month's spending against a budget is the tenant's across clusters."""
    a = cfg.analytics
    tenants = cfg.tenants
    plan = done.plan
    now = plan.now
    open_now = plan.allocs.filter(pl.col("open")).select("cluster", "tenant", "gpu_model", "share")
    month = dt.datetime(now.year, now.month, 1, tzinfo=dt.timezone.utc)
    # The hive `date` too: polars then skips the earlier days' files unopened (a year of them is 365 footers read, one
    # GET each on an object store), where `day_start` alone is pruned only from each file's statistics.
    cost = scan(lake, "cost_daily").filter((pl.col("date") >= month.date()) & (pl.col("day_start") >= month))
    spent = (
        cost.group_by("tenant")  # every cluster's cost: a budget is money, the tenant's wherever it ran
        .agg(
            exact_sum(pl.col("cost_usd").fill_null(0) + pl.col("idle_share_usd").fill_null(0)).alias("usd"),
            exact_sum(pl.col("gpu_hours").fill_null(0)).alias("gpu_h"),
        )
        .drop_nulls("tenant")
        .collect()
    )
    # From GPU-hours per (tenant, hour), kept from run to run (analytics/incremental.py): a few rows per tenant and
    # hour, where every GPU-hour ever held would be 8.8M rows a year of 1,000 GPUs.
    hours = done.tenant_hours
    # Idle now, from the idle_holds written just before this table: GPUs idle through the last waste window.
    idle = (
        scan(lake, "idle_holds")
        .filter(pl.col("idle_s") >= a.waste_window_h * 3600)
        .group_by("cluster", "tenant", "gpu_model")
        .agg(exact_sum(pl.col("share")).alias("idle_gpus"))
        .collect()
    )
    known = {t.name for t in tenants}
    # Approved quota requests in force at this run's `now` (each run recomputes the decisions, so a grant approved
    # since the last run applies from this one, and one whose `valid_until` passed no longer does).
    try:
        grants = active_grants(lake, now)
    except LakeError:
        # A step's file that cannot be read is set aside (quarantined_files names it), as a raw file is, and the
        # rest are read: one damaged file must not stop every run, nor take every grant away.
        checked_stamps(lake, "quota_events", {}, "analyze", cfg.cluster)
        grants = active_grants(lake, now)
    models = models_by_cluster(lake)
    # A quota key naming no GPU model of any cluster is a ConfigError here (as `checked_models` says it).
    check_quota_models(cfg, sorted(set().union(*models.values())))
    out = []
    for c in plan.clusters():
        mine = pl.col("cluster") == c
        usage = decayed_usage(hours.lazy().filter(mine), now, a.fairshare_half_life_h).collect()
        d = decisions(
            open_now.filter(mine & pl.col("tenant").is_in(known)),
            spent,
            usage.filter(pl.col("tenant").is_in(known)),
            idle.filter(mine),
            tenants,
            now,
            models.get(c, []),
            [g for g in grants if g.cluster == c],
        )
        if d.height:
            out.append(d.with_columns(pl.lit(c).alias("cluster")))
    if not out:
        return pl.LazyFrame(schema=schema.table("decisions").file_schema)
    return pl.concat(out, how="vertical_relaxed").lazy()


# Recomputed whole each run after the job-level tables (analytics/incremental.py), in this order (demand_forecast
# reads fleet_hourly, decisions the cost and idle_holds, all as just written): name -> compute(lake, now, cfg).
WHOLE = {
    "demand_forecast": lambda lake, done, cfg: _demand_forecast(lake, done.plan.now),
    "idle_holds": lambda lake, done, cfg: _idle_holds(lake, done.plan, cfg),
    "decisions": _decisions,
    "tenants": lambda lake, done, cfg: _tenants(done.plan.now, cfg, done.plan.clusters()),
}


@dataclass
class RunReport:
    job: str
    days: int
    rows: int
    seconds: float = 0.0


def _watermark_path(lake: LakeRef, job: str) -> Path:
    return state_dir(lake) / f"{job}.json"


def watermark(lake: LakeRef, job: str) -> float | None:
    p = _watermark_path(lake, job)
    return json.loads(p.read_text())["done_until_s"] if p.exists() else None


def run(
    lake: LakeRef,
    until_s: float | None = None,
    from_s: float | None = None,
    cfg: Config | None = None,
    scheduler: str | None = None,
) -> list[RunReport]:
    """`scheduler` (else [analytics] scheduler): a Dask scheduler's address, whose workers run the telemetry pass
    (analytics/dask_engine.py); ClusterError, before the lake is touched, if it does not answer."""
    address = scheduler if scheduler is not None else (cfg or defaults()).analytics.scheduler
    lake = open_store(lake)
    with contextlib.ExitStack() as stack:
        engine = None
        if address:
            from gpuledger.analytics.dask_engine import DaskEngine  # only here: the local path never imports Dask

            engine = stack.enter_context(DaskEngine(address))
        # One run at a time, its state kept only if it ends well (Store.state: a lock, or a lease and a snapshot).
        stack.enter_context(lake.state(STATE, (cfg or defaults()).analytics.lease_s))
        # Said in the lake while it runs (Store.put_run): the dashboards show "running since" on a lake with no
        # output yet, instead of asking for a run `gpuledger up` is already doing. Once the lock is held: a run
        # waiting for another is not running.
        started, ok = time.time(), False
        lake.put_run(STATE, started)
        try:
            reports = _run(lake, until_s, from_s, cfg, engine)
            ok = True
            return reports
        finally:
            try:
                lake.put_run(STATE, started, time.time(), ok)
            except GpuledgerError as e:  # never hide the run's own error (or its result) behind this one
                # After a failed run the store is most often the reason (an outage) and its error says so in one
                # line: this second line would only repeat it. After a good run it is news.
                (log.warning if ok else log.debug)("could not record the end of the analytics run: %s", e)


def _run(
    lake: LakeRef, until_s: float | None, from_s: float | None, cfg: Config | None, engine=None
) -> list[RunReport]:
    cfg = cfg or defaults()
    until_s = time.time() if until_s is None else until_s
    writer = LakeWriter(lake)
    reports = []
    # The raw files' stamps before anything is read: a file landing during the run is new to the next one.
    kept = _kept_stamps(lake)
    # Each file new since the last run is checked first; a damaged or foreign one is set aside (lake_check).
    checked = {t: checked_stamps(lake, t, (kept or {}).get(t, {}), "analyze", cfg.cluster) for t in RAW}
    stamps = {t: c[0] for t, c in checked.items()}
    rebuild, bad_derived = _set_aside_damaged_derived(lake, kept, cfg.cluster)
    set_aside = sum(c[1] for c in checked.values()) + bad_derived
    if set_aside:  # the run's own line for it (`analyze` prints one per report), beside each file's warning
        reports.append(RunReport("quarantined_files", 0, set_aside))
    # Telemetry rollups: one streaming pass over the samples gives the 5-minute rows, and the hourly rows are
    # rolled up from those in memory (re-reading them from the lake costs as much as computing them).
    src = scan(lake, "gpu_samples")
    lookback = LOOKBACK_S if kept is None else 0.0
    start = from_s
    if start is None:
        wm = None if rebuild else watermark(lake, "gpu_5min")
        if wm is not None:
            start = wm - lookback
        else:
            first = src.select(pl.col("date").min()).collect().item()
            start = None if first is None else dt.datetime.combine(first, dt.time(), dt.timezone.utc).timestamp()
    now = dt.datetime.fromtimestamp(until_s, dt.timezone.utc)
    window_lo = None if start is None else dt.datetime.fromtimestamp(start - start % 3600, dt.timezone.utc)
    late = _late_spans(lake, "gpu_samples", kept, stamps, window_lo)
    _warn_ahead(lake, now, cfg.analytics.max_clock_skew_s)
    plan = None
    if has_data(lake, "jobs"):
        # The jobs' state first: the pass over the samples needs the allocations of its window.
        frag_s = from_s if from_s is not None or rebuild else watermark(lake, "fragmentation")
        frag_s = frag_s if frag_s is None or from_s is not None else frag_s - LOOKBACK_S
        starts = [s - s % 3600 for s in (start, frag_s) if s is not None]
        needed = None
        if len(starts) == 2:
            needed = min([dt.datetime.fromtimestamp(min(starts), dt.timezone.utc), *(s.lo for s in late)])
        plan = prepare(lake, now, cfg, from_s, needed, force=rebuild)
    if window_lo is not None:
        # The window, the late files' hours and those whose allocations changed (job_5min).
        spans = [planner.Span(window_lo, now, "telemetry window"), *late, *(plan.alloc_spans if plan else ())]
        found: list[pl.DataFrame] = []
        ranges = planner.ranges(planner.starts(spans), now)
        reports += _telemetry(lake, writer, engine, ranges, window_lo, now, plan, found)
        _warn_claims(found, cfg.cluster)
        for job in TELEMETRY:
            write_bytes_atomic(_watermark_path(lake, job), json.dumps({"done_until_s": until_s}).encode())
    if plan is not None:
        done = job_tables(lake, writer, plan)
        plan = done.plan
        reports += [RunReport(*r) for r in done.reports]
        for job, compute in WHOLE.items():
            t0 = time.perf_counter()
            days, rows = _run_whole(lake, writer, job, compute(lake, done, cfg))
            reports.append(RunReport(job, days, rows, time.perf_counter() - t0))
        whole = bool(rebuild) or _refit(lake, kept, stamps)
        frag = _fragmentation(lake, writer, done, cfg, from_s, [*late, *plan.alloc_spans], whole)
        if frag is not None:
            reports.append(frag)
    _keep_stamps(lake, stamps)
    return reports


# The raw tables whose files a run compares with the last run's (analytics/planner.py): late samples are analysed
# for their hours; a change to the pod shapes (the fragmentation workload) or, in a lake without telemetry, to the
# nodes (its inventory) recomputes fragmentation whole. The jobs files: analytics/job_state.py.
RAW = ("gpu_samples", "nodes", "pod_shapes", "jobs")
DERIVED = tuple(t.name for t in schema.DERIVED_TABLES)


def _set_aside_damaged_derived(lake: LakeRef, kept: dict | None, cluster: str) -> tuple[str | None, int]:
    """Why this run rebuilds the derived tables from the raw ones (or None), and how many files it set aside.

    A derived file whose stamp is not the one the last run left (lake.file_stamps) is checked like a raw one
    (lake_check): one that cannot be read whole is set aside with a warning, and the tables are recomputed from the
    first sample, as on a first run, since any other day's figures may have been derived from it (a job's cost spans
    days). Files this analytics wrote are not read again: the check costs a listing per table, not a read."""
    if kept is None or "derived" not in kept:
        return None, 0
    bad = {t: n for t in DERIVED if (n := checked_stamps(lake, t, kept["derived"].get(t, {}), "analyze", cluster)[1])}
    if not bad:
        return None, 0
    why = f"a damaged file of {', '.join(bad)} was set aside"
    log.warning("analytics: %s; rebuilding every derived table from the raw ones", why)
    return why, sum(bad.values())


def _refit(lake: LakeRef, kept: dict | None, stamps: dict[str, dict]) -> bool:
    """Whether fragmentation is recomputed whole: its workload or inventory changed since the last run. A
    collector writes nodes rows every flush, but with telemetry the inventory is gpu_hourly's, hour by hour."""
    if kept is None:
        return False
    tables = ["pod_shapes"] + ([] if has_data(lake, "gpu_hourly") else ["nodes"])
    return any(planner.file_changes(kept.get(t, {}), stamps[t]) for t in tables)


def _stamps_path(lake: LakeRef) -> Path:
    return state_dir(lake) / "raw_files.json"


def _kept_stamps(lake: LakeRef) -> dict[str, dict] | None:
    """The raw files' stamps as the last run saw them; None before the first run that kept them."""
    try:
        return json.loads(_stamps_path(lake).read_text())
    except (FileNotFoundError, ValueError):
        return None


def _keep_stamps(lake: LakeRef, stamps: dict[str, dict]) -> None:
    # After the tables: a run stopped midway leaves the last run's stamps, and the next run redoes what it must.
    # The derived files as this run left them: a later change to one is damage (or compaction), checked next run.
    derived = {t: file_stamps(lake, t) for t in DERIVED}
    write_bytes_atomic(_stamps_path(lake), json.dumps({**stamps, "derived": derived}, sort_keys=True).encode())


def _late_spans(lake, table: str, kept: dict | None, stamps: dict, window_lo: dt.datetime | None) -> list:
    """The hours a raw table's files changed since the last run dirty (analytics/planner.py). Without kept stamps (a
    first run, or a lake analysed before they were kept) there is nothing to compare: the window alone is done."""
    if kept is None or window_lo is None:
        return []
    changes = planner.file_changes(kept.get(table, {}), stamps[table])
    if not changes:
        return []
    rels = planner.needs_first_sample(changes, window_lo)
    first = {}
    if rels:
        store, t = open_store(lake), schema.table(table).time_column
        for rel in rels:
            first[rel] = scan_files(store, table, [rel]).select(pl.col(t).min()).collect().item()
    spans = planner.late_spans(changes, first)
    log.info("analytics: %d raw file(s) of %s changed since the last run: %s", len(spans), table, spans[0].why)
    return spans


def _warn_ahead(lake: LakeRef, now: dt.datetime, skew_s: float) -> None:
    """One warning line when samples (and one when job states) are timed further ahead of `now` than the clock-skew
    allowance: they are left out of this run (its window ends at `now`) and named here rather than passed over in
    silence."""
    bound = now + dt.timedelta(seconds=skew_s)
    src = scan(lake, "gpu_samples").filter(pl.col("date") >= bound.date())  # the partitions that can hold them
    found = ahead(src, bound).collect()
    if found.height:
        where = ", ".join(f"{n} ({s}) {r:,}" for n, s, r in found.iter_rows())
        log.warning(
            "analytics: %s gpu_samples rows are more than %g s ahead of the run's end %s, set aside (not charged): %s",
            f"{found['rows'].sum():,}",
            skew_s,
            now.isoformat(timespec="seconds"),
            where,
        )
    # Job states timed ahead: their GPUs are held only up to `now` (analytics.allocation), said here once.
    jobs = scan(lake, "jobs").filter(pl.col("date") >= bound.date(), pl.col("updated_at") > bound)
    found = jobs.group_by("tenant").agg(pl.len().alias("rows")).sort("rows", "tenant", descending=[True, False])
    found = found.collect()
    if found.height:
        log.warning(
            "analytics: %s jobs rows are more than %g s ahead of the run's end %s; no GPU time after it is charged: %s",
            f"{found['rows'].sum():,}",
            skew_s,
            now.isoformat(timespec="seconds"),
            ", ".join(f"{t} {r:,}" for t, r in found.iter_rows()),
        )


def _warn_claims(found: list[pl.DataFrame], cluster: str) -> None:
    """A warning line per node of this run's cluster that two machines claimed in the hours the run analysed."""
    for claim in claims(pl.concat(found), cluster) if found else []:
        log.warning("analytics: %s", claim.warning())


TELEMETRY = ("gpu_5min", "gpu_hourly", "job_5min")  # the tables of the pass over raw samples, one UTC day at a time
CLASHES = "node_claims"  # and what the pass finds besides them (not a table: logged, analytics/node_claims.py)


def _telemetry(
    lake, writer, engine, ranges, window_lo: dt.datetime, now: dt.datetime, plan, found: list[pl.DataFrame]
) -> list[RunReport]:
    """The pass over raw samples for these [lo, hi) ranges (whole hours, so every bucket is recomputed from all of
    its samples), in this process or on Dask workers. Reports each table's rows over the window's days (`now`'s
    included) and the others done; appends each day's CLASHES to `found`."""
    done = {job: [0, 0.0] for job in TELEMETRY}  # rows, seconds
    allocs = plan.allocations_from(ranges[0][0]) if plan is not None and ranges else _NO_ALLOCATIONS
    reported = {window_lo.date() + dt.timedelta(days=k) for k in range((now.date() - window_lo.date()).days + 1)}
    for lo, hi in ranges:
        # One UTC day at a time: a day of a large fleet's samples fits in memory (about 1 GB for 1,000 GPUs at 10 s)
        # and the in-memory engine beats the streaming one on it by ~25% (benchmarks/analytics_run.py). The rollups
        # are written a few days at a time, so a year-long first run holds a week of them, not the year (job_5min
        # alone would be ~75M rows for a year of 1,000 GPUs).
        d0, d1 = lo.date(), (hi - dt.timedelta(microseconds=1)).date()
        days = [d0 + dt.timedelta(days=k) for k in range((d1 - d0).days + 1)]
        reported.update(days)
        chunks = [days[k : k + CHUNK_DAYS] for k in range(0, len(days), CHUNK_DAYS)]
        # Each chunk's files are in the lake before the next chunk's results are taken.
        if engine is None:
            written = _telemetry_chunks(lake, writer, chunks, lo, now, allocs, found)
        else:
            written = engine.telemetry_chunks(lake, writer, chunks, lo, now, allocs, found)
        for chunk_done in written:
            for job, (rows, seconds) in chunk_done.items():
                done[job][0] += rows
                done[job][1] += seconds
    return [RunReport(job, len(reported), rows, seconds) for job, (rows, seconds) in done.items()]


def telemetry_day(
    lake: LakeRef, day: dt.date, lo: dt.datetime, hi: dt.datetime, allocs: pl.DataFrame
) -> dict[str, pl.DataFrame]:
    """The TELEMETRY tables' rows for UTC day `day` of the window [lo, hi), with a `date` column, and under CLASHES
    the window's 5-minute buckets where two machines claimed one node name (analytics/node_claims.py): the unit of
    work of the pass over raw samples, run in this process or on a Dask worker (analytics/dask_engine.py).

    `allocs`: allocation intervals (gpu_allocations' columns) overlapping the day; others are dropped here. Rows of
    the day before `lo` are kept from the file they will replace (_keep_rows_before)."""
    midnight = dt.datetime.combine(day, dt.time(), dt.timezone.utc)
    d_lo, d_hi = max(lo, midnight), min(hi, midnight + dt.timedelta(days=1))
    day_samples = scan(lake, "gpu_samples", date=day).filter((pl.col("ts") >= lo) & (pl.col("ts") < hi))
    five = gpu_5min(day_samples, index=True).collect()
    found = clashes(five)
    # Both sorted by their key: a group-by's rows come in any order, and sums over them (the hourly rollup here; the
    # job-level tables over the files) then differ in the last bit (energy_wh in 9 of 576 rows between two runs of
    # one lake, and between a local run and a Dask worker's). Sorted, every run writes the same files.
    key = ("cluster", "node", "gpu_uuid", "parent_gpu_uuid")
    five = five.drop("_gpu_index").sort(*key, "bucket_start")
    hourly = gpu_hourly(five.lazy()).collect().sort(*key, "hour")
    # Job utilization per 5 minutes from the rollup in memory: allocations clipped to the day. No bucket crosses
    # midnight, so a day at a time gives the rows a longer window would. An empty window (`hi` at midnight) holds none.
    held = allocs.lazy().filter((pl.col("end") > _lit(d_lo)) & (pl.col("start") < _lit(d_hi)) & pl.lit(d_lo < d_hi))
    held = held.with_columns(
        pl.max_horizontal("start", _lit(d_lo)).alias("start"), pl.min_horizontal("end", _lit(d_hi)).alias("end")
    )
    j5 = job_5min(held, five.lazy()).with_columns(pl.col("bucket_start").dt.date().alias("date")).collect()
    out = {job: _keep_rows_before(lake, job, rows, lo) for job, rows in zip(TELEMETRY, (five, hourly, j5), strict=True)}
    return {**out, CLASHES: found}


def _telemetry_chunks(
    lake: LakeRef, writer: LakeWriter, chunks: list[list[dt.date]], lo, hi, allocs: pl.DataFrame, found: list
):
    """The pass in this process: per chunk of days, {table: (rows, seconds)} once its files are written (and each
    day's CLASHES appended to `found`). gpu_5min's seconds include computing all three tables (they come from one
    pass over the samples)."""
    for chunk in chunks:
        mark = time.perf_counter()
        # Two days at a time: a day of hourly samples is a chain of small queries whose Python and I/O overlap
        # (polars releases the GIL); each day is computed alone, so the rows do not depend on it.
        with ThreadPoolExecutor(DAY_THREADS) as pool:
            outs = list(pool.map(lambda d: telemetry_day(lake, d, lo, hi, allocs), chunk))
        seconds = {"gpu_5min": time.perf_counter() - mark}
        found.extend(o[CLASHES] for o in outs)
        rows = {}
        for job in TELEMETRY:
            mark = time.perf_counter()
            out = pl.concat([o[job] for o in outs], how="vertical")
            writer.write_partitions(job, out, job)
            rows[job] = out.height
            seconds[job] = seconds.get(job, 0.0) + time.perf_counter() - mark
        yield {job: (rows[job], seconds[job]) for job in TELEMETRY}


def _keep_rows_before(lake: LakeRef, job: str, out: pl.DataFrame, lo: dt.datetime) -> pl.DataFrame:
    """An incremental run recomputes from `lo`; the rest of each day it rewrites is kept from the file it replaces."""
    t = schema.table(job)
    keep = []
    for (date,) in out.select("date").unique().iter_rows():
        if lo.date() == date and lo > dt.datetime.combine(date, dt.time(), dt.timezone.utc):
            kept = read_file(lake, partition_file(job, date))
            if kept is not None:
                keep.append(kept.filter(pl.col(t.time_column) < lo).with_columns(pl.lit(date).alias("date")))
    if not keep:
        return out
    # A file written before a late column (gpu_hourly's vendor, mig_profile) lacks it: null, as readers insert it.
    same = [[pl.col(c) if c in k.columns else pl.lit(None, out.schema[c]).alias(c) for c in out.columns] for k in keep]
    return pl.concat([*(k.select(cols) for k, cols in zip(keep, same, strict=True)), out]).sort(
        t.time_column, maintain_order=True
    )


def _fragmentation(
    lake: LakeRef,
    writer: LakeWriter,
    done: JobTables,
    cfg: Config,
    from_s: float | None = None,
    spans: list | None = None,
    whole: bool = False,
) -> RunReport | None:
    """Hourly fragmentation, incremental like the rollups (from `from_s`, else the watermark less the look-back),
    plus the hours of `spans` (late telemetry, changed allocations); `whole`: from the first hour.

    Each cluster of the lake on its own: its GPUs, its allocations and its jobs' requests (node names repeat across
    clusters, and a cluster's jobs cannot use another's free GPUs)."""
    plan = done.plan
    t0 = time.perf_counter()
    hourly = scan(lake, "gpu_hourly")
    # A lake without telemetry (an imported trace) takes each cluster's inventory from the nodes table.
    nodes = None
    if not has_data(lake, "gpu_hourly"):
        listed = scan(lake, "nodes").select(pl.col("cluster").unique()).collect()["cluster"].sort().to_list()
        nodes = {c: latest_nodes(scan(lake, "nodes"), c) for c in listed}
    wm = watermark(lake, "fragmentation")
    start_s = from_s if from_s is not None else None if wm is None or whole else wm - LOOKBACK_S
    if start_s is None:
        first = (
            hourly.select(pl.col("hour").min()).collect().item()
            if nodes is None
            else min((n["first_seen"].min() for n in nodes.values() if n.height), default=None)
        )
        if first is None:
            return None
        lo = first
    else:
        lo = dt.datetime.fromtimestamp(start_s - start_s % 3600, dt.timezone.utc)
    now, until_s = plan.now, plan.now.timestamp()
    ranges = planner.ranges(planner.starts([planner.Span(lo, now, "fragmentation window"), *(spans or [])]), now)
    if not ranges:
        return None
    lo = ranges[0][0]
    # The intervals of [lo, now), and every job's request: the workload whose fit the metric measures.
    allocs = plan.allocations_from(lo).select("cluster", "node", "gpu_uuid", "share", "start", "end")
    jobs = plan.workload()
    shapes = scan(lake, "pod_shapes").collect()
    if nodes is None:  # the clusters that reported since lo, and those with jobs (a cluster gone quiet: no rows)
        seen = hourly.filter(pl.col("date") >= lo.date()).select(pl.col("cluster").unique()).collect()["cluster"]
        clusters = sorted(set(seen.to_list()) | set(plan.clusters()))
    else:
        clusters = sorted(nodes)
    # MIG instances' physical GPUs, as kept by the job-level tables (from every gpu_hourly file they would cost a
    # pass over the whole history each run).
    parents = done.gpus.select("gpu_uuid", pl.col("parent_gpu_uuid")).drop_nulls("parent_gpu_uuid")
    rows = dates = 0
    for r_lo, r_hi in ranges:
        # A week at a time: an hour's rows depend on that hour's inventory and holds only, and a year at once would
        # hold the whole year's node states (GBs).
        midnight = dt.datetime.combine(r_lo.date(), dt.time(), dt.timezone.utc)
        weeks = (r_hi - midnight).days // 7 + 2
        inner = (t for k in range(1, weeks) if r_lo < (t := midnight + dt.timedelta(days=7 * k)) < r_hi)
        for w_lo, w_hi in itertools.pairwise([r_lo, *inner, r_hi]):  # whole UTC days, but the first (from r_lo)
            held = allocs.filter((pl.col("end") > w_lo) & (pl.col("start") < w_hi))
            # The window's days by the hive `date`: polars then opens only their files (by `hour` alone it reads
            # every day's footer for every week: 13 x 90 GETs of a 90-day first run on an object store).
            week = hourly.filter(pl.col("date").is_between(w_lo.date(), w_hi.date()))
            outs = []
            for c in clusters:
                mine = pl.col("cluster") == c
                outs.append(
                    fragmentation_series(
                        week.filter(mine),
                        held.filter(mine),
                        jobs.filter(mine),
                        w_lo,
                        w_hi,
                        c,
                        None if nodes is None else nodes[c],
                        shapes.filter(mine),
                        parents,
                    )
                )
            outs = [o for o in outs if o.height]
            out = pl.concat(outs).sort("ts", "cluster", "gpu_model") if outs else pl.DataFrame()
            if out.height:
                out = out.with_columns(pl.col("ts").dt.date().alias("date"))
                if w_lo == r_lo:
                    out = _keep_rows_before(lake, "fragmentation", out, r_lo)
                writer.write_partitions("fragmentation", out, "fragmentation")
                rows += out.height
                dates += out["date"].n_unique()
    write_bytes_atomic(_watermark_path(lake, "fragmentation"), json.dumps({"done_until_s": until_s}).encode())
    return RunReport("fragmentation", dates, rows, time.perf_counter() - t0)


def _run_whole(lake: LakeRef, writer: LakeWriter, job: str, lf: pl.LazyFrame) -> tuple[int, int]:
    """A snapshot table recomputed whole; only the partitions whose rows changed are rewritten."""
    return write_changed_partitions(lake, writer, job, lf.collect())


def schedule(scheduler, cfg: Config, lake: LakeRef, every_s: float = 300) -> None:
    """Called by `gpuledger up`: run the analytics every `every_s` seconds (never two at once)."""

    def job() -> None:
        try:
            with open_store(lake).errors():
                run(lake, cfg=cfg)
        except GpuledgerError as e:
            # The lake unreachable, the lease held by another run: one line, and the next interval tries again.
            log.error("analytics run failed: %s; retried in %g s", e, every_s)

    scheduler.add_job(
        job,
        "interval",
        seconds=every_s,
        id="analytics",
        coalesce=True,
        max_instances=1,
        next_run_time=dt.datetime.now(dt.timezone.utc),
    )
