"""The simulator's `nodes` rows: one per node and UTC day, from its first to its last sample of that day."""

import datetime as dt

import duckdb

from gpuledger.collector.sim.backfill import backfill
from gpuledger.config import defaults

END = 1793579400  # 2026-11-02 00:30 UTC: off the 3600 s grid, so the last window (00:00-00:30) is shorter than a step
UTC = dt.timezone.utc


def test_a_run_ending_off_the_step_grid_sees_each_node_within_each_day(tmp_path):
    """`gpuledger simulate --days 1 --step-s 3600 --end 2026-11-02T00:30:00Z`: samples at 01:00 ... 23:00 on the 1st
    (the start, 00:30, rounded up to the grid) and at 00:00 on the 2nd. The last row said 00:00 to 23:30 (t1 - step),
    last before first, and landed in the 1st's partition."""
    lake = tmp_path / "lake"
    backfill(defaults(), lake, END - 86400, END, 3600, nodes=2, gpus_per_node=1, models=("H100",), seed=42, workers=1)
    rows = duckdb.connect().execute(
        f"SELECT node, date, first_seen, last_seen FROM read_parquet('{lake}/nodes/**/*.parquet', "
        "hive_partitioning = true) ORDER BY node, date"
    )
    day1, day2 = dt.date(2026, 11, 1), dt.date(2026, 11, 2)
    want = [
        (day1, dt.datetime(2026, 11, 1, 1, tzinfo=UTC), dt.datetime(2026, 11, 1, 23, tzinfo=UTC)),
        (day2, dt.datetime(2026, 11, 2, 0, tzinfo=UTC), dt.datetime(2026, 11, 2, 0, tzinfo=UTC)),
    ]
    got = rows.fetchall()
    assert [r[0] for r in got] == ["gpu-h100-000"] * 2 + ["gpu-h100-001"] * 2
    assert [r[1:] for r in got] == want * 2
