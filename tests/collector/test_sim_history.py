"""What `gpuledger up` backfills into an empty lake: recent days fine, older days coarse, enough of them that the
capacity forecast (28 days of daily demand, analytics/forecast.py MIN_DAYS) is not empty on the first start.
Before, up backfilled 7 days and demand_forecast held only `too_short` rows."""

import dataclasses

import polars as pl
import pytest

from gpuledger.analytics.forecast import MIN_DAYS
from gpuledger.collector.sim.backfill import backfill_history
from gpuledger.collector.sim.fleet import build_nodes
from gpuledger.collector.sim.telemetry import health_events
from gpuledger.config import SimConfig, defaults
from gpuledger.lake import scan

from builders import END

# The default plan (7 days at 30 s after 28 at 150 s), scaled down in space and in its fine days: 2 nodes of 2
# L4s, 1 day at 30 s after the default 28 days at the default 150 s.
SCALED = dataclasses.replace(defaults().simulator, nodes=2, gpus_per_node=2, models=("L4",), backfill_days=1)


def _history(tmp_path, sim: SimConfig):
    from gpuledger.analytics.runner import run

    cfg = dataclasses.replace(defaults(), simulator=sim)
    lake = tmp_path / "lake"
    backfill_history(cfg, lake, END, workers=1)
    run(lake, until_s=END, cfg=cfg)
    return lake


@pytest.mark.slow
def test_the_default_history_gives_a_forecast(tmp_path):
    assert defaults().simulator.history_days + 1 >= MIN_DAYS  # the default reaches the forecast's minimum
    lake = _history(tmp_path, SCALED)
    s = scan(lake, "gpu_samples").collect().sort("gpu_uuid", "ts")
    # 4 GPUs x (28 days x 576 samples at 150 s + 1 day x 2,880 at 30 s).
    assert (SCALED.history_step_s, SCALED.backfill_step_s) == (150, 30)
    assert s.height == 4 * (28 * 576 + 2880)
    steps = s.with_columns(
        pl.col("ts").diff().dt.total_seconds().over("gpu_uuid").alias("step_s"),
        pl.col("energy_j").diff().over("gpu_uuid").alias("energy_step_j"),
    ).drop_nulls("step_s")
    fine = pl.col("ts").dt.epoch("s") > END - 86400
    assert set(steps.filter(~fine)["step_s"]) == {150}
    assert set(steps.filter(fine)["step_s"]) == {30}
    # One energy counter across the coarse and the fine days (a reset would read as a GPU reset).
    assert (steps["energy_step_j"] >= 0).all()
    # The node inventory is reported for every day, coarse ones included: 2 nodes x (28 + 1) days.
    nodes = scan(lake, "nodes").collect()
    assert nodes.select("node", pl.col("first_seen").dt.date()).unique().height == 2 * 29
    # Every hour of the coarse days has its energy measured (two samples a 5-minute bucket give the time covered).
    hourly = scan(lake, "gpu_hourly").collect()
    assert hourly.height == 4 * 29 * 24 and hourly["energy_wh"].null_count() == 0
    f = scan(lake, "demand_forecast").collect()
    assert set(f["kind"]) == {"history", "backtest", "forecast", "candidate"}
    assert f.filter(pl.col("kind") == "forecast").height == 28  # HORIZON_DAYS ahead for the one model


@pytest.mark.slow
def test_a_week_alone_is_too_short_for_the_forecast(tmp_path):
    # What up backfilled before (backfill_days = 7, no older history): the forecast says why it is empty.
    lake = _history(tmp_path, dataclasses.replace(SCALED, backfill_days=7, history_days=0))
    assert set(scan(lake, "demand_forecast").collect()["kind"]) == {"too_short"}


def test_health_events_of_a_month_are_those_of_its_days():
    # The coarse history draws a month of a node at once; the fine days one day at a time: the same events.
    t0, t1 = END - 31 * 86400 + 1234, END - 17
    days = [(max(t0, END - (31 - d) * 86400), min(t1, END - (30 - d) * 86400)) for d in range(31)]
    total = 0
    for node in build_nodes(6, 8, ("H100",), 5, "c"):  # ~11 events expected (0.73 % a GPU-day)
        by_day = [e for a, b in days for e in health_events(node, a, b, 5, "c")]
        month = health_events(node, t0, t1, 5, "c")
        assert month == sorted(by_day, key=lambda r: (r["ts"], r["gpu_uuid"], r["kind"]))
        total += len(month)
    assert total > 0
