"""The capacity what-if on cases worked out by hand."""

import datetime as dt

import polars as pl
import pytest

from gpuledger.analytics.whatif import Scenario, demand, fleet_nodes, replay, whatif

from builders import at

T0 = at(2)
T1 = T0 + dt.timedelta(hours=2)
NODES = pl.DataFrame({"gpu_model": ["A"], "gpu_count": [2]})


def stats(rows):
    base = {"scheduled_at": T0, "queue_s": 0.0, "efficiency": 0.5}
    return pl.DataFrame([{**base, **r} for r in rows]).with_columns(
        pl.col("submitted_at", "scheduled_at").dt.cast_time_unit("us")
    )


# j1 takes both GPUs at 0 for 1 h; j2 (1 GPU) comes at 0:30 and must wait for them: 30 min.
JOBS = stats(
    [
        {"job_id": "j1", "gpu_model": "A", "gpus": 2.0, "submitted_at": T0, "held_s": 3600.0, "efficiency": 0.01},
        {
            "job_id": "j2",
            "gpu_model": "A",
            "gpus": 1.0,
            "submitted_at": T0 + dt.timedelta(minutes=30),
            "held_s": 3600.0,
        },
    ]
)


def figures(nodes, scenario=None):
    r = replay(fleet_nodes(nodes, scenario), demand(JOBS, T0, T1, scenario), T0, T1).row(0, named=True)
    return r["gpus"], r["jobs"], r["wait_mean_s"], r["wait_p90_s"], r["allocation_pct"]


def test_today_replay():
    # Waits 0 and 1800 s (p90 by linear interpolation: 0.9 x 1800); held: 2 GPU-h + 1 GPU-h of 2 GPUs x 2 h.
    assert figures(NODES) == (2, 2, 900.0, pytest.approx(1620.0), pytest.approx(75.0))


def test_adding_gpus_removes_the_wait():
    # A second 2-GPU node: j2 starts at once; 3 GPU-h of 4 GPUs x 2 h.
    assert figures(NODES, Scenario("A", 2)) == (4, 2, 0.0, 0.0, pytest.approx(37.5))


def test_idle_rule_reclaims_the_idle_job():
    # j1 (1% busy) is ended after 15 min, so j2 starts on arrival: 2 x 0.25 + 1 x 1 GPU-h of 4 GPU-h.
    assert figures(NODES, Scenario(idle_reclaim_h=0.25)) == (2, 2, 0.0, 0.0, pytest.approx(37.5))


def test_removing_gpus_and_jobs_that_can_no_longer_fit():
    nodes = pl.DataFrame({"gpu_model": ["A", "A"], "gpu_count": [2, 2]})
    assert fleet_nodes(nodes, Scenario("A", -3)) == [("A", 1, None)]
    r = replay(fleet_nodes(nodes, Scenario("A", -3)), demand(JOBS, T0, T1), T0, T1).row(0, named=True)
    assert (r["gpus"], r["jobs"], r["unplaceable_jobs"]) == (1, 1, 1)  # j1 asks for 2 GPUs: no node has them
    assert fleet_nodes(nodes, Scenario("A", 5)) == [("A", 2, None)] * 4 + [("A", 1, None)]


def test_whatif_puts_the_measured_window_beside_both_replays():
    fleet = pl.DataFrame(
        {
            "hour": [T0, T0 + dt.timedelta(hours=1)],
            "gpu_model": ["A", "A"],
            "gpus": [2, 2],
            "allocated_gpus": [2.0, 1.0],
        }
    ).with_columns(pl.col("hour").dt.cast_time_unit("us"))
    out = whatif(NODES, JOBS, fleet, T0, T1, Scenario("A", 2))
    assert out["variant"].to_list() == ["measured", "today", "scenario"]
    measured = out.row(0, named=True)
    assert (measured["gpus"], measured["jobs"], measured["allocation_pct"]) == (2, 2, pytest.approx(75.0))
    assert Scenario("A", 2, 3).describe() == "+2 A GPUs, reclaim jobs under 5% busy after 3 h"
