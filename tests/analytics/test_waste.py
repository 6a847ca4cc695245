"""Waste by hand: threshold 5%, window 2 hours."""

import datetime as dt

import polars as pl
import pytest

from gpuledger import schema
from gpuledger.analytics.waste import idle_allocated, idle_holds, top_offenders, waste_by

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


def _open(rows):
    base = dict(cluster="c", gpu_model="H100", node="n1")
    return pl.LazyFrame(
        [base | r for r in rows], schema_overrides={"start": pl.Datetime("us", "UTC"), "end": pl.Datetime("us", "UTC")}
    )


def _hourly(samples):
    return pl.LazyFrame(
        {
            "gpu_uuid": [g for g, _, _ in samples],
            "hour": [h for _, h, _ in samples],
            "util_gpu_pct_mean": [u for _, _, u in samples],
        },
        schema_overrides={"hour": pl.Datetime("us", "UTC")},
    )


def test_idle_holds_name_each_idle_gpu_and_since_when():
    now = at(14, 20)  # the last complete hour is 13:00-14:00; 14:00 is in progress
    allocs = _open(
        [
            # K1: busy at 10:00, idle 11:00-13:00 -> idle since 11:00, 3 h by 14:00
            dict(
                job_id="K1", tenant="vision", namespace="v", pod="k1", gpu_uuid="G1", share=1.0, start=at(10), end=now
            ),
            # K2: bound at 11:40 and idle ever since -> idle since 11:40 (not 11:00), 2 h 20 min
            dict(
                job_id="K2",
                tenant="vision",
                namespace="v",
                pod="k2",
                gpu_uuid="G2",
                share=0.5,
                start=at(11, 40),
                end=now,
            ),
            # K3: idle until 13:00 but busy in the hour in progress -> not idle now
            dict(job_id="K3", tenant="nlp", namespace="n", pod="k3", gpu_uuid="G3", share=1.0, start=at(10), end=now),
            # K4: idle 10:00-11:00, no telemetry at 12:00 (breaks the run), idle at 13:00 -> since 13:00, 1 h
            dict(job_id="K4", tenant="nlp", namespace="n", pod="k4", gpu_uuid="G4", share=1.0, start=at(10), end=now),
            # K5: idle earlier, busy in the last complete hour -> not idle
            dict(job_id="K5", tenant="nlp", namespace="n", pod="k5", gpu_uuid="G5", share=1.0, start=at(10), end=now),
        ]
    )
    hourly = _hourly(
        [("G1", at(10), 60.0), ("G1", at(11), 1.0), ("G1", at(12), 0.0), ("G1", at(13), 4.9)]
        + [("G2", at(11), 0.0), ("G2", at(12), 0.0), ("G2", at(13), 0.0), ("G2", at(14), 0.0)]
        + [("G3", at(12), 0.0), ("G3", at(13), 0.0), ("G3", at(14), 30.0)]
        + [("G4", at(10), 0.0), ("G4", at(11), 0.0), ("G4", at(13), 2.0)]
        + [("G5", at(12), 0.0), ("G5", at(13), 50.0)]
    )
    got = idle_holds(allocs, hourly, 5.0, now).collect()
    rows = {r["job_id"]: (r["idle_since"], r["idle_s"], r["share"]) for r in got.iter_rows(named=True)}
    assert rows == {
        "K1": (at(11), 3 * 3600.0, 1.0),
        "K2": (at(11, 40), 2 * 3600.0 + 20 * 60, 0.5),
        "K4": (at(13), 3600.0, 1.0),
    }
    assert set(got["computed_at"]) == {now} and set(got["pod"]) == {"k1", "k2", "k4"}
    assert got.columns == schema.table("idle_holds").column_names[:-1]  # every column but the partition's date
