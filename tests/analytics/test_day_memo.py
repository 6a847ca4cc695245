"""A per-day answer kept from run to run (analytics/day_memo.py) equals the answer over the whole table, and only
days whose files changed are read again."""

from __future__ import annotations

import polars as pl
from polars.testing import assert_frame_equal

from gpuledger.analytics.day_memo import by_day
from gpuledger.analytics.forecast import day_means
from gpuledger.lake import scan

from builders import H100, at, epoch_us, write_rows


def hours(day: int, demand: float) -> list[dict]:
    rows = []
    for h in range(24):
        row = dict(hour=epoch_us(at(day, h)), cluster="c", gpu_model=H100, gpus=8, demand_gpus=demand + h)
        rows.append(row | dict(allocated_gpus=1.0, busy_gpus=1.0, pending_gpus=0.0, energy_kwh=1.0))
        rows[-1] |= dict(pending_gpus_max=0.0, pending_jobs_max=0)
    return rows


def test_days_are_read_again_only_when_their_files_change(tmp_path):
    lake = tmp_path / "lake"
    for day in (1, 2, 3):
        write_rows(lake, "fleet_hourly", hours(day, 10.0 * day), f"d{day}")
    read = []

    def means(rows: pl.LazyFrame) -> pl.DataFrame:
        out = day_means(rows).collect()
        read.extend(out["day"].to_list())
        return out

    def whole() -> pl.DataFrame:
        return day_means(scan(lake, "fleet_hourly")).collect().sort("day")

    first = by_day(lake, "fleet_hourly", "means", means)
    # Day 1: (10 + 0 + ... + 10 + 23) / 24 = 10 + 11.5
    assert first.sort("day")["demand_gpus"].to_list() == [21.5, 31.5, 41.5]
    assert_frame_equal(first.sort("day"), whole())
    assert len(read) == 3
    read.clear()
    assert_frame_equal(by_day(lake, "fleet_hourly", "means", means).sort("day"), whole())
    assert read == []  # nothing changed: nothing read
    # Day 2 rewritten (a file is created once: the old one goes first): 100 + 11.5
    (lake / "fleet_hourly" / "date=2026-11-02" / "part-d2.parquet").unlink()
    write_rows(lake, "fleet_hourly", hours(2, 100.0), "d2")
    again = by_day(lake, "fleet_hourly", "means", means).sort("day")
    assert len(read) == 1 and again["demand_gpus"].to_list() == [21.5, 111.5, 41.5]
    assert_frame_equal(again, whole())
