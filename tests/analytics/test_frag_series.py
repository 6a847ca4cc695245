"""Fragmentation over time from lake-shaped inputs, by hand (FRAGMENTATION.md's definitions)."""

import datetime as dt

import polars as pl
import pytest

from analytics.frag_series import fragmentation_series

UTC = dt.timezone.utc
H10 = dt.datetime(2026, 11, 2, 10, tzinfo=UTC)

# n1 has four H100s; at 10:00 G1 is held whole and G2 half (by a MIG-less fractional job). A MIG slice on G4
# would count on G4, but none is open at 10:00.
HOURLY = pl.LazyFrame(
    {
        "hour": [H10] * 4,
        "node": ["n1"] * 4,
        "gpu_uuid": ["G1", "G2", "G3", "G4"],
        "model": ["H100"] * 4,
        "parent_gpu_uuid": pl.Series([None] * 4, dtype=pl.String),
    },
    schema_overrides={"hour": pl.Datetime("us", "UTC")},
)
ALLOCS = pl.DataFrame(
    {
        "gpu_uuid": ["G1", "G2", "G4"],
        "share": [1.0, 0.5, 1.0],
        "start": [H10 - dt.timedelta(hours=1), H10, H10 + dt.timedelta(minutes=30)],
        "end": [H10 + dt.timedelta(hours=2), H10 + dt.timedelta(hours=1), H10 + dt.timedelta(hours=1)],
    },
    schema_overrides={"start": pl.Datetime("us", "UTC"), "end": pl.Datetime("us", "UTC")},
)
# The model's workload: three whole-GPU jobs and one half-GPU job -> task types p = 0.75 (1000 milli x 1) and
# 0.25 (500 milli x 1).
JOBS = pl.DataFrame({"gpu_model": ["H100"] * 4, "gpus": [1.0, 1.0, 1.0, 0.5]})


def test_fgd_rate_and_whole_gpu_view_by_hand():
    (row,) = fragmentation_series(HOURLY, ALLOCS, JOBS, H10, H10 + dt.timedelta(hours=1)).iter_rows(named=True)
    # free milli: G1 0, G2 500, G3 1000, G4 1000 (its job starts at 10:30) -> 2.5 GPUs free
    assert (row["gpus"], row["free_gpus"]) == (4, 2.5)
    # whole-GPU task: fits (G3, G4); leftovers smaller than 1000: G2's 500 (and G1's 0) -> 500 milli
    # half-GPU task: fits; leftovers smaller than 500: G1's 0 -> 0 milli
    # F = 0.75 x 500 + 0.25 x 0 = 375 milli = 0.375 GPUs; rate = 375 / 2500
    assert row["fragmented_gpus"] == pytest.approx(0.375)
    assert row["frag_rate"] == pytest.approx(0.15)
    # two whole free GPUs on one node: usable by 1- and 2-GPU jobs, stranded for 4- and 8-GPU jobs
    assert [row[f"stranded_{n}gpu"] for n in (1, 2, 4, 8)] == [0, 0, 2, 2]


def test_mig_slices_count_on_their_parent_gpu():
    hourly = pl.concat(
        [
            HOURLY,
            pl.LazyFrame(
                {"hour": [H10], "node": ["n1"], "gpu_uuid": ["MIG-a"], "model": ["H100"], "parent_gpu_uuid": ["G3"]},
                schema_overrides={"hour": pl.Datetime("us", "UTC")},
            ),
        ]
    )
    allocs = pl.concat(
        [
            ALLOCS,
            pl.DataFrame(
                {"gpu_uuid": ["MIG-a"], "share": [3 / 7], "start": [H10], "end": [H10 + dt.timedelta(hours=1)]},
                schema_overrides={"start": pl.Datetime("us", "UTC"), "end": pl.Datetime("us", "UTC")},
            ),
        ]
    )
    (row,) = fragmentation_series(hourly, allocs, JOBS, H10, H10 + dt.timedelta(hours=1)).iter_rows(named=True)
    assert row["gpus"] == 4  # the MIG instance is not a fifth GPU
    assert row["free_gpus"] == pytest.approx(2.5 - 0.429)  # G3 keeps 1000 - round(3/7 x 1000) = 571 milli
