"""Partitioned devices in the placement what-if's inputs (analytics/placement_whatif.py), by hand on
tests/partition_fleet.py's fleet: the inventory's gpu_layout from gpu_hourly's partition rows, the pods' profile from
jobs.mig_profile, the replayed state's free instances; read from a lake on both stores."""

from __future__ import annotations

import polars as pl
import pytest

from gpuledger.analytics import placement_whatif as pw
from gpuledger.analytics.runner import run
from gpuledger.config import Rate, defaults
from gpuledger.schema import UTC_US

from builders import at
from partition_fleet import ALL_1G, ASCEND, H10, H11, H100, L4, MI300X, NOW, build_lake

CPX8 = ",".join(["cpx"] * 8)
VNPUS = "vnpu-1c,vnpu-2c,vnpu-4c"
START, END = at(2), at(3)


def _hourly(rows) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={
            "hour": UTC_US,
            "node": pl.String,
            "gpu_uuid": pl.String,
            "parent_gpu_uuid": pl.String,
            "mig_profile": pl.String,
        },
        orient="row",
    )


def test_each_gpus_last_layout_in_the_period():
    hourly = _hourly(
        [
            # G1 was one 7g.80gb at 10:00, then all-balanced at 11:00: its last layout is the later one
            (H10, "n1", "G1", None, None),
            (H10, "n1", "G1/gi0", "G1", "7g.80gb"),
            (H11, "n1", "G1", None, None),
            *[
                (H11, "n1", f"G1/gi{k}", "G1", p)
                for k, p in enumerate(("3g.40gb", "2g.20gb", "1g.10gb+me", "1g.10gb"), 1)
            ],
            # G2 whole; G0 partitioned at 10:00 only, then whole: it keeps the layout it had
            (H11, "n1", "G2", None, None),
            (H10, "n1", "G0/gi1", "G0", "4g.40gb"),
            (H11, "n1", "G0", None, None),
            # a CPX GPU known by its partitions only, on n2; a partition of unknown profile offers nothing
            *[(H10, "n2", f"M/p{k}", "M", "cpx.nps4") for k in range(8)],
            (H10, "n3", "N/v1", "N", None),
        ]
    )
    assert pw.gpu_layouts(hourly).rows() == [
        ("n1", "G0", "4g.40gb"),
        ("n1", "G1", "1g.10gb,1g.10gb,2g.20gb,3g.40gb"),  # 1g.10gb+me is the 1g.10gb slot; sorted types
        ("n1", "G2", None),
        ("n2", "M", CPX8),
        ("n3", "N", None),
    ]


@pytest.fixture
def fleet_lake(tmp_path, store):
    lake = build_lake(tmp_path / "src", store)
    run(lake, until_s=NOW.timestamp(), cfg=defaults())
    return lake


