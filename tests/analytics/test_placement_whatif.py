"""The placement what-if (analytics/placement_whatif.py) on the tiny hand-built lake of tests/placement_case.py,
every figure derived by hand there; and the same figures from the lake on each store (local and S3)."""

import datetime as dt

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from gpuledger.analytics import placement_whatif as pw
from gpuledger.config import Rate
from gpuledger.errors import UsageError

from builders import at, put_lake
from placement_case import DAY, END, EXPECTED, RATES, START, T4, build_lake


@pytest.fixture
def tiny_lake(tmp_path):
    return build_lake(tmp_path / "lake")


def test_the_replays_and_what_fgd_frees_by_hand(tiny_lake):
    got = pw.placement_whatif(tiny_lake, RATES, "c", START, END)
    assert_frame_equal(got.summary, EXPECTED, abs_tol=1e-9)
    assert got.unpriced == []
    # The artifact's curve: demand 1, 3, 5, 7 GPUs of 6 is 17, 50, 83, 117 % arrived (rounded); at 50 % BestFit has
    # F = 800 milli = 13.3 % of the fleet's GPUs fragmented, FGD none.
    at_50 = got.curves.filter(pl.col("arrived_pct") == 50).sort("policy")
    assert at_50.select("policy", "gpu_model", "frag_pct").rows() == [("bestfit", T4, 800 / 60), ("fgd", T4, 0.0)]
    # Each pod's percent and the empty percents beside it, which arrival_bins fills from their neighbours (up to
    # the last pod's).
    pcts = [p + d for p in (17, 50, 83, 117) for d in (-1, 0, 1)]
    assert got.curves.filter(pl.col("policy") == "fgd")["arrived_pct"].to_list() == pcts[:-1]


def test_one_policy_and_a_model_without_a_rate(tiny_lake):
    got = pw.placement_whatif(tiny_lake, (Rate("H100", 3.0, at(1)),), "c", START, END, policies=("fgd",))
    assert got.summary["policy"].to_list() == ["measured", "fgd", "measured", "fgd"]
    assert got.summary.filter(pl.col("policy") == "fgd")["freed_usd"].to_list() == [None, None]
    assert got.unpriced == [T4]


@pytest.mark.parametrize(
    "cluster,first,last,message",
    [
        ("elsewhere", DAY, DAY, "no GPU nodes in the lake's nodes table for cluster 'elsewhere' from 2026-11-02"),
        ("c", dt.date(2026, 11, 10), dt.date(2026, 11, 11), "no GPU nodes in the lake's nodes table for cluster 'c'"),
        ("c", dt.date(2026, 10, 30), dt.date(2026, 10, 31), "no GPU jobs of the inventory's models were submitted"),
    ],
)
def test_a_period_without_inventory_or_jobs_is_named(tiny_lake, cluster, first, last, message):
    start, end = pw.period(first, last)
    with pytest.raises(UsageError, match=message):
        pw.placement_whatif(tiny_lake, RATES, cluster, start, end)


def test_no_measured_figures_and_bad_inputs_are_named(tiny_lake):
    start, end = pw.period(dt.date(2026, 11, 1), dt.date(2026, 11, 1))  # j1 is submitted that day: jobs, no rows
    with pytest.raises(UsageError, match="no measured fragmentation for cluster 'c'.*run `gpuledger analyze`"):
        pw.placement_whatif(tiny_lake, RATES, "c", start, end)
    with pytest.raises(UsageError, match="--from 2026-11-03 is after --to 2026-11-02"):
        pw.period(dt.date(2026, 11, 3), DAY)
    with pytest.raises(UsageError, match="unknown policy random; policies are: fgd, bestfit"):
        pw.placement_whatif(tiny_lake, RATES, "c", START, END, policies=("random",))


def test_the_same_figures_on_each_store(tiny_lake, store):
    got = pw.placement_whatif(put_lake(tiny_lake, store), RATES, "c", START, END)
    assert_frame_equal(got.summary, EXPECTED, abs_tol=1e-9)
