"""Fragmentation over time from lake-shaped inputs, by hand (FRAGMENTATION.md's definitions)."""

import datetime as dt

import polars as pl
import pytest

from gpuledger.analytics.frag_series import fragmentation_series

from builders import at

H10 = at(2, 10)

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


# A cluster without telemetry (an imported trace): the inventory is the node list. n1 and n2 are alike (2 x T4,
# 8,000 m CPU), n3 has 4 x G2 and 64,000 m; all exist from 10:00 to 12:00. Half of n1's first GPU is held from
# 10:00 to 11:30, so at 10:00 and 11:00 n1 is touched and n2 stands alone for its kind; at 12:00 both are free.
NODES = pl.DataFrame(
    {
        "node": ["n1", "n2", "n3"],
        "gpu_model": ["T4", "T4", "G2"],
        "gpu_count": [2, 2, 4],
        "labels": [
            [{"key": "cpu_milli", "value": v}, {"key": "memory_mib", "value": "1"}] for v in ("8000", "8000", "64000")
        ],
        "first_seen": [H10] * 3,
        "last_seen": [H10 + dt.timedelta(hours=2)] * 3,
    },
    schema_overrides={
        "gpu_count": pl.Int32,
        "first_seen": pl.Datetime("us", "UTC"),
        "last_seen": pl.Datetime("us", "UTC"),
    },
)
NODE_ALLOCS = pl.DataFrame(
    {"node": ["n1"], "gpu_uuid": ["n1/gpu0"], "share": [0.5], "start": [H10], "end": [H10 + dt.timedelta(minutes=90)]},
    schema_overrides={"start": pl.Datetime("us", "UTC"), "end": pl.Datetime("us", "UTC")},
)
# The workload M from a pod list: two half-GPU pods (1,000 m CPU), one whole-GPU pod asking 16,000 m CPU and one
# CPU-only pod. All four types are kept (3 of 4 pods < 95 %), p = 2/4, 1/4, 1/4.
SHAPES = pl.DataFrame(
    {"cpu_milli": [1000, 16000, 4000], "gpu_milli": [500, 1000, 0], "num_gpu": [1, 1, 0], "gpu_spec": ["", "", ""]}
    | {"pods": [2, 1, 1]}
)


def test_inventory_from_nodes_when_there_is_no_telemetry_by_hand():
    got = fragmentation_series(None, NODE_ALLOCS, JOBS, H10, H10 + dt.timedelta(hours=3), nodes=NODES, shapes=SHAPES)
    rows = {(r["ts"].hour, r["gpu_model"]): r for r in got.iter_rows(named=True)}
    assert sorted(rows) == [(10, "G2"), (10, "T4"), (11, "G2"), (11, "T4"), (12, "G2"), (12, "T4")]
    # F_n(M) = (2 F(half) + F(whole, 16,000 m) + F(cpu-only)) / 4, in milli:
    # n1 [500, 1000], 8,000 m: half fits, no leftover < 500 -> 0; whole cannot (CPU) -> 1500; cpu-only -> 1500: 750
    # n2 [1000, 1000], 8,000 m: 0, 2000, 2000 -> 1000.   n3 [1000 x 4], 64,000 m: 0, 0 (fits, no leftover), 4000 -> 1000
    t4 = rows[(10, "T4")]
    assert (t4["gpus"], t4["free_gpus"], t4["fragmented_gpus"]) == (4, 3.5, pytest.approx(1.75))
    assert t4["frag_rate"] == pytest.approx(0.5)
    # whole free GPUs: n1 one, n2 two -> stranded for 2-GPU jobs: n1's 1; for 4- and 8-GPU jobs: all 3
    assert [t4[f"stranded_{n}gpu"] for n in (1, 2, 4, 8)] == [0, 1, 3, 3]
    g2 = rows[(10, "G2")]
    assert (g2["gpus"], g2["free_gpus"], g2["fragmented_gpus"], g2["frag_rate"]) == (4, 4.0, 1.0, 0.25)
    assert [g2[f"stranded_{n}gpu"] for n in (1, 2, 4, 8)] == [0, 0, 0, 4]
    assert rows[(11, "T4")] == t4 | {"ts": H10 + dt.timedelta(hours=1)}  # still held at 11:00 (until 11:30)
    # 12:00: n1 is free again, like n2: 1000 + 1000 milli fragmented of 4 free GPUs
    t4_12 = rows[(12, "T4")]
    assert (t4_12["free_gpus"], t4_12["fragmented_gpus"], t4_12["stranded_2gpu"]) == (4.0, pytest.approx(2.0), 0)


def test_nodes_inventory_gives_what_telemetry_of_the_same_gpus_gives():
    # Without pod shapes M comes from the jobs (no CPU), so the two inventories must agree row for row.
    hours = [H10 + dt.timedelta(hours=k) for k in range(3)]
    hourly = pl.LazyFrame(
        [
            (h, n, f"{n}/gpu{i}", m, None)
            for h in hours
            for n, m, g in (("n1", "T4", 2), ("n2", "T4", 2), ("n3", "G2", 4))
            for i in range(g)
        ],
        schema={
            "hour": pl.Datetime("us", "UTC"),
            "node": pl.String,
            "gpu_uuid": pl.String,
            "model": pl.String,
            "parent_gpu_uuid": pl.String,
        },
        orient="row",
    )
    jobs = pl.DataFrame({"gpu_model": ["T4", "T4", "G2"], "gpus": [0.5, 2.0, 1.0]})
    end = H10 + dt.timedelta(hours=3)
    from_nodes = fragmentation_series(None, NODE_ALLOCS, jobs, H10, end, nodes=NODES)
    from_telemetry = fragmentation_series(hourly, NODE_ALLOCS, jobs, H10, end)
    assert from_nodes.height == 6
    assert from_nodes.equals(from_telemetry)
