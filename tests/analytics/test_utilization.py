"""Utilization by hand: efficiency weighted by GPU-hours, shares of one GPU, missing SM activity."""

import polars as pl
import pytest

from gpuledger.analytics.utilization import efficiency, job_hourly

from builders import allocation, allocations, at

# J1 (vision): G1 whole, 10:00-12:00; J2 and J3 (nlp): half of G2 each, 10:00-11:00
ALLOCS = allocations(
    allocation("J1", "vision", "G1", 1.0, at(2, 10), at(2, 12)),
    allocation("J2", "nlp", "G2", 0.5, at(2, 10), at(2, 11)),
    allocation("J3", "nlp", "G2", 0.5, at(2, 10), at(2, 11)),
    gpu_model="H100",  # as telemetry names it below
)
HOURLY = pl.LazyFrame(
    {
        "gpu_uuid": ["G1", "G1", "G2"],
        "hour": [at(2, 10), at(2, 11), at(2, 10)],
        "model": ["H100"] * 3,
        "util_gpu_pct_mean": [90.0, 10.0, 60.0],
        "sm_active_ratio_mean": [0.5, None, 0.4],
        "mem_used_bytes_max": [10, 20, 30],
    },
    schema_overrides={"hour": pl.Datetime("us", "UTC")},
)


def test_job_hours():
    h = {(r["job_id"], r["hour"].hour): r for r in job_hourly(ALLOCS, HOURLY).collect().iter_rows(named=True)}
    assert h[("J1", 10)]["busy_gpu_hours"] == pytest.approx(0.9)  # 1 GPU-hour at 90% duty cycle
    assert h[("J1", 11)]["busy_gpu_hours"] == pytest.approx(0.1)
    assert h[("J1", 10)]["sm_active_gpu_hours"] == pytest.approx(0.5)
    assert h[("J1", 11)]["sm_active_gpu_hours"] is None  # not measured: null, not zero
    assert h[("J2", 10)]["allocated_gpu_hours"] == 0.5 and h[("J2", 10)]["busy_gpu_hours"] == pytest.approx(0.3)


def test_efficiency_is_weighted_by_gpu_hours():
    e = {r["tenant"]: r for r in efficiency(job_hourly(ALLOCS, HOURLY), ("tenant",)).collect().iter_rows(named=True)}
    # vision: (0.9 + 0.1) busy / 2 allocated = 0.5 (the mean of the two hourly ratios happens to agree)
    assert e["vision"]["efficiency"] == pytest.approx(0.5)
    # nlp: 0.3 + 0.3 busy of 1.0 allocated
    assert e["nlp"]["efficiency"] == pytest.approx(0.6)
    fleet = efficiency(job_hourly(ALLOCS, HOURLY), ("cluster",)).collect().row(0, named=True)
    # Fleet: (1.0 + 0.6) / 3.0, not the mean of the tenant ratios (0.55)
    assert fleet["efficiency"] == pytest.approx(1.6 / 3.0)


def test_idle_gpu_hours_by_the_waste_rule():
    # threshold 20%: J1's 11:00 hour (10%) is idle; with window 1 it is waste, with window 2 a lone hour is not
    one = {
        (r["job_id"], r["hour"].hour): r["idle_gpu_hours"]
        for r in job_hourly(ALLOCS, HOURLY, threshold_pct=20, window_h=1).collect().iter_rows(named=True)
    }
    assert one[("J1", 11)] == 1.0 and one[("J1", 10)] == 0.0 and one[("J2", 10)] == 0.0
    two = job_hourly(ALLOCS, HOURLY, threshold_pct=20, window_h=2).collect()
    assert two["idle_gpu_hours"].sum() == 0.0


def test_job_5min_buckets():
    from gpuledger.analytics.utilization import job_5min

    five = pl.LazyFrame(
        {
            "gpu_uuid": ["G1", "G1"],
            "bucket_start": [at(2, 10), at(2, 10, 5)],
            "util_gpu_pct_mean": [100.0, 50.0],
            "sm_active_ratio_mean": [None, 0.25],
        },
        schema_overrides={"bucket_start": pl.Datetime("us", "UTC"), "sm_active_ratio_mean": pl.Float64},
    )
    a = ALLOCS.filter(pl.col("job_id") == "J1").with_columns(pl.lit(at(2, 10, 10)).dt.cast_time_unit("us").alias("end"))
    rows = job_5min(a, five).collect().sort("bucket_start")
    # 10:00-10:10 whole G1: two buckets of 5/60 GPU-hours; busy 100% then 50%
    assert rows["allocated_gpu_hours"].to_list() == pytest.approx([5 / 60, 5 / 60])
    assert rows["busy_gpu_hours"].to_list() == pytest.approx([5 / 60, 2.5 / 60])
    assert rows["sm_active_gpu_hours"].to_list()[0] is None
