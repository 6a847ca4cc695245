"""Partitioned devices in the hourly inventory and the measured fragmentation's inputs (analytics/gpu_hourly.py,
analytics/frag_series.py), by hand on tests/partition_fleet.py's fleet: an H100 in all-1g MIG with 3 instances
held, an MI300X in CPX (8 partitions, no row of its own), a 310P chip with three vNPUs, a whole H100."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from gpuledger.analytics.frag_series import fragmentation_series, job_pods, telemetry_state
from gpuledger.analytics.gpu_hourly import gpu_5min, gpu_hourly
from gpuledger.analytics.runner import run
from gpuledger.config import defaults
from gpuledger.lake import scan
from gpuledger.schema import UTC_US

from builders import allocation
from partition_fleet import ASCEND, H10, H11, H100, JOBS, MI300X, NOW, build_lake, samples

TWO_HOURS = (H10, H10 + dt.timedelta(hours=2))


def _samples() -> pl.LazyFrame:
    return pl.LazyFrame(samples()).with_columns(
        pl.col("ts").cast(UTC_US),
        pl.lit(None, pl.Float32).alias("sm_active_ratio"),
        pl.lit(None, pl.Int64).alias("mem_used_bytes"),
    )


def _hourly() -> pl.LazyFrame:
    return gpu_hourly(gpu_5min(_samples()))


def _allocs() -> pl.DataFrame:
    # the jobs' intervals as analytics/allocation.py makes them (one GPU each; share = gpus below one GPU)
    rows = [
        allocation(j, "t", gpu, gpus, start, end or NOW, node=node, gpu_model=model)
        for j, model, gpus, _, _, gpu, node, start, end in JOBS
    ]
    return pl.DataFrame(rows, schema_overrides={"start": UTC_US, "end": UTC_US})


def test_gpu_hourly_keeps_each_partitions_profile():
    hourly = _hourly().collect()
    profiles = dict(hourly.filter(pl.col("hour") == H10).select("gpu_uuid", "mig_profile").iter_rows())
    # the 7 MIG instances, 8 CPX partitions and 3 vNPUs keep their profile; the whole devices have none
    assert profiles == {
        "GPU-h100": None,
        "GPU-w": None,
        "NPU-0": None,
        **{f"GPU-h100/gi{k}": "1g.10gb" for k in range(1, 8)},
        **{f"MI-1/p{k}": "cpx.nps4" for k in range(8)},
        "NPU-0/vnpu1": "vnpu-4c",
        "NPU-0/vnpu2": "vnpu-2c",
        "NPU-0/vnpu3": "vnpu-1c",
    }
    assert hourly.height == 2 * 21  # 21 rows (3 whole devices and 18 partitions) at 10:00 and 11:00


def test_a_5min_frame_from_before_the_column_reads_it_as_null():
    five = gpu_5min(_samples()).collect().drop("mig_profile")
    assert gpu_hourly(five.lazy()).collect()["mig_profile"].null_count() == 42


def _state(parents=None) -> dict:
    state = telemetry_state(_hourly(), _allocs(), *TWO_HOURS, parents)
    return {(r["hour"], r["model"]): (r["gpu_free_milli"], r["gpu_partitions"]) for r in state.iter_rows(named=True)}


def test_free_instances_per_gpu_and_hour_by_hand():
    # n1 (GPU-h100 then GPU-w): at 10:00 M1 and M2 hold gi1, gi2 -> 5 instances free, 1000 - round(2/7 x 1000)
    # = 714 milli; W1 holds GPU-w whole (0, a whole GPU: null). At 11:00 M3 holds gi3 too (from 10:30) and M1 still
    # holds gi1 (to 11:30): 4 free, 1000 - round(3/7 x 1000) = 571; W1 ended at 10:30: GPU-w whole and free.
    # n2: C1 holds p0 of MI-1, which has no row of its own: 7 CPX instances free, 1000 - 125 = 875.
    # n3: V1 holds the vnpu-2c at 10:00 (it starts at 10:00: held at the hour's start) -> the 4c and 1c free,
    # 1000 - 250 = 750; at 11:00 (V1 ended 10:45) all three, 1000 milli.
    four, five = ",".join(["1g.10gb"] * 4), ",".join(["1g.10gb"] * 5)
    assert _state() == {
        (H10, H100): ([714, 0], [five, None]),
        (H11, H100): ([571, 1000], [four, None]),
        (H10, MI300X): ([875], [",".join(["cpx"] * 7)]),
        (H11, MI300X): ([875], [",".join(["cpx"] * 7)]),
        (H10, ASCEND): ([750], ["vnpu-1c,vnpu-4c"]),
        (H11, ASCEND): ([1000], ["vnpu-1c,vnpu-2c,vnpu-4c"]),
    }


def test_the_callers_parents_give_the_same_state():
    # the runner passes the partitions' parents it keeps (done.gpus); the window's partition rows are the same
    kept = _hourly().filter(pl.col("parent_gpu_uuid").is_not_null()).select("gpu_uuid", "parent_gpu_uuid").unique()
    assert _state(kept.collect()) == _state()


def test_a_filled_gpu_and_partitions_of_unknown_profile():
    hourly = _hourly().with_columns(
        # rows from before gpu_hourly had mig_profile: the vNPUs' profile is not known -> the chip reads as whole
        pl.when(pl.col("gpu_uuid").str.starts_with("NPU-0/")).then(None).otherwise("mig_profile").alias("mig_profile")
    )
    # an allocation naming the MI300X itself, holding the rest of it: no instance of a full GPU is free
    mi = allocation("X", "t", "MI-1", 7 / 8, H10, H11, node="n2", gpu_model=MI300X)
    allocs = pl.concat([_allocs(), pl.DataFrame([mi], schema_overrides={"start": UTC_US, "end": UTC_US})])
    state = telemetry_state(hourly, allocs, H10, H11).filter(pl.col("model") != H100)
    assert state.select("model", "gpu_free_milli", "gpu_partitions").sort("model").rows() == [
        (ASCEND, [750], [None]),
        (MI300X, [0], [""]),
    ]


def test_series_counts_a_gpu_known_by_its_partitions_and_no_partitioned_gpu_as_whole():
    jobs = pl.DataFrame(
        {"gpu_model": [H100, MI300X, ASCEND], "gpus": [1 / 7, 1 / 8, 2 / 8]},
    ).with_columns(pl.Series("mig_profile", ["1g.10gb", "cpx.nps4", "Ascend310P-2c"]))
    out = fragmentation_series(_hourly(), _allocs(), jobs, *TWO_HOURS, cluster="c")
    got = {(r["ts"], r["gpu_model"]): r for r in out.iter_rows(named=True)}
    # the MI300X is one GPU (its partitions' parent); free GPUs are the milli above over 1000
    assert [(got[(h, m)]["gpus"], got[(h, m)]["free_gpus"]) for h in (H10, H11) for m in (H100, MI300X, ASCEND)] == [
        (2, 0.714),
        (1, 0.875),
        (1, 0.75),
        (2, 1.571),
        (1, 0.875),
        (1, 1.0),
    ]
    # whole free GPUs: only GPU-w at 11:00 (a partitioned GPU is none, even the all-free 310P at 11:00): one GPU
    # stranded for 2-, 4- and 8-GPU jobs; none at 10:00 and none on the partitioned-only models
    stranded = {k: [r[f"stranded_{n}gpu"] for n in (1, 2, 4, 8)] for k, r in got.items()}
    assert stranded[(H11, H100)] == [0, 1, 1, 1]
    assert stranded[(H11, ASCEND)] == stranded[(H10, H100)] == stranded[(H10, MI300X)] == [0, 0, 0, 0]


def test_job_pods_of_partition_asks_by_hand():
    jobs = pl.DataFrame(
        {
            "gpu_model": [
                H100,
                H100,
                H100,
                H100,
                H100,
                MI300X,
                ASCEND,
                "910B3-Ascend-V1",
                "910B3-Ascend-V1",
                None,
                H100,
            ],
            "gpus": [1 / 7, 2 / 7, 3 / 7, 1.0, 0.5, 0.25, 0.25, 4 / 32, 0.5, 4 / 32, 0.3],
            "mig_profile": [
                "1g.10gb",
                "1g.10gb",
                "3g.40gb",
                None,
                None,
                "cpx.nps4",
                "Ascend310P-2c",
                "Ascend910-4c",
                "Ascend910-5c",
                "Ascend910-4c",
                "x",
            ],
            "pods": [3, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1],
        }
    )
    got = job_pods(jobs).select("pods", "num_gpu", "gpu_milli", "profile").rows()
    assert got == [
        (3, 1, 143, "1g.10gb"),  # 1/7 of a GPU is one 1g instance, 1000 / 7 = 142.9 -> 143
        (1, 2, 143, "1g.10gb"),  # 2/7: two instances of 1/7
        (1, 1, 429, "3g.40gb"),  # 3/7 = 428.6
        (2, 1, 1000, ""),  # a whole GPU, as before
        (1, 1, 500, ""),  # a share of one GPU, as before
        (1, 2, 125, "cpx"),  # amd.com/cpx_nps4 is 1/8: 0.25 is two CPX partitions
        (1, 1, 250, "vnpu-2c"),  # huawei.com/Ascend310P-2c: 2 of the 310P's 8 AI cores
        # huawei.com/Ascend910-4c on a 910B3: 4 of its 20 AI cores (200 milli); priced by the plugin's rule (4/32 =
        # 0.125, the model unknown to the k8s source) it still reads as one instance: 0.125 / 0.2 = 0.625 -> 1
        (1, 1, 200, "vnpu-4c"),
        (1, 2, 250, "vnpu-5c"),  # two 5c of a 910B3 as the simulator prices them: 0.5 / (5/20) = 2
        (1, 1, 125, "vnpu-4c"),  # no model: 4 of 32, the plugin's rule
        (1, 1, 300, ""),  # a profile no rule knows: a share, as before
    ]


@pytest.fixture
def fleet_lake(tmp_path, store):
    return build_lake(tmp_path / "src", store)


def test_a_run_writes_profiles_and_partitioned_fragmentation_on_both_stores(fleet_lake):
    run(fleet_lake, until_s=NOW.timestamp(), cfg=defaults())
    hourly = scan(fleet_lake, "gpu_hourly").collect()
    assert hourly.group_by("mig_profile").len().sort("mig_profile", nulls_last=True).rows() == [
        ("1g.10gb", 14),  # 7 instances x 2 hours
        ("cpx.nps4", 16),
        ("vnpu-1c", 2),
        ("vnpu-2c", 2),
        ("vnpu-4c", 2),
        (None, 6),  # GPU-h100, GPU-w, NPU-0
    ]
    frag = scan(fleet_lake, "fragmentation").collect()
    got = {
        (r["ts"], r["gpu_model"]): (r["gpus"], r["free_gpus"], r["stranded_2gpu"]) for r in frag.iter_rows(named=True)
    }
    # as test_series_counts_a_gpu_known_by_its_partitions...: the runner's allocations are the jobs' (one GPU each)
    assert got == {
        (H10, H100): (2, 0.714, 0),
        (H11, H100): (2, 1.571, 1),
        (H10, MI300X): (1, 0.875, 0),
        (H11, MI300X): (1, 0.875, 0),
        (H10, ASCEND): (1, 0.75, 0),
        (H11, ASCEND): (1, 1.0, 0),
    }
