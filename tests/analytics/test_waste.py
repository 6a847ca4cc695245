"""Waste by hand: threshold 5%, window 2 hours."""

import polars as pl
import pytest

from gpuledger import schema
from gpuledger.analytics.waste import idle_allocated, idle_holds, top_offenders, waste_by

from builders import allocation, allocations, at

ALLOCS = allocations(
    allocation("J1", "vision", "G1", 1.0, at(2, 10), at(2, 14)),
    allocation("J2", "nlp", "G2", 0.5, at(2, 10, 30), at(2, 12)),
    allocation("J3", "nlp", "G3", 1.0, at(2, 10), at(2, 11)),
    allocation("J4", "research", "G4", 1.0, at(2, 10), at(2, 12)),
)
HOURLY = pl.LazyFrame(
    {
        "gpu_uuid": ["G1"] * 4 + ["G2"] * 2 + ["G3"],
        "hour": [at(2, 10), at(2, 11), at(2, 12), at(2, 13), at(2, 10), at(2, 11), at(2, 10)],
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
    assert top["idle_since"].to_list() == [at(2, 11), at(2, 10)]


def test_a_window_of_one_hour_counts_every_idle_hour():
    h = idle_allocated(ALLOCS, HOURLY, threshold_pct=5, window_h=1).collect()
    assert h.filter(pl.col("wasted"))["gpu_hours"].sum() == pytest.approx(2.0 + 0.75 + 1.0)  # J3's hour too


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
    now = at(2, 14, 20)  # the last complete hour is 13:00-14:00; 14:00 is in progress
    allocs = allocations(
        # K1: busy at 10:00, idle 11:00-13:00 -> idle since 11:00, 3 h by 14:00
        allocation("K1", "vision", "G1", 1.0, at(2, 10), now, pod="k1"),
        # K2: bound at 11:40 and idle ever since -> idle since 11:40 (not 11:00), 2 h 20 min
        allocation("K2", "vision", "G2", 0.5, at(2, 11, 40), now, pod="k2"),
        # K3: idle until 13:00 but busy in the hour in progress -> not idle now
        allocation("K3", "nlp", "G3", 1.0, at(2, 10), now, pod="k3"),
        # K4: idle 10:00-11:00, no telemetry at 12:00 (breaks the run), idle at 13:00 -> since 13:00, 1 h
        allocation("K4", "nlp", "G4", 1.0, at(2, 10), now, pod="k4"),
        # K5: idle earlier, busy in the last complete hour -> not idle
        allocation("K5", "nlp", "G5", 1.0, at(2, 10), now, pod="k5"),
    )
    hourly = _hourly(
        [("G1", at(2, 10), 60.0), ("G1", at(2, 11), 1.0), ("G1", at(2, 12), 0.0), ("G1", at(2, 13), 4.9)]
        + [("G2", at(2, 11), 0.0), ("G2", at(2, 12), 0.0), ("G2", at(2, 13), 0.0), ("G2", at(2, 14), 0.0)]
        + [("G3", at(2, 12), 0.0), ("G3", at(2, 13), 0.0), ("G3", at(2, 14), 30.0)]
        + [("G4", at(2, 10), 0.0), ("G4", at(2, 11), 0.0), ("G4", at(2, 13), 2.0)]
        + [("G5", at(2, 12), 0.0), ("G5", at(2, 13), 50.0)]
    )
    got = idle_holds(allocs, hourly, 5.0, now).collect()
    rows = {r["job_id"]: (r["idle_since"], r["idle_s"], r["share"]) for r in got.iter_rows(named=True)}
    assert rows == {
        "K1": (at(2, 11), 3 * 3600.0, 1.0),
        "K2": (at(2, 11, 40), 2 * 3600.0 + 20 * 60, 0.5),
        "K4": (at(2, 13), 3600.0, 1.0),
    }
    assert set(got["computed_at"]) == {now} and set(got["pod"]) == {"k1", "k2", "k4"}
    assert got.columns == schema.table("idle_holds").column_names[:-1]  # every column but the partition's date


def test_idle_holds_carry_their_jobs_class():
    """Each hold's class is its allocation's (the job's workload_class): the idle-hog gate counts a notebook after
    1 h, training after 2 h. A job of no class (written before the column) reads null, and so do intervals built
    without the column at all."""
    now = at(2, 14, 20)
    allocs = allocations(
        allocation("NB", "vision", "G1", 1.0, at(2, 10), now, pod="nb", workload_class="notebook"),
        allocation("TR", "vision", "G2", 1.0, at(2, 10), now, pod="tr", workload_class="training"),
        allocation("OLD", "vision", "G3", 1.0, at(2, 10), now, pod="old", workload_class=None),
    )
    hourly = _hourly([(g, at(2, h), 0.0) for g in ("G1", "G2", "G3") for h in (10, 11, 12, 13)])
    got = idle_holds(allocs, hourly, 5.0, now).collect()
    assert dict(zip(got["job_id"], got["workload_class"], strict=True)) == {
        "NB": "notebook",
        "TR": "training",
        "OLD": None,
    }
    assert got.columns == schema.table("idle_holds").column_names[:-1]
    unclassed = allocations(allocation("NB", "vision", "G1", 1.0, at(2, 10), now, pod="nb"))
    assert idle_holds(unclassed, hourly, 5.0, now).collect()["workload_class"].to_list() == [None]
