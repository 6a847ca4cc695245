"""A sample written twice counts once in the analytics, and samples far ahead are set aside.

Issue 22: `simulate --days 1` over a window already simulated doubled samples; a replayed spool could too; a
sample a week ahead passed without a word.
"""

from __future__ import annotations

import datetime as dt
import logging
import shutil

import polars as pl

from gpuledger.analytics.gpu_hourly import gpu_5min
from gpuledger.analytics.runner import run
from gpuledger.lake import LakeWriter, scan
from gpuledger.spool import Spool

from builders import END as SMALL_END
from builders import at, job_state, write_rows

UTC = dt.timezone.utc
END = dt.datetime(2026, 11, 30, 12, tzinfo=UTC)


def _distinct(lake) -> int:
    return scan(lake, "gpu_samples").select(pl.struct("cluster", "gpu_uuid", "ts").n_unique()).collect().item()


def test_an_overlapping_simulate_continues_the_fleet_and_writes_nothing_twice(tmp_path, cli):
    lake = tmp_path / "lake"
    fleet = ("--nodes", 2, "--gpus-per-node", 2, "--step-s", 60, "--workers", 1)
    cli("simulate", "--lake", lake, *fleet, "--days", 1, "--end", "2026-11-30T00:00:00Z")
    jobs_before = scan(lake, "jobs").collect()
    # 24 hours again, ending 12 hours later: the first 12 overlap what the lake holds.
    r = cli("simulate", "--lake", lake, *fleet, "--days", 1, "--end", END.isoformat())
    assert "already holds this fleet from 2026-11-29T12:00:00Z to 2026-11-30T00:00:00Z: continuing it" in r.output
    rows = scan(lake, "gpu_samples").select(pl.len()).collect().item()
    # 4 GPUs x 36 hours x 60 samples an hour, each once
    assert _distinct(lake) == rows == 4 * 36 * 60
    # The same fleet continued: every job of the first window whose state changed later is the same job (its
    # earlier rows are not written again, and no job of the second window starts before the boundary).
    jobs = scan(lake, "jobs").collect()
    later = jobs.join(jobs_before, on=[c for c in jobs.columns if c != "gpu_uuids"], how="anti", nulls_equal=True)
    assert later.height and later["updated_at"].min() >= dt.datetime(2026, 11, 30, tzinfo=UTC)
    new_ids = set(later["job_id"]) - set(jobs_before["job_id"])
    assert later.filter(pl.col("job_id").is_in(new_ids))["submitted_at"].min() >= dt.datetime(2026, 11, 30, tzinfo=UTC)
    # A window the lake holds whole writes nothing.
    r = cli("simulate", "--lake", lake, *fleet, "--days", 0.25, "--end", END.isoformat())
    assert "nothing to write" in r.output and scan(lake, "gpu_samples").select(pl.len()).collect().item() == rows
    run(lake, until_s=END.timestamp())
    hourly = scan(lake, "gpu_hourly").collect()
    assert hourly.height == 4 * 36 and hourly["samples"].to_list() == [60] * (4 * 36)


def _samples(i: int) -> dict[str, list]:
    t0 = int(dt.datetime(2026, 11, 30, 10, tzinfo=UTC).timestamp() * 1e6)
    return {
        "ts": [t0 + i * 30_000_000] * 2,
        "cluster": ["c"] * 2,
        "node": ["n1"] * 2,
        "gpu_uuid": ["GPU-a", "GPU-b"],
        "util_gpu_pct": [float(10 * i), 50.0],
        "power_w": [100.0 + i, 300.0],
        "source": ["nvml"] * 2,
    }


def test_a_spool_replayed_twice_counts_once(tmp_path):
    # A node's spool restored from a backup onto a collector with a new id: the same rows replayed under another
    # writer's name, so into another file (a replay under the same name rewrites the same file: test_spool.py).
    sp = Spool(tmp_path / "spool", "w1", fsync=False)
    sp.open()
    for i in range(10):  # 10 scrapes 30 s apart: 10:00:00 to 10:04:30, one 5-minute bucket
        sp.append("gpu_samples", _samples(i))
    sp.close()
    shutil.copytree(tmp_path / "spool", tmp_path / "restored")
    lake = tmp_path / "lake"
    assert Spool(tmp_path / "spool", "w1", fsync=False).replay(LakeWriter(lake)) == 20
    assert Spool(tmp_path / "restored", "w2", fsync=False).replay(LakeWriter(lake)) == 20
    assert scan(lake, "gpu_samples").select(pl.len()).collect().item() == 40
    five = gpu_5min(scan(lake, "gpu_samples")).collect().sort("gpu_uuid")
    assert five["samples"].to_list() == [10, 10]
    # GPU-a: util 0, 10, ..., 90 -> mean 45, busy 9 of 10; power 100..109 -> mean 104.5 over 300 s covered
    a = five.row(0, named=True)
    assert (a["util_gpu_pct_mean"], a["busy_ratio"], a["power_w_mean"]) == (45.0, 0.9, 104.5)
    assert abs(a["energy_wh"] - 104.5 * 300 / 3600) < 1e-9


