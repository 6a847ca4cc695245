"""fleet_hourly against figures worked out by hand."""

import datetime as dt

import polars as pl
import pytest

from gpuledger.analytics.fleet import fleet_hourly

from builders import at

H = at(2, 10)


def test_supply_allocation_and_waiting_demand_per_model_and_hour():
    hourly = pl.LazyFrame(
        {
            "hour": [H, H, H],
            "cluster": ["c"] * 3,
            "gpu_uuid": ["G1", "G2", "MIG-1"],
            "parent_gpu_uuid": [None, None, "G2"],  # a MIG instance is part of G2's supply, not more of it
            "model": ["A"] * 3,
            "allocated_ratio": [1.0, 0.5, 1.0],
            "busy_ratio": [0.5, None, 1.0],
            "energy_wh": [100.0, 200.0, 50.0],
        }
    )
    ticks = [H + dt.timedelta(minutes=m) for m in (0, 5, 10)] + [H + dt.timedelta(minutes=65)]
    queue = pl.LazyFrame(
        {
            "ts": ticks + [H],
            "cluster": ["c"] * 5,
            "gpu_model": ["A", "A", "A", "A", "B"],
            "pending_jobs": [2, 2, 1, 1, 3],
            "pending_gpus": [4.0, 4.0, 2.0, 8.0, 6.0],
        }
    )
    out = fleet_hourly(hourly, queue).collect()
    a10, a11, b10 = (
        out.filter((pl.col("gpu_model") == m) & (pl.col("hour") == h)).row(0, named=True)
        for m, h in (("A", H), ("A", H + dt.timedelta(hours=1)), ("B", H))
    )
    assert (a10["gpus"], a10["allocated_gpus"], a10["busy_gpus"]) == (2, 1.5, 0.5)
    assert a10["energy_kwh"] == pytest.approx(0.3)
    # Three ticks of twelve had jobs waiting: (4 + 4 + 2) / 12 GPUs on average, 4 at most.
    assert a10["pending_gpus"] == pytest.approx(10 / 12) and a10["pending_gpus_max"] == 4.0
    assert a10["pending_jobs_max"] == 2
    assert a10["demand_gpus"] == pytest.approx(1.5 + 10 / 12)
    # The next hour: waiting jobs but no GPU reported; a model nobody has: demand with no supply.
    assert (a11["gpus"], a11["allocated_gpus"], a11["pending_gpus"]) == (0, 0.0, pytest.approx(8 / 12))
    assert (b10["gpus"], b10["demand_gpus"]) == (0, pytest.approx(6 / 12))
    assert out.height == 3


def test_on_an_analysed_lake_supply_matches_gpu_hourly(analysed_lake):
    from gpuledger.query import Lake

    with Lake(analysed_lake) as q:
        (diff,) = q.execute(
            "SELECT count(*) FROM (SELECT model AS gpu_model, hour, count(*) AS n FROM gpu_hourly "
            "WHERE parent_gpu_uuid IS NULL GROUP BY ALL) g FULL JOIN fleet_hourly f USING (gpu_model, hour) "
            "WHERE coalesce(g.n, 0) <> coalesce(f.gpus, 0)"
        ).rows[0]
        (gpus,) = q.execute("SELECT max(gpus) FROM fleet_hourly").rows[0]
    assert diff == 0 and gpus > 0
