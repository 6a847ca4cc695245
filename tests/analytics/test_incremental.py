"""The job-level tables written run after run, as data arrives, are the very rows one run from scratch writes.

A simulated lake (Oct 31 - Nov 2) plus hand-written jobs and telemetry on two more H100s (HX-0, HX-1 on node
"hand"), arriving between runs:
- "span" runs on HX-0 from Oct 31 22:10 across midnight and finishes at Nov 1 03:20, between the runs at 02:00 and
  04:30 (its finish is written before the second);
- "late" runs on HX-1 from 05:00 and finishes at 09:00, but its pod event is written after the 10:00 run, so that
  run sees it open; the 11:00 run sees it finished an hour earlier (a late-arriving state);
- "queued" waits from 01:00 to 12:00, then runs on HX-1 (queue_depth across many runs);
- "open" runs on HX-0 from 14:00 to the end, never finished;
- "old" waited on Oct 31 19:00-20:30 and ran on HX-1 until 23:00, all written only before the last run (Nov 2);
- the H100 rate changes at Nov 1 06:30, mid-day; the 11:00 run is run twice (the same window again).
Compared table by table with DuckDB: EXCEPT ALL, both ways, must be empty.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import random
import shutil

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from gpuledger.analytics.runner import run
from gpuledger.config import Rate, defaults
from gpuledger.schema import DERIVED_TABLES

from builders import H100, all_keys, at, differences, epoch_us, job_state, make_lake, on_disk, put_lake, write_rows

JOB_TABLES = (
    "gpu_allocations",
    "job_hourly",
    "cost_allocation",
    "cost_daily",
    "job_stats",
    "queue_depth",
    "fleet_hourly",
)
RATES = (
    Rate("H100", 2.0, dt.date(2026, 1, 1)),
    Rate("H100", 3.0, at(1, 6, 30)),  # mid-lake, mid-day
    Rate("A100", 1.5, dt.date(2026, 1, 1)),
    Rate("L40S", 0.9, dt.date(2026, 1, 1)),
)
GPUS = ("HX-0", "HX-1")


def cfg(method="request", policy="proportional", window_h=1, rates=RATES):
    base = defaults()
    a = dataclasses.replace(base.analytics, cost_method=method, idle_policy=policy, waste_window_h=window_h)
    return dataclasses.replace(base, rates=rates, analytics=a)


def samples(start: dt.datetime, end: dt.datetime) -> list[dict]:
    """HX-0 and HX-1 every 10 minutes in [start, end): idle (2%) in even hours of HX-1, else busy (60%)."""
    rows, t = [], start
    while t < end:
        for g in GPUS:
            util = 2.0 if g == "HX-1" and t.hour % 2 == 0 else 60.0
            rows.append(dict(cluster="default", node="hand", gpu_uuid=g, model=H100, util_gpu_pct=util, source="t"))
            rows[-1]["ts"] = epoch_us(t)
            rows[-1]["power_w"] = 300.0
        t += dt.timedelta(minutes=10)
    return rows


def job(job_id, status, updated_at, gpu=None, **times):
    return job_state(
        job_id,
        status,
        updated_at,
        cluster="default",
        tenant="vision",
        namespace="vision",
        pod=f"pod-{job_id}",
        gpu_model=H100,
        gpus=1.0,
        gpu_sharing="none",
        node="hand" if gpu else None,
        gpu_uuids=[gpu] if gpu else None,
        **times,
    )


SPAN = dict(submitted_at=at(31, 22, month=10), scheduled_at=at(31, 22, 10, month=10))
LATE = dict(submitted_at=at(1, 5), scheduled_at=at(1, 5))
QUEUED = dict(submitted_at=at(1, 1))
OPEN = dict(submitted_at=at(1, 14), scheduled_at=at(1, 14))
OLD = dict(submitted_at=at(31, 19, month=10), scheduled_at=at(31, 20, 30, month=10))
# (run until, jobs rows written just before it): the telemetry up to `until` is written before each run too.
STEPS = [
    (
        at(1, 2),
        [job("span", "running", SPAN["scheduled_at"], "HX-0", **SPAN), job("queued", "pending", at(1, 1), **QUEUED)],
    ),
    (at(1, 4, 30), [job("span", "succeeded", at(1, 3, 20), "HX-0", **SPAN, finished_at=at(1, 3, 20))]),
    (at(1, 10), [job("late", "running", at(1, 5), "HX-1", **LATE)]),
    (at(1, 11), [job("late", "succeeded", at(1, 9), "HX-1", **LATE, finished_at=at(1, 9))]),  # written at 10:00
    (at(1, 11), []),  # the same window again
    (
        at(2, 0),
        [
            job("queued", "running", at(1, 12), "HX-1", **QUEUED, scheduled_at=at(1, 12)),
            job("queued", "succeeded", at(1, 20), "HX-1", **QUEUED, scheduled_at=at(1, 12), finished_at=at(1, 20)),
            job("open", "running", at(1, 14), "HX-0", **OPEN),
            # Written a day late: a job of Oct 31, a day no later run's telemetry or `now` reaches.
            job("old", "succeeded", at(31, 23, month=10), "HX-1", **OLD, finished_at=at(31, 23, month=10)),
        ],
    ),
]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    lake = tmp_path_factory.mktemp("incremental") / "base"
    make_lake(lake, nodes=1, gpus=2, days=2.0, step_s=600)
    return lake


def copy_raw(src, dst):
    """The lake's raw tables only: what a run from scratch starts from."""
    shutil.copytree(src, dst)
    for t in DERIVED_TABLES:
        shutil.rmtree(dst / t.name, ignore_errors=True)
    shutil.rmtree(dst / "_state" / "analytics", ignore_errors=True)


