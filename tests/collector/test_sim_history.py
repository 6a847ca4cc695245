"""What `gpuledger up` backfills into an empty lake: recent days fine, older days coarse, enough of them that the
capacity forecast (28 days of daily demand, analytics/forecast.py MIN_DAYS) is not empty on the first start.
Before, up backfilled 7 days and demand_forecast held only `too_short` rows."""

import dataclasses

import polars as pl
import pytest

from analytics.forecast import MIN_DAYS
from collector.sim.backfill import backfill_history
from gpuledger.config import SimConfig, defaults
from gpuledger.lake import scan

from conftest import END

# The default plan (7 days at 30 s after 28 at 300 s), scaled down: 2 nodes of 2 L4s, 1 day at 600 s after 28 at
# 3,600 s. The forecast only reads daily means, so the coarse steps change nothing it needs.
SCALED = SimConfig(
    nodes=2, gpus_per_node=2, models=("L4",), backfill_days=1, backfill_step_s=600, history_days=28, history_step_s=3600
)


def _history(tmp_path, sim: SimConfig):
    from analytics.runner import run

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
    # 4 GPUs x (28 days x 24 hourly samples + 1 day x 144 ten-minute samples) = 4 x 816.
    assert s.height == 4 * (28 * 24 + 144)
    steps = s.with_columns(
        pl.col("ts").diff().dt.total_seconds().over("gpu_uuid").alias("step_s"),
        pl.col("energy_j").diff().over("gpu_uuid").alias("energy_step_j"),
    ).drop_nulls("step_s")
    fine = pl.col("ts").dt.epoch("s") > END - 86400
    assert set(steps.filter(~fine)["step_s"]) == {3600}
    assert set(steps.filter(fine)["step_s"]) == {600}
    # One energy counter across the coarse and the fine days (a reset would read as a GPU reset).
    assert (steps["energy_step_j"] >= 0).all()
    f = scan(lake, "demand_forecast").collect()
    assert set(f["kind"]) == {"history", "backtest", "forecast"}
    assert f.filter(pl.col("kind") == "forecast").height == 28  # HORIZON_DAYS ahead for the one model


@pytest.mark.slow
def test_a_week_alone_is_too_short_for_the_forecast(tmp_path):
    # What up backfilled before (backfill_days = 7, no older history): the forecast says why it is empty.
    lake = _history(tmp_path, dataclasses.replace(SCALED, backfill_days=7, history_days=0))
    assert set(scan(lake, "demand_forecast").collect()["kind"]) == {"too_short"}
