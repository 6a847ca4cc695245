"""Waste by hand: threshold 5%, window 2 hours."""

import datetime as dt

import polars as pl
import pytest

from analytics.waste import idle_allocated, top_offenders, waste_by

UTC = dt.timezone.utc


def at(h, m=0):
    return dt.datetime(2026, 11, 2, h, m, tzinfo=UTC)


ALLOCS = pl.LazyFrame(
    [
        dict(job_id="J1", tenant="vision", namespace="v", pod="p1", gpu_uuid="G1", share=1.0, start=at(10), end=at(14)),
        dict(
            job_id="J2", tenant="nlp", namespace="n", pod="p2", gpu_uuid="G2", share=0.5, start=at(10, 30), end=at(12)
        ),
        dict(job_id="J3", tenant="nlp", namespace="n", pod="p3", gpu_uuid="G3", share=1.0, start=at(10), end=at(11)),
        dict(
            job_id="J4", tenant="research", namespace="r", pod="p4", gpu_uuid="G4", share=1.0, start=at(10), end=at(12)
        ),
    ],
    schema_overrides={"start": pl.Datetime("us", "UTC"), "end": pl.Datetime("us", "UTC")},
)
HOURLY = pl.LazyFrame(
    {
        "gpu_uuid": ["G1"] * 4 + ["G2"] * 2 + ["G3"],
        "hour": [at(10), at(11), at(12), at(13), at(10), at(11), at(10)],
        "util_gpu_pct_mean": [50.0, 2.0, 1.0, 80.0, 1.0, 3.0, 0.0],
    },
    schema_overrides={"hour": pl.Datetime("us", "UTC")},
)  # G4 has no telemetry at all


def test_idle_runs_of_at_least_the_window_are_waste():
    h = idle_allocated(ALLOCS, HOURLY, threshold_pct=5, window_h=2).collect()
    wasted = {(r["job_id"], r["hour"].hour): r["gpu_hours"] for r in h.filter(pl.col("wasted")).iter_rows(named=True)}
    # J1: 11:00 and 12:00 below 5% (a 2-hour run); J2: 10:30-11:00 (0.5 h x 0.5) and 11:00-12:00 (1 h x 0.5)
    assert wasted == {("J1", 11): 1.0, ("J1", 12): 1.0, ("J2", 10): 0.25, ("J2", 11): 0.5}
    # J3 idled one hour only (shorter than the window); J4 has no telemetry, which is not evidence of idleness
    assert not h.filter(pl.col("job_id").is_in(["J3", "J4"]) & pl.col("wasted")).height


def test_waste_per_tenant_and_top_offenders():
    h = idle_allocated(ALLOCS, HOURLY, threshold_pct=5, window_h=2)
    w = {r["tenant"]: r for r in waste_by(h).collect().iter_rows(named=True)}
    assert (w["vision"]["allocated_gpu_hours"], w["vision"]["idle_gpu_hours"]) == (4.0, 2.0)
    assert w["nlp"]["allocated_gpu_hours"] == pytest.approx(0.75 + 1.0)  # J2 + J3
    assert w["nlp"]["idle_gpu_hours"] == pytest.approx(0.75)
    assert w["research"]["idle_gpu_hours"] == 0.0
    top = top_offenders(h).collect()
    assert top["job_id"].to_list() == ["J1", "J2"] and top["idle_gpu_hours"].to_list() == [2.0, 0.75]
    assert top["idle_since"].to_list() == [at(11), at(10)]


def test_a_window_of_one_hour_counts_every_idle_hour():
    h = idle_allocated(ALLOCS, HOURLY, threshold_pct=5, window_h=1).collect()
    assert h.filter(pl.col("wasted"))["gpu_hours"].sum() == pytest.approx(2.0 + 0.75 + 1.0)  # J3's hour too
