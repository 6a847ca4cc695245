import datetime as dt

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from gpuledger.analytics.gpu_hourly import gpu_5min, gpu_hourly
from gpuledger.analytics.runner import run, watermark
from gpuledger.lake import scan, table_files

from builders import END, at, job_state, make_lake, write_rows


def test_gpu_hourly_by_hand():
    samples = pl.LazyFrame(
        {
            "ts": [at(2, 10), at(2, 10, 0, 30), at(2, 10, 1), at(2, 11, 5)],
            "cluster": ["c"] * 4,
            "node": ["n"] * 4,
            "gpu_uuid": ["GPU-a"] * 4,
            "parent_gpu_uuid": pl.Series([None] * 4, dtype=pl.String),
            "model": ["NVIDIA L4"] * 4,
            "pod": [None, "p", "p", None],
            "util_gpu_pct": [0.0, 50.0, 100.0, 0.0],
            "sm_active_ratio": [None, None, None, None],
            "mem_used_bytes": [0, 2**30, 2**31, 0],
            "power_w": [100.0, 200.0, 300.0, 16.0],
        },
        schema_overrides={"sm_active_ratio": pl.Float32, "power_w": pl.Float32, "util_gpu_pct": pl.Float32},
    )
    got = gpu_hourly(gpu_5min(samples)).collect().sort("hour")
    assert got["hour"].to_list() == [at(2, 10), at(2, 11)]
    row = got.row(0, named=True)
    assert row["samples"] == 3
    assert row["allocated_ratio"] == pytest.approx(2 / 3)  # 2 of 3 samples had a pod
    assert row["busy_ratio"] == pytest.approx(2 / 3)
    assert row["util_gpu_pct_mean"] == pytest.approx(50.0)  # (0 + 50 + 100) / 3
    assert row["sm_active_ratio_mean"] is None  # no source gave it: null, never zero
    assert row["mem_used_bytes_max"] == 2**31
    # 3 samples 30 s apart cover 90 s: 200 W x 90 s / 3600 = 5 Wh.
    assert row["energy_wh"] == pytest.approx(5.0)
    assert got.row(1, named=True)["energy_wh"] is None  # one sample: coverage unknown
    assert got["date"].to_list() == [dt.date(2026, 11, 2)] * 2


def test_run_is_incremental_and_idempotent(tmp_path):
    lake = tmp_path / "lake"
    make_lake(lake, nodes=2, gpus=2, days=1.0, step_s=60)
    first = {r.job: r for r in run(lake, until_s=END)}
    assert first["gpu_hourly"].rows == 2 * 2 * 24 and watermark(lake, "gpu_hourly") == END  # 4 GPUs x 24 h
    assert first["gpu_5min"].rows == 2 * 2 * 24 * 12
    before = scan(lake, "gpu_hourly").collect().sort("node", "gpu_uuid", "hour")
    files = {f: (lake / f).stat().st_mtime_ns for f in table_files(lake, "gpu_hourly")}
    # Running again over the same window writes identical rows (and no extra files).
    run(lake, until_s=END, from_s=END - 86400)
    after = scan(lake, "gpu_hourly").collect().sort("node", "gpu_uuid", "hour")
    assert_frame_equal(before, after)
    assert set(table_files(lake, "gpu_hourly")) == set(files)
    # Samples totals agree with the raw table.
    assert after["samples"].sum() == scan(lake, "gpu_samples").collect().height


def test_nothing_to_do_on_an_empty_lake(tmp_path):
    assert run(tmp_path, until_s=END) == []


def test_job_tables_follow_a_job_from_pending_to_running(tmp_path):
    lake = tmp_path / "lake"
    pending = job_state("j1", "pending", at(2, 10), tenant="t", gpus=2.0, submitted_at=at(2, 10))
    write_rows(lake, "jobs", [pending], "s1")
    run(lake, until_s=at(2, 11).timestamp())
    (row,) = scan(lake, "job_stats").collect().iter_rows(named=True)
    assert (row["status"], row["node"], row["queue_s"]) == ("pending", None, 3600.0)  # waited 10:00 -> 11:00
    assert scan(lake, "gpu_allocations").collect().height == 0  # not bound: holds nothing
    bound = pending | job_state("j1", "running", at(2, 11), node="n1", scheduled_at=at(2, 11), gpu_uuids=["G1", "G2"])
    write_rows(lake, "jobs", [bound], "s2")
    run(lake, until_s=at(2, 12).timestamp())
    (row,) = scan(lake, "job_stats").collect().iter_rows(named=True)  # the pending state was replaced, not added
    assert (row["status"], row["node"], row["queue_s"], row["gpu_hours"]) == ("running", "n1", 3600.0, 2.0)
    assert [f.split("/")[1] for f in table_files(lake, "job_stats")] == ["date=2026-11-02"]  # by date only
    alloc = scan(lake, "gpu_allocations").collect().sort("gpu_uuid")
    assert alloc["gpu_uuid"].to_list() == ["G1", "G2"] and alloc["share"].to_list() == [1.0, 1.0]
    assert alloc["open"].to_list() == [True, True]