def grow(lake, config, steps=STEPS):
    """Runs the analytics after each step's data lands; returns the last run's `until` in seconds."""
    until = at(1, 0)
    write_rows(lake, "gpu_samples", samples(at(31, 20, month=10), until), "inc0")
    for k, (t, rows) in enumerate(steps, 1):
        if t > until:
            write_rows(lake, "gpu_samples", samples(until, t), f"inc{k}")
        if rows:
            write_rows(lake, "jobs", rows, f"inc{k}")
        run(lake, until_s=t.timestamp(), cfg=config)
        until = max(until, t)
    return t.timestamp()  # the last run's: a run from scratch to the same time writes the same rows


def assert_same(a, b, tables=JOB_TABLES):
    for table in tables:
        extra, missing = differences(a, b, table)
        assert (extra, missing) == (0, 0), f"{table}: {extra} row(s) only incremental, {missing} only from scratch"


def _raw(key: str) -> bool:
    """A key a run from scratch starts from: the raw tables (and the simulator's state), nothing an analytics run
    wrote."""
    return key.split("/")[0] not in {t.name for t in DERIVED_TABLES} and not key.startswith("_state/analytics")


@pytest.mark.parametrize("config", [cfg(), cfg("max", "none", 3)], ids=["request-proportional-1h", "max-none-3h"])
def test_runs_as_data_arrives_equal_one_run_from_scratch(base, store, tmp_path, config):
    """On each kind of Store (on S3 the runs' state is a snapshot in the bucket and a local working copy)."""
    put_lake(base, store)
    store.delete([k for k in all_keys(store) if not _raw(k)])
    until = grow(store, config)
    scratch, inc = tmp_path / "scratch", tmp_path / "inc"
    on_disk(store, scratch, keep=_raw)
    run(scratch, until_s=until, cfg=config)
    on_disk(store, inc, keep=lambda k: not _raw(k) and not k.startswith("_state/"))
    assert_same(inc, scratch)
    # The hand jobs are in the tables: the comparison is not of two empty sets.
    for table in ("job_hourly", "cost_allocation", "job_stats"):
        hand = "job_id IN ('span', 'late', 'open', 'old')"
        ((n,),) = duckdb.sql(f"SELECT count(*) FROM read_parquet('{inc}/{table}/*/*.parquet') WHERE {hand}").fetchall()
        assert n > 0, table


def test_an_incremental_run_recomputes_only_the_days_new_data_touches(base, tmp_path):
    """After Nov 2's run, one new hour recomputes Nov 2 (and Nov 1, which `now` left), not Oct 31."""
    lake = tmp_path / "inc"
    copy_raw(base, lake)
    grow(lake, cfg())
    write_rows(lake, "gpu_samples", samples(at(2, 0), at(2, 1)), "next")
    reports = {r.job: r for r in run(lake, until_s=at(2, 1).timestamp(), cfg=cfg())}
    for table in ("job_hourly", "cost_allocation", "cost_daily", "queue_depth", "fleet_hourly"):
        assert reports[table].days <= 2, (table, reports[table].days)


