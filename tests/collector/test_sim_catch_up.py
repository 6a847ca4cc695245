"""What `gpuledger up` writes before its live simulated fleet starts (collector/sim/backfill.py plan_catch_up and
catch_up): history for an empty lake, the gap since a fleet last ran, nothing otherwise."""

from dataclasses import replace

import polars as pl

from gpuledger.collector.sim import state as sim_state
from gpuledger.collector.sim.backfill import catch_up, plan_catch_up
from gpuledger.config import defaults

from builders import at, epoch_us, write_rows

NOW_S = 30 * 59_766_667  # 2026-10-26 09:40:10 UTC, on the 30 s sample grid


def test_an_empty_lake_gets_the_configured_history(tmp_path):
    plan = plan_catch_up(defaults(), tmp_path / "lake", NOW_S, 10.0)
    assert (plan.days, plan.nodes, plan.resume) == (7.0, 12, None)
    assert plan.summary == (
        "empty lake: backfilling 7 days every 30 s, and 28 days before them every 150 s, of a 12-node simulated fleet"
    )
    assert plan_catch_up(defaults(), tmp_path / "lake", NOW_S, 10.0, backfill_days=1.5).days == 1.5


def test_no_history_when_asked_for_none_or_when_the_lake_has_real_samples(tmp_path):
    assert plan_catch_up(defaults(), tmp_path / "lake", NOW_S, 10.0, backfill_days=0) is None
    lake = tmp_path / "real"
    write_rows(
        lake,
        "gpu_samples",
        [{"ts": epoch_us(at(2)), "cluster": "default", "node": "n1", "gpu_uuid": "GPU-1", "source": "nvml"}],
    )
    assert plan_catch_up(defaults(), lake, NOW_S, 10.0) is None


def _stopped_fleet(lake, stopped_s: float) -> sim_state.SimState:
    st = sim_state.SimState(5, stopped_s - 86400, 1, 2, ("L4",), 0.5, stopped_s)
    sim_state.save(lake, "default", st)
    return st


def test_a_fleet_stopped_more_than_three_scrapes_ago_gets_the_gap(tmp_path):
    lake = tmp_path / "lake"
    st = _stopped_fleet(lake, NOW_S - 100)
    # 100 s > 3 x 30 s: the gap is filled, by the fleet that stopped (its nodes, not the config's 12).
    plan = plan_catch_up(defaults(), lake, NOW_S, 30.0)
    assert (plan.resume, plan.nodes, plan.days) == (st, 1, None)
    assert plan.summary == "filling the 0.03 h since the fleet last ran"  # 100 s / 3600
    # 90 s is not more than 3 x 30 s: the live collector's first scrape covers it.
    _stopped_fleet(lake, NOW_S - 90)
    assert plan_catch_up(defaults(), lake, NOW_S, 30.0) is None


def test_catch_up_writes_the_gap_and_moves_the_fleets_state_to_now(tmp_path):
    lake = tmp_path / "lake"
    _stopped_fleet(lake, NOW_S - 600)
    cfg = defaults()
    cfg = replace(cfg, simulator=replace(cfg.simulator, backfill_step_s=30.0))
    done = []
    report = catch_up(cfg, lake, plan_catch_up(cfg, lake, NOW_S, 30.0), progress=done.append)
    # 1 node x 2 GPUs x 600 s / 30 s, from the instant the fleet stopped (exclusive of nothing before it).
    assert report.samples == 40 and sum(done) == 1
    ts = pl.read_parquet(lake / "gpu_samples" / "**" / "*.parquet")["ts"]
    assert (ts.min().timestamp(), ts.max().timestamp()) == (NOW_S - 600, NOW_S - 30)
    assert sim_state.load(lake, "default").written_until_s == NOW_S
    assert plan_catch_up(cfg, lake, NOW_S, 30.0) is None  # nothing left to fill