def test_inputs_and_inventory_from_the_lake_on_both_stores(fleet_lake):
    inputs = pw.read_inputs(fleet_lake, "c", START, END)
    assert inputs.layouts.rows() == [
        ("n1", "GPU-h100", ALL_1G),
        ("n1", "GPU-w", None),
        ("n2", "MI-1", CPX8),
        ("n3", "NPU-0", VNPUS),
    ]
    inv = pw._inventory(inputs.nodes, inputs.layouts).sort("node")
    # n1's 2 GPUs in gpu_uuid order; n4's 4 L4s report no telemetry: whole
    assert inv.select("node", "model", "gpus", "gpu_layout").rows() == [
        ("n1", H100, 2, [ALL_1G, None]),
        ("n2", MI300X, 1, [CPX8]),
        ("n3", ASCEND, 1, [VNPUS]),
        ("n4", L4, 4, [None] * 4),
    ]
    # the workload is counted per profile: three 1g.10gb jobs are one request, W1's whole H100 another
    assert inputs.workload.sort("gpu_model", "gpus").rows() == [
        (ASCEND, 0.25, "Ascend310P-2c", 1),
        (MI300X, 0.125, "cpx.nps4", 1),
        (H100, 1 / 7, "1g.10gb", 3),
        (H100, 1.0, None, 1),
    ]
    # arrival order (submitted, then job id): C1 and W1 at 09:00, M1 and M2 at 09:30, V1 at 10:00, M3 at 10:30
    pods = pw._pods(inputs.jobs, spec=False)
    assert pods.select("gpu_model", "num_gpu", "gpu_milli", "profile").rows() == [
        (MI300X, 1, 125, "cpx"),
        (H100, 1, 1000, ""),
        (H100, 1, 143, "1g.10gb"),
        (H100, 1, 143, "1g.10gb"),
        (ASCEND, 1, 250, "vnpu-2c"),
        (H100, 1, 143, "1g.10gb"),
    ]
    # the what-if runs on it: the measured rows are the fragmentation the run wrote (frag_series_partitions'
    # figures): H100 2 GPUs, free 0.714 and 1.571 -> mean 1.1425; MI300X 0.875; the 310P 0.75 and 1.0
    got = pw.placement_whatif(fleet_lake, (Rate(H100, 2.0, at(1)),), "c", START, END)
    measured = got.summary.filter((pl.col("policy") == "measured") & pl.col("gpu_model").is_not_null())
    assert measured.select("gpu_model", "gpus", "free_gpus").sort("gpu_model").rows() == [
        (ASCEND, 1, pytest.approx(0.875)),
        (MI300X, 1, pytest.approx(0.875)),
        (H100, 2, pytest.approx(1.1425)),
    ]
    assert set(got.summary["policy"]) == {"measured", "fgd", "bestfit"}


def test_state_after_replayed_pods_lists_each_gpus_free_instances():
    cluster = pl.DataFrame(
        {
            "node": ["n1", "n2"],
            "model": [H100, MI300X],
            "cpu_milli": [64_000, 64_000],
            "gpus": [2, 1],
            "gpu_layout": [[ALL_1G, None], [CPX8]],
        }
    )
    pods = pl.DataFrame(
        {"cpu_milli": [0, 0, 0], "gpu_milli": [143, 1000, 125], "num_gpu": [2, 1, 3], "profile": ["1g.10gb", "", "cpx"]}
    )
    # two 1g instances on n1's GPU 0 (listed once per instance), a whole GPU 1, three CPX partitions of n2's GPU
    log = pl.DataFrame({"node": ["n1", "n1", "n2"], "gpu_index": [[0, 0], [1], [0, 0, 0]]})
    after3 = pw._state_after(cluster, pods, log, 3)
    # n1: GPU 0 holds 2 x 143 = 286 milli -> 714 free, 5 of its 7 instances; GPU 1 whole and held: 0, null.
    # n2: 3 x 125 = 375 held -> 625 free, 5 CPX partitions
    assert after3.select("node", "gpu_free_milli", "gpu_partitions").rows() == [
        ("n1", [714, 0], [",".join(["1g.10gb"] * 5), None]),
        ("n2", [625], [",".join(["cpx"] * 5)]),
    ]
    after1 = pw._state_after(cluster, pods, log, 1)
    assert after1.select("node", "gpu_free_milli", "gpu_partitions").rows() == [
        ("n1", [714, 1000], [",".join(["1g.10gb"] * 5), None]),
        ("n2", [1000], [CPX8]),
    ]


def test_a_layout_the_device_cannot_hold_is_replayed_whole_with_a_warning(caplog):
    nodes = pl.DataFrame(
        {"node": ["n3", "n2"], "gpu_model": [ASCEND, MI300X], "gpu_count": [1, 1]},
    ).with_columns(pl.lit([], pl.List(pl.Struct({"key": pl.String, "value": pl.String}))).alias("labels"))
    # two vnpu-4c take 8 AI CPUs, a 310P has 7 (partitions.check_layout); the MI300X's 8 CPX partitions are fine
    layouts = pl.DataFrame({"node": ["n3", "n2"], "gpu_uuid": ["NPU-0", "MI-1"], "layout": ["vnpu-4c,vnpu-4c", CPX8]})
    inv = pw._inventory(nodes, layouts)
    assert inv.select("node", "gpu_layout").rows() == [("n3", [None]), ("n2", [CPX8])]
    assert "GPU NPU-0 of node n3 replayed whole: its layout vnpu-4c,vnpu-4c: vNPU layout" in caplog.text