def test_a_sample_a_week_ahead_is_set_aside_with_a_warning(small_lake, tmp_path, caplog):

    lake = tmp_path / "lake"
    shutil.copytree(small_lake, lake)
    now = dt.datetime.fromtimestamp(SMALL_END, UTC)
    one = scan(lake, "gpu_samples").filter(pl.col("pod").is_not_null()).head(1).collect()
    ahead = one.with_columns(
        pl.lit(now + dt.timedelta(days=7)).dt.cast_time_unit("us").alias("ts"),
        pl.lit((now + dt.timedelta(days=7)).date()).alias("date"),
        pl.lit("skewed-node").alias("node"),
    )
    # and one within the 5-minute allowance: clock skew, not reported
    near = ahead.with_columns((pl.lit(now) + pl.duration(seconds=120)).dt.cast_time_unit("us").alias("ts"))
    LakeWriter(lake).write_partitions(
        "gpu_samples", pl.concat([ahead, near.with_columns(pl.lit(now.date()).alias("date"))]), "x"
    )
    with caplog.at_level(logging.WARNING, logger="gpuledger.analytics.runner"):
        run(lake, until_s=SMALL_END)
    lines = [r.getMessage() for r in caplog.records if "ahead" in r.getMessage()]
    assert len(lines) == 1
    assert "1 gpu_samples rows are more than 300 s ahead" in lines[0] and "skewed-node (sim) 1" in lines[0]
    hourly = scan(lake, "gpu_hourly").collect()
    assert hourly.filter(pl.col("node") == "skewed-node").height == 0
    assert hourly["hour"].max() < now


def test_a_job_whose_finish_is_ahead_holds_its_gpus_only_up_to_now(tmp_path, caplog):
    """A job scheduled an hour before the run's end whose next state (succeeded) is timed three hours after it (a
    clock ahead, or a simulation run past now): one warning line naming its tenant, and exactly the hour up to now
    charged, as to a job still running (before, the three hours ahead were held and charged too)."""
    lake = tmp_path / "lake"
    now = at(2, 12)
    job = {
        "tenant": "vision",
        "namespace": "vision",
        "pod": "p",
        "node": "n1",
        "gpus": 2.0,
        "gpu_model": "NVIDIA H100 80GB HBM3",
        "submitted_at": now - dt.timedelta(hours=1),
    }
    write_rows(
        lake,
        "jobs",
        [
            job_state("j", "running", now - dt.timedelta(hours=1), scheduled_at=now - dt.timedelta(hours=1), **job),
            job_state(
                "j",
                "succeeded",
                now + dt.timedelta(hours=3),
                scheduled_at=now - dt.timedelta(hours=1),
                finished_at=now + dt.timedelta(hours=3),
                **job,
            ),
        ],
    )
    with caplog.at_level(logging.WARNING, logger="gpuledger.analytics.runner"):
        run(lake, until_s=now.timestamp())
    lines = [r.getMessage() for r in caplog.records if "jobs rows are more than" in r.getMessage()]
    assert len(lines) == 1 and lines[0].endswith("no GPU time after it is charged: vision 1"), lines
    allocs = scan(lake, "gpu_allocations").collect()
    assert allocs["end"].to_list() == [now] and allocs["open"].to_list() == [True]
    # 2 GPUs x 1 hour at the H100's built-in $2.49/GPU-hour, in the cost tables and the job's own figures
    cost = scan(lake, "cost_allocation").collect()
    assert cost["gpu_hours"].to_list() == [2.0] and cost["cost_usd"].to_list() == [4.98]
    stats = scan(lake, "job_stats").collect()
    assert stats["held_s"].to_list() == [3600.0] and stats["gpu_hours"].to_list() == [2.0]
