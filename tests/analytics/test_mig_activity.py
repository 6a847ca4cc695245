"""MIG instances end to end: dcgm-exporter pages -> gpu_samples -> analytics -> job_hourly, waste and idle_holds.

DCGM reports no GPU_UTIL for a MIG instance; its activity is DCGM_FI_PROF_GR_ENGINE_ACTIVE (a ratio). Before
util_gpu_pct was set from it, every MIG instance had a null utilization: never busy, never idle, invisible to
efficiency, waste and the idle-hog gate. The page below is the real A100 MIG capture's label set
(tests/fixtures/dcgm/a100-mig-1g.5gb-docs-2.x.prom, plus modelName) with two instances and a pod on each: one
busy, one idle.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.runner import run
from gpuledger.collector.dcgm.exposition import parse_fast
from gpuledger.collector.dcgm.rows import RowBuilder
from gpuledger.lake import scan

from builders import at, epoch_us, job_state, write_rows

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"
PARENT = "GPU-34319582-d595-d1c7-d1d2-179bcfa61660"
# modelName as exporters since 2.x send it (the capture predates it).
BASE = f'gpu="0",UUID="{PARENT}",device="nvidia0",modelName="NVIDIA A100-SXM4-40GB",Hostname="ub20-a100-k8s"'
BUSY = f'{BASE},GPU_I_PROFILE="3g.20gb",GPU_I_ID="1",pod="busy-0",namespace="ml",container="main"'
IDLE = f'{BASE},GPU_I_PROFILE="1g.5gb",GPU_I_ID="13",pod="idle-0",namespace="ml",container="main"'
PAGE = f"""DCGM_FI_DEV_POWER_USAGE{{{BASE}}} 209.5
DCGM_FI_DEV_FB_USED{{{BASE}}} 4845
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{BUSY}}} 0.8
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{BUSY}}} 0.5
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{IDLE}}} 0.0
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{IDLE}}} 0.0
"""


def _job(pod, profile, share):
    return job_state(
        f"uid-{pod}",
        "running",
        at(2, 8),
        tenant="vision",
        namespace="ml",
        pod=pod,
        gpu_model="NVIDIA A100-SXM4-40GB",
        gpus=share,
        gpu_sharing="mig",
        mig_profile=profile,
        node="ub20-a100-k8s",
        submitted_at=at(2, 8),
        scheduled_at=at(2, 8),
    )


@pytest.fixture
def lake(tmp_path):
    lake = tmp_path / "lake"
    builder = RowBuilder("c")
    samples = parse_fast(PAGE)
    rows = []
    for i in range(4 * 12):  # every 5 minutes, 08:00 to 11:55: four whole hours
        rows += builder.rows(samples, epoch_us(at(2, 8) + dt.timedelta(minutes=5 * i))).samples
    write_rows(lake, "gpu_samples", rows, "dcgm")
    write_rows(lake, "jobs", [_job("busy-0", "3g.20gb", 3 / 7), _job("idle-0", "1g.5gb", 1 / 7)], "k")
    run(lake, until_s=at(2, 12, 10).timestamp())
    return lake


def test_mig_instances_have_a_utilization(lake):
    hourly = scan(lake, "gpu_hourly").collect()
    util = {(r["gpu_uuid"], r["hour"]): r["util_gpu_pct_mean"] for r in hourly.iter_rows(named=True)}
    for h in (8, 9, 10, 11):
        assert util[(f"{PARENT}/gi1", at(2, h))] == pytest.approx(80.0)
        assert util[(f"{PARENT}/gi13", at(2, h))] == 0.0


def test_a_busy_instance_counts_as_busy_and_an_idle_one_as_idle(lake):
    jh = scan(lake, "job_hourly").collect().sort("job_id", "hour")
    # 12:00-12:10 is held too, but has no telemetry yet: not measured, so neither busy nor idle.
    (late,) = jh.filter((pl.col("job_id") == "uid-busy-0") & (pl.col("hour") == at(2, 12))).iter_rows(named=True)
    assert late["allocated_gpu_hours"] == pytest.approx(3 / 7 / 6) and late["measured"] is False
    jh = jh.filter(pl.col("hour") < at(2, 12))
    busy = jh.filter(pl.col("job_id") == "uid-busy-0")
    idle = jh.filter(pl.col("job_id") == "uid-idle-0")
    # Four whole hours of a 3/7 slice, 80 % active: 3/7 x 0.8 busy GPU-hours an hour (by hand).
    assert busy["hour"].to_list() == [at(2, 8), at(2, 9), at(2, 10), at(2, 11)]
    assert busy["allocated_gpu_hours"].to_list() == pytest.approx([3 / 7] * 4)
    assert busy["busy_gpu_hours"].to_list() == pytest.approx([3 / 7 * 0.8] * 4)
    assert busy["measured"].to_list() == [True] * 4
    assert idle["allocated_gpu_hours"].to_list() == pytest.approx([1 / 7] * 4)
    assert idle["busy_gpu_hours"].to_list() == [0.0] * 4


def test_the_idle_instance_is_an_idle_hold_and_the_busy_one_is_not(lake):
    holds = scan(lake, "idle_holds").collect()
    (row,) = holds.iter_rows(named=True)
    assert (row["pod"], row["gpu_uuid"], row["share"]) == ("idle-0", f"{PARENT}/gi13", pytest.approx(1 / 7))
    # Idle every hour since it was bound at 08:00, to the end of the last complete hour (12:00): 4 h.
    assert (row["idle_since"], row["idle_s"]) == (at(2, 8), 4 * 3600.0)


def test_the_real_capture_without_model_names_analyzes(tmp_path):
    """The real capture as it is: exporters before modelName name no model. Analysis used to stop on it
    (fleet_hourly, fragmentation: null gpu_model); such GPUs count as model "unknown"."""
    page = (FIXTURES / "a100-mig-1g.5gb-docs-2.x.prom").read_text()
    lake = tmp_path / "lake"
    builder = RowBuilder("c")
    rows = []
    for i in range(12):
        rows += builder.rows(parse_fast(page), epoch_us(at(2, 8) + dt.timedelta(minutes=5 * i))).samples
    write_rows(lake, "gpu_samples", rows, "dcgm")
    write_rows(lake, "jobs", [_job("busy-0", "1g.5gb", 1 / 7)], "k")  # so the job tables run too
    run(lake, until_s=at(2, 9, 10).timestamp())
    (fleet,) = scan(lake, "fleet_hourly").filter(pl.col("hour") == at(2, 8)).collect().iter_rows(named=True)
    assert (fleet["gpu_model"], fleet["gpus"]) == ("unknown", 1)  # the parent; its MIG instance is part of it
    frag = scan(lake, "fragmentation").filter(pl.col("ts") == at(2, 8)).collect()
    assert frag["gpu_model"].to_list() == ["unknown"]
    hourly = scan(lake, "gpu_hourly").filter(pl.col("parent_gpu_uuid").is_not_null()).collect()
    assert hourly["util_gpu_pct_mean"].to_list() == [pytest.approx(99.5687)]  # GR_ENGINE_ACTIVE 0.995687