def test_a_lake_of_the_previous_version_is_rebuilt_once_and_says_so(base, tmp_path, caplog):
    lake = tmp_path / "inc"
    copy_raw(base, lake)
    grow(lake, cfg(), STEPS[:3])
    shutil.rmtree(lake / "_state" / "analytics" / "incremental")  # as the version before it left the lake
    with caplog.at_level(logging.WARNING, logger="gpuledger.analytics.incremental"):
        run(lake, until_s=at(1, 10).timestamp(), cfg=cfg())
    assert "written by a version without incremental state" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gpuledger.analytics.incremental"):
        run(lake, until_s=at(1, 10).timestamp(), cfg=cfg())
    assert "recomputing" not in caplog.text  # once
    scratch = tmp_path / "scratch"
    copy_raw(lake, scratch)
    run(scratch, until_s=at(1, 10).timestamp(), cfg=cfg())
    assert_same(lake, scratch)


def test_a_new_rate_recomputes_every_day(base, tmp_path, caplog):
    lake = tmp_path / "inc"
    copy_raw(base, lake)
    until = grow(lake, cfg(), STEPS[:2])
    repriced = cfg(rates=(*RATES, Rate("H100", 4.0, at(31, 23, month=10))))
    with caplog.at_level(logging.WARNING, logger="gpuledger.analytics.incremental"):
        run(lake, until_s=until, cfg=repriced)
    assert "settings changed" in caplog.text
    scratch = tmp_path / "scratch"
    copy_raw(lake, scratch)
    run(scratch, until_s=until, cfg=repriced)
    assert_same(lake, scratch)


def test_the_demand_forecast_is_refitted_only_when_a_complete_day_changed(tmp_path):
    """An hourly run reuses the last fit while no complete day changed: the very rows a refit writes."""
    from gpuledger.analytics.forecast import demand_forecast
    from gpuledger.analytics.runner import _demand_forecast
    from gpuledger.lake import scan

    lake = tmp_path / "lake"

    def hours(start, n):  # H100 demand with a weekly and a daily shape
        rows = []
        for h in range(n):
            t = start + dt.timedelta(hours=h)
            demand = 10.0 + t.weekday() + t.hour / 24
            row = dict(hour=epoch_us(t), cluster="default", gpu_model=H100, gpus=16, demand_gpus=demand)
            rows.append(row | dict(allocated_gpus=demand, busy_gpus=demand / 2, pending_gpus=0.0, energy_kwh=1.0))
            rows[-1] |= dict(pending_gpus_max=0.0, pending_jobs_max=0)
        return rows

    def fresh(now):
        return demand_forecast(scan(lake, "fleet_hourly"), now).collect()

    write_rows(lake, "fleet_hourly", hours(at(2, month=10), 30 * 24))  # Oct 2-31
    first = _demand_forecast(lake, at(1, 1)).collect()
    assert first.filter(pl.col("kind") == "forecast").height == 28 and first["history_days"][0] == 30
    again = _demand_forecast(lake, at(1, 5)).collect()  # the same complete days: from the last fit
    # The fit's rows, computed_at its time: the table's files stay as they are.
    assert again["computed_at"].unique().to_list() == [at(1, 1)]
    assert_frame_equal(again.drop("computed_at"), fresh(at(1, 5)).drop("computed_at"))
    write_rows(lake, "fleet_hourly", hours(at(1), 24), "nov1")
    later = _demand_forecast(lake, at(2, 1)).collect()  # Nov 1 is complete now: refitted
    assert_frame_equal(later, fresh(at(2, 1)))
    assert later["history_days"][0] == 31


@pytest.mark.parametrize("seed", [1, 2])
def test_runs_at_random_times_equal_one_run_from_scratch(base, tmp_path, seed):
    """Runs at random minutes (mid-hour, several a day, one days later), with the hand jobs landing between them."""
    rng = random.Random(seed)
    times = sorted(at(31, month=10) + dt.timedelta(minutes=rng.randrange(0, 2 * 24 * 60)) for _ in range(4))
    rows = [r for _, step in STEPS for r in step]
    steps = [(t, rows[k::4]) for k, t in enumerate(times)]
    inc = tmp_path / "inc"
    copy_raw(base, inc)
    until = grow(inc, cfg("max", "proportional", 2), steps)
    scratch = tmp_path / "scratch"
    copy_raw(inc, scratch)
    run(scratch, until_s=until, cfg=cfg("max", "proportional", 2))
    assert_same(inc, scratch)
