"""The what-if's input bounds (analytics.whatif.check), on a fleet small enough to count by hand."""

import datetime as dt

import polars as pl
import pytest

from gpuledger.analytics.whatif import Scenario, ScenarioError, check

from builders import at

T0 = at(2)
WEEK = T0 + dt.timedelta(days=7)
# 20 GPUs: model A has 8 (two nodes of 4), model B 12.
NODES = pl.DataFrame({"gpu_model": ["A", "A", "B"], "gpu_count": [4, 4, 12]})


@pytest.mark.parametrize(
    "scenario",
    [
        Scenario(),
        Scenario("A", 80),
        Scenario("A", -8),
        Scenario("B", -12),
        Scenario("A", 0, 0.0),
        Scenario(None, 0, 168),
    ],
)
def test_inside_the_bounds(scenario):
    check(scenario, NODES, T0, WEEK)


@pytest.mark.parametrize(
    "scenario,end,message",
    [
        (
            Scenario("A", 81),
            WEEK,
            "GPUs to add must be between -8 and +80 for A, not +81 (it has 8 GPUs to remove; at most 4x the "
            "fleet's 20 GPUs can be added)",
        ),
        (
            Scenario("A", -9),
            WEEK,
            "GPUs to add must be between -8 and +80 for A, not -9 (it has 8 GPUs to remove; at most 4x the "
            "fleet's 20 GPUs can be added)",
        ),
        (Scenario("C", 1), WEEK, "GPU model 'C' is not in this fleet (its nodes have: A, B)"),
        (Scenario(None, 4), WEEK, "GPUs to add needs a GPU model"),
        (
            Scenario(idle_reclaim_h=24.5),
            T0 + dt.timedelta(days=1),
            "the reclaim time must be between 0 and 24 hours (the replayed window), not 24.5",
        ),
        (
            Scenario(idle_reclaim_h=float("nan")),
            WEEK,
            "the reclaim time must be between 0 and 168 hours (the replayed window), not nan",
        ),
        (
            Scenario(idle_threshold=1.5),
            WEEK,
            "the idle threshold must be between 0 and 1 (a share of busy time), not 1.5",
        ),
        (
            Scenario(),
            T0 + dt.timedelta(days=32),
            "the replayed window must be longer than 0 and at most 31 days, not 2026-11-02 00:00:00+00:00 to "
            "2026-12-04 00:00:00+00:00",
        ),
    ],
)
def test_outside_the_bounds_names_the_input_and_its_range(scenario, end, message):
    with pytest.raises(ScenarioError) as e:
        check(scenario, NODES, T0, end)
    assert str(e.value) == message


def test_every_problem_is_named_at_once():
    with pytest.raises(ScenarioError, match="^GPUs to add must be .*; the reclaim time must be .*; the idle threshold"):
        check(Scenario("A", 1000, -1.0, 2.0), NODES, T0, WEEK)
