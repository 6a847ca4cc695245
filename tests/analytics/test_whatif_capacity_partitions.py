"""Partitioned GPUs in the capacity what-if (analytics/whatif.py): a partition ask waits for a free instance of its
type on the layouts gpu_hourly reported, a whole-GPU job never lands on a partitioned GPU; by hand, then from
tests/partition_fleet.py's lake on both stores, read as the capacity page reads it."""

from __future__ import annotations

import polars as pl
import pytest

from gpuledger.analytics import placement_whatif as pw
from gpuledger.analytics.runner import run
from gpuledger.analytics.whatif import Scenario, demand, fleet_nodes, for_dashboard, replay, whatif
from gpuledger.config import defaults
from gpuledger.dashboards.data import DashData
from gpuledger.dashboards.pages.capacity import whatif_frames
from gpuledger.schema import UTC_US

from builders import at
from partition_fleet import ASCEND, H100, L4, MI300X, NOW, build_lake

T0, T1 = at(2, 10), at(2, 12)  # a 2-hour window: 7,200 s
ONE_G = ("1g.10gb",) * 7


def _stats(rows) -> pl.DataFrame:
    """job_stats rows (with jobs' mig_profile, as the capacity page joins it): job, gpus, profile, held_s; all
    submitted at T0 and finished."""
    return pl.DataFrame(
        [(j, H100, g, T0, T0, float(h), 0.0, 0.5, p) for j, g, p, h in rows],
        schema={
            "job_id": pl.String,
            "gpu_model": pl.String,
            "gpus": pl.Float64,
            "submitted_at": UTC_US,
            "scheduled_at": UTC_US,
            "held_s": pl.Float64,
            "queue_s": pl.Float64,
            "efficiency": pl.Float64,
            "mig_profile": pl.String,
        },
        orient="row",
    )


# n1: GPU-p in all-1g MIG (7 x 1g.10gb), GPU-w whole
NODES = pl.DataFrame({"node": ["n1"], "gpu_model": [H100], "gpu_count": [2]})
HOURLY = pl.DataFrame(
    [(T0, "n1", "GPU-w", None, None)] + [(T0, "n1", f"GPU-p/gi{k}", "GPU-p", "1g.10gb") for k in range(1, 8)],
    schema={
        "hour": UTC_US,
        "node": pl.String,
        "gpu_uuid": pl.String,
        "parent_gpu_uuid": pl.String,
        "mig_profile": pl.String,
    },
    orient="row",
)
# 8 one-instance 1g jobs and a whole-GPU job, all at T0: J1 holds 600 s, J2..J8 3,600 s, W 1,800 s
EIGHT = _stats([("J1", 1 / 7, "1g.10gb", 600)] + [(f"J{k}", 1 / 7, "1g.10gb", 3600) for k in range(2, 9)])
EIGHT_AND_W = pl.concat([EIGHT, _stats([("W", 1.0, None, 1800)])])
FLEET = pl.DataFrame(schema={"hour": UTC_US, "gpu_model": pl.String, "gpus": pl.Int64, "allocated_gpus": pl.Float64})


def _h100(out: pl.DataFrame, variant: str) -> dict:
    return out.filter((pl.col("variant") == variant) & (pl.col("gpu_model") == H100)).row(0, named=True)


def test_the_eighth_1g_ask_waits_for_the_first_to_end_and_the_whole_job_gets_the_whole_gpu():
    out = whatif(NODES, EIGHT_AND_W, FLEET, T0, T1, Scenario(), HOURLY)
    new = _h100(out, "today")
    # 7 instances: J1..J7 start at T0, J8 when J1 ends (600 s); W takes GPU-w at once.
    # waits (J1..J8, W) = 0 x 7, 600, 0: mean 600 / 9; p50 0; p90 at rank 0.9 x 8 = 7.2: 0 + 0.2 x 600 = 120
    assert (new["jobs"], new["unplaceable_jobs"]) == (9, 0)
    assert new["wait_mean_s"] == pytest.approx(600 / 9)
    assert (new["wait_p50_s"], new["wait_p90_s"]) == (0.0, pytest.approx(120.0))
    # held: an instance is 143 milli (1/7 rounded): J1 0.143 x 600 + J2..J7 6 x 0.143 x 3,600 + J8 0.143 x 3,600
    # (600 to 4,200, inside the window) + W 1,800 = 85.8 + 3,088.8 + 514.8 + 1,800 = 5,489.4 GPU-s of 2 x 7,200
    assert new["allocation_pct"] == pytest.approx(100 * 5489.4 / 14400)
    # The old rule (no layouts: every ask its share of a whole GPU): 6 shares of 143 fill GPU 0 (858; a 7th would
    # be 1,001), J7 and J8 go on GPU 1, so no 1g ask waits; W finds no whole GPU until J7 and J8 end at 3,600 s.
    old = _h100(whatif(NODES, EIGHT_AND_W, FLEET, T0, T1, Scenario()), "today")
    assert (old["jobs"], old["wait_mean_s"], old["wait_p90_s"]) == (9, pytest.approx(3600 / 9), pytest.approx(720.0))
    assert new["wait_mean_s"] != old["wait_mean_s"]


