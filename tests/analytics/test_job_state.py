"""The jobs' newest rows kept from run to run (analytics/job_state.py) and what a run loads from them.

The store, refreshed after each batch of jobs rows lands, must hold exactly what `latest` of the whole jobs table
gives; and a run after one new hour must load the open jobs and the recent ones, not the history.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import math
import shutil

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from gpuledger.analytics.incremental import prepare
from gpuledger.analytics.job_state import KEY, JobStore, NeedsRebuild
from gpuledger.analytics.jobs import latest
from gpuledger.analytics.runner import run
from gpuledger.config import defaults
from gpuledger.lake import LakeWriter, scan

from builders import at, job_state, make_lake, write_rows


def job(job_id, status, updated_at, **times):
    return job_state(job_id, status, updated_at, tenant="t", gpu_model="H100", gpus=1.0, gpu_uuids=["G0"], **times)


def whole(lake) -> pl.DataFrame:
    cols = [c for c in scan(lake, "jobs").collect_schema().names() if c != "date"]
    return latest(scan(lake, "jobs")).collect().select(cols).sort(KEY)


def kept(store: JobStore) -> pl.DataFrame:
    return store.rows_from(None).sort(KEY)


A = dict(submitted_at=at(1, 1), scheduled_at=at(1, 2))
B = dict(submitted_at=at(1, 3))


def test_the_store_holds_the_newest_row_of_every_job_as_rows_arrive(tmp_path):
    lake, state = tmp_path / "lake", tmp_path / "state"
    batches = [
        # a runs, b waits
        [job("a", "running", at(1, 2), **A), job("b", "pending", at(1, 3), **B)],
        # a finishes on Nov 1; b starts; c is seen only once it has finished (written all at once)
        [
            job("a", "succeeded", at(1, 5), **A, finished_at=at(1, 5)),
            job("b", "running", at(2, 1), **B, scheduled_at=at(2, 1)),
            job("c", "pending", at(2, 2), submitted_at=at(2, 2)),
            job("c", "failed", at(2, 4), submitted_at=at(2, 2), scheduled_at=at(2, 3), finished_at=at(2, 4)),
        ],
        # A late event, written on Nov 4, for a job sealed on Nov 1: a finished on Nov 2 after all.
        [job("a", "succeeded", at(2, 6), **A, finished_at=at(2, 6))],
        [],  # nothing new
    ]
    stamps = None
    for k, rows in enumerate(batches):
        if rows:
            write_rows(lake, "jobs", rows, f"b{k}")
        store = JobStore(state, lake)
        before, after = store.refresh(stamps)
        store.save()
        stamps = store.stamps
        assert_frame_equal(kept(store), whole(lake))
        if k == 2:  # only a changed, and it moved from Nov 1's sealed day to Nov 2's
            assert after["job_id"].to_list() == ["a"] and before["finished_at"].to_list() == [at(1, 5)]
            assert sorted(p.parent.name for p in (state / "jobs" / "sealed").glob("*/*.parquet")) == ["date=2026-11-02"]
        if k == 3:
            assert before.is_empty() and after.is_empty()
    # A day compacted (its files merged into one, the same rows): read again, nothing changes.
    day = lake / "jobs" / "date=2026-11-02"
    merged = pl.read_parquet(list(day.glob("*.parquet")))
    for f in day.glob("*.parquet"):
        f.unlink()
    LakeWriter(lake).write("jobs", merged.with_columns(pl.lit(dt.date(2026, 11, 2)).alias("date")), "merged")
    store = JobStore(state, lake)
    before, after = store.refresh(stamps)
    assert after.is_empty()
    assert_frame_equal(kept(store), whole(lake))
    # A day's files gone (retention): the kept rows cannot say which jobs left with them.
    shutil.rmtree(lake / "jobs" / "date=2026-11-01")
    with pytest.raises(NeedsRebuild, match="jobs files of 2026-11-01 were removed"):
        JobStore(state, lake).refresh(store.stamps)


@pytest.fixture(scope="module")
def week(tmp_path_factory):
    """Eight days of a small simulated fleet, analysed once."""
    lake = tmp_path_factory.mktemp("week") / "lake"
    make_lake(lake, nodes=4, gpus=8, days=8.0, step_s=3600, end_s=at(9).timestamp())
    run(lake, until_s=at(9).timestamp())
    return lake


def test_a_run_after_one_new_hour_loads_the_open_and_recent_jobs_only(week, tmp_path):
    lake = tmp_path / "lake"
    shutil.copytree(week, lake)
    make_lake(lake, nodes=4, gpus=8, days=1 / 24, step_s=3600, end_s=at(9, 1).timestamp())
    plan = prepare(lake, at(9, 1), defaults(), needed_from=at(8, 22))
    assert plan.full is None
    every = whole(lake)
    # The jobs that finished before load_from are not read; those loaded are the ones that can change. load_from is
    # the first touched day (needed_from's, Nov 8) less twice the waste window's reach (0 days with the default 1-h
    # window), the longest any job has held its GPUs in days rounded up, and a day (planner.load_from). That hold
    # comes from the simulated workload: since the workload classes it is a service's (101 h: 5 days), so Nov 2;
    # before them it was a training run's, at most 3 days (Nov 4).
    ends = pl.col("finished_at").fill_null(at(9, 1))
    held_s = every.filter(pl.col("scheduled_at").is_not_null()).select((ends - pl.col("scheduled_at")).max()).item()
    assert plan.load_from == dt.date(2026, 11, 8) - dt.timedelta(days=math.ceil(held_s.total_seconds() / 86400) + 1)
    assert plan.load_from > dt.date(2026, 11, 1)  # not the whole history
    assert 0 < plan.rows.height < every.height
    loaded = every.filter(pl.col("finished_at").is_null() | (pl.col("finished_at").dt.date() >= plan.load_from))
    assert_frame_equal(plan.rows.sort(KEY), loaded)


def test_removed_jobs_files_rebuild_the_state_once_and_say_so(week, tmp_path, caplog):
    lake = tmp_path / "lake"
    shutil.copytree(week, lake)
    shutil.rmtree(lake / "jobs" / "date=2026-11-02")
    with caplog.at_level(logging.WARNING, logger="gpuledger.analytics.incremental"):
        plan = prepare(lake, at(9), defaults(), needed_from=at(8, 22))
    assert plan.full == "jobs files of 2026-11-02 were removed"
    assert "recomputing the job-level tables whole once (jobs files of 2026-11-02 were removed)" in caplog.text
    assert_frame_equal(plan.rows.sort(KEY), whole(lake))


def test_the_fair_share_usage_is_the_same_kept_or_from_scratch(week, tmp_path):
    """decisions' decayed usage comes from GPU-hours per (tenant, hour) kept from run to run."""
    cfg = defaults()
    cfg = dataclasses.replace(cfg, analytics=dataclasses.replace(cfg.analytics, fairshare_half_life_h=24.0))
    lake = tmp_path / "lake"
    shutil.copytree(week, lake)
    make_lake(lake, nodes=4, gpus=8, days=2 / 24, step_s=3600, end_s=at(9, 2).timestamp())
    run(lake, until_s=at(9, 1).timestamp(), cfg=cfg)
    run(lake, until_s=at(9, 2).timestamp(), cfg=cfg)
    scratch = tmp_path / "scratch"
    shutil.copytree(lake, scratch)
    shutil.rmtree(scratch / "_state")
    run(scratch, until_s=at(9, 2).timestamp(), cfg=cfg)
    a, b = (
        pl.read_parquet(x / "_state" / "analytics" / "incremental" / "tenant_hours.parquet") for x in (lake, scratch)
    )
    assert a.height > 0
    assert_frame_equal(a, b)
    a, b = (scan(x, "decisions").drop("computed_at").collect().sort(pl.all()) for x in (lake, scratch))
    assert_frame_equal(a, b)