def test_hourly_from_5_minute_buckets_weights_by_samples():
    # 10:00-10:05: 3 samples at 100 W, util 90; 10:05-10:10: 1 sample at 400 W, util 10 (a lone sample: energy
    # unknown for that bucket). Hourly: util (3 x 90 + 1 x 10) / 4 = 70; power (3 x 100 + 400) / 4 = 175;
    # energy = the known bucket only: 100 W x 90 s = 2.5 Wh.
    samples = pl.LazyFrame(
        {
            "ts": [at(2, 10), at(2, 10, 0, 30), at(2, 10, 1), at(2, 10, 6)],
            "cluster": ["c"] * 4,
            "node": ["n"] * 4,
            "gpu_uuid": ["G"] * 4,
            "parent_gpu_uuid": pl.Series([None] * 4, dtype=pl.String),
            "model": ["m"] * 4,
            "pod": ["p"] * 4,
            "util_gpu_pct": [90.0, 90.0, 90.0, 10.0],
            "sm_active_ratio": pl.Series([None] * 4, dtype=pl.Float32),
            "mem_used_bytes": [1, 2, 3, 4],
            "power_w": [100.0, 100.0, 100.0, 400.0],
        }
    )
    five = gpu_5min(samples).collect().sort("bucket_start")
    assert five["samples"].to_list() == [3, 1] and five["energy_wh"].to_list() == [pytest.approx(2.5), None]
    (h,) = gpu_hourly(five.lazy()).collect().iter_rows(named=True)
    assert (h["samples"], h["util_gpu_pct_mean"], h["power_w_mean"]) == (4, 70.0, 175.0)
    assert h["energy_wh"] == pytest.approx(2.5) and h["mem_used_bytes_max"] == 4
    assert h["sm_active_ratio_mean"] is None


def test_incremental_runs_equal_one_full_run(tmp_path):
    lake = tmp_path / "lake"
    make_lake(lake, nodes=2, gpus=2, days=1.0, step_s=60)
    for until in (END - 9 * 3600 + 600, END - 3 * 3600 - 60, END):  # uneven steps, mid-hour included
        run(lake, until_s=until)
    full = tmp_path / "full"
    make_lake(full, nodes=2, gpus=2, days=1.0, step_s=60)
    run(full, until_s=END)
    for table, t in (("gpu_5min", "bucket_start"), ("gpu_hourly", "hour")):
        a = scan(lake, table).collect().sort("gpu_uuid", t)
        b = scan(full, table).collect().sort("gpu_uuid", t)
        assert_frame_equal(a, b)


def test_rollups_written_a_day_at_a_time_equal_those_written_a_week_at_a_time(tmp_path, monkeypatch):
    """A long first run writes its rollups in chunks of days (bounded memory); the chunk size changes no row."""
    import gpuledger.analytics.runner as runner

    lakes = {}
    for chunk in (1, 7):
        lake = tmp_path / f"chunk{chunk}"
        make_lake(lake, nodes=2, gpus=2, days=3.0, step_s=300)
        monkeypatch.setattr(runner, "CHUNK_DAYS", chunk)
        reports = {r.job: r for r in run(lake, until_s=END)}
        assert reports["job_5min"].rows > 0 and reports["gpu_5min"].days == 4  # 3 days back from END, and END's
        lakes[chunk] = lake
    for table, key in (
        ("gpu_5min", ["gpu_uuid", "bucket_start"]),
        ("gpu_hourly", ["gpu_uuid", "hour"]),
        ("job_5min", ["job_id", "bucket_start"]),
    ):
        a = scan(lakes[1], table).collect().sort(key)
        b = scan(lakes[7], table).collect().sort(key)
        assert a.height > 0
        assert_frame_equal(a, b)