def test_a_whole_gpu_job_never_lands_on_the_partitioned_gpu():
    layouts = fleet_nodes(NODES, layouts=pw.gpu_layouts(HOURLY))
    assert layouts == [(H100, 2, (ONE_G, None))]  # the partitioned GPU first, the whole one last
    # W1 and W2 (1 GPU, 1,800 s each) at T0; a 2-GPU job: the node has 1 whole GPU, so it never fits
    stats = _stats([("W1", 1.0, None, 1800), ("W2", 1.0, None, 1800), ("X2", 2.0, None, 600)])
    r = replay(layouts, demand(stats, T0, T1), T0, T1).row(0, named=True)
    # W2 waits for W1 (1,800 s) though GPU-p holds nothing: waits 0 and 1,800
    assert (r["jobs"], r["unplaceable_jobs"], r["wait_mean_s"]) == (2, 1, 900.0)
    # Removing 1 H100 takes the node's whole GPU first: the 1g asks keep their instances, W never fits
    cut = fleet_nodes(NODES, Scenario(H100, -1), pw.gpu_layouts(HOURLY))
    assert cut == [(H100, 1, (ONE_G,))]
    r = replay(cut, demand(EIGHT_AND_W, T0, T1), T0, T1).row(0, named=True)
    assert (r["jobs"], r["unplaceable_jobs"], r["wait_mean_s"]) == (8, 1, 600 / 8)
    # Adding 1 gives a whole GPU on a node of its own (size 2, the model's common size, cut to 1)
    assert fleet_nodes(NODES, Scenario(H100, 1), pw.gpu_layouts(HOURLY)) == [(H100, 2, (ONE_G, None)), (H100, 1, None)]


def test_a_partition_ask_no_layout_holds_is_replayed_as_its_share():
    # a 2g.20gb ask (2/7) and two 1g instances in one ask: no layout has a 2g; the 1g pair fits GPU-p's 7
    stats = _stats([("A", 2 / 7, "2g.20gb", 600), ("B", 2 / 7, "1g.10gb", 600)])
    layouts = fleet_nodes(NODES, layouts=pw.gpu_layouts(HOURLY))
    jobs = demand(stats, T0, T1)
    assert jobs.select("job_id", "partition", "instances", "instance_milli").rows() == [
        ("A", "2g.20gb", 1, 286),
        ("B", "1g.10gb", 2, 143),
    ]
    r = replay(layouts, jobs, T0, T1).row(0, named=True)
    # both start at once: A as 2/7 of GPU-w (286 milli), B as 2 instances; held (0.286 + 2 x 0.143) x 600
    assert (r["jobs"], r["unplaceable_jobs"], r["wait_mean_s"]) == (2, 0, 0.0)
    assert r["allocation_pct"] == pytest.approx(100 * 0.572 * 600 / 14400)


@pytest.fixture
def fleet_lake(tmp_path, store):
    lake = build_lake(tmp_path / "src", store)
    run(lake, until_s=NOW.timestamp(), cfg=defaults())
    return lake


def test_the_capacity_page_reads_layouts_and_profiles_from_the_lake_on_both_stores(fleet_lake):
    start, end = at(2, 9), NOW
    data = DashData(fleet_lake)
    try:
        nodes, stats, fleet, hourly = whatif_frames(data, ["c", "c"], start, end)
    finally:
        data.close()
    # job_stats has no mig_profile: the page joins it from jobs
    assert sorted(stats.select("job_id", "mig_profile").rows()) == [
        ("C1", "cpx.nps4"),
        ("M1", "1g.10gb"),
        ("M2", "1g.10gb"),
        ("M3", "1g.10gb"),
        ("V1", "Ascend310P-2c"),
        ("W1", None),
    ]
    layouts = sorted(fleet_nodes(nodes.sort("node"), layouts=pw.gpu_layouts(hourly)), key=str)
    assert layouts == sorted(
        [
            (H100, 2, (ONE_G, None)),
            (MI300X, 1, (("cpx",) * 8,)),
            (ASCEND, 1, (("vnpu-1c", "vnpu-2c", "vnpu-4c"),)),
            (L4, 4, None),
        ],
        key=str,
    )
    # Remove 1 H100: n1's whole GPU goes (whole first), so W1 (1 GPU) never fits; M1..M3 keep their 1g instances
    _, out = for_dashboard(nodes, stats, fleet, start, end, H100, -1, None, hourly)
    today, scenario = _h100(out, "today"), _h100(out, "scenario")
    assert (today["jobs"], today["unplaceable_jobs"], today["wait_mean_s"]) == (4, 0, 0.0)
    assert (scenario["gpus"], scenario["jobs"], scenario["unplaceable_jobs"]) == (1, 3, 1)
