"""`vendor` in gpu_5min, gpu_hourly and fleet_hourly, by hand: the samples' own vendor where they carry it, else the
one the model's name says (gpuledger/vendors.py), on both stores through a real analysis run.

The fleet (hand-built samples every 10 minutes, Nov 2 10:00 to 12:00): an H100 written before gpu_samples had
`vendor` (null), an MI300X (vendor amd) split into CPX partitions of which one is a child row, a 910A chip (vendor
huawei), and a card whose name no rule knows (vendor null). A job waits for two Ascend910B the fleet does not have.
"""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from gpuledger.analytics.fleet import fleet_hourly
from gpuledger.analytics.gpu_hourly import gpu_5min, gpu_hourly
from gpuledger.analytics.runner import run
from gpuledger.config import defaults
from gpuledger.lake import scan

from builders import at, epoch_us, job_state, put_lake, write_rows

H100 = "NVIDIA H100 80GB HBM3"
MI300X = "AMD Instinct MI300X OAM"
ASCEND = "910A-Ascend-V1"
GPUS = [  # gpu_uuid, parent, model, the samples' vendor
    ("GPU-h100", None, H100, None),
    ("MI-1", None, MI300X, "amd"),
    ("MI-1/p1", "MI-1", MI300X, "amd"),
    ("NPU-0", None, ASCEND, "huawei"),
    ("X-0", None, "Acme Tensor 9", None),
]
NOW = at(2, 12)


def _samples(with_vendor=True) -> list[dict]:
    rows, t = [], at(2, 10)
    while t < NOW:
        for uuid, parent, model, vendor in GPUS:
            row = dict(cluster="c", node="n1", gpu_uuid=uuid, parent_gpu_uuid=parent, model=model)
            row |= dict(util_gpu_pct=50.0, power_w=100.0, source="t", ts=epoch_us(t), pod=None)
            rows.append(row | ({"vendor": vendor} if with_vendor else {}))
        t += dt.timedelta(minutes=10)
    return rows


def _frame(rows) -> pl.LazyFrame:
    return pl.LazyFrame(rows).with_columns(
        pl.col("ts").cast(pl.Datetime("us", "UTC")),
        *(pl.lit(None, pl.Float32).alias(c) for c in ("sm_active_ratio",)),
        pl.lit(None, pl.Int64).alias("mem_used_bytes"),
    )


WANT = {"GPU-h100": "nvidia", "MI-1": "amd", "MI-1/p1": "amd", "NPU-0": "huawei", "X-0": None}


def test_rollups_carry_the_vendor_and_fill_it_from_the_model():
    five = gpu_5min(_frame(_samples())).collect()
    hourly = gpu_hourly(five.lazy()).collect()
    for frame in (five, hourly):
        assert dict(frame.select("gpu_uuid", "vendor").unique().iter_rows()) == WANT
    # 2 hours x 5 rows; the H100's vendor came from its name, the unknown card's stays null
    assert hourly.height == 10


def test_samples_from_before_the_column_get_it_from_the_model():
    # no `vendor` column at all: the MI300X and the 910A are named by their models, as the others
    hourly = gpu_hourly(gpu_5min(_frame(_samples(with_vendor=False)))).collect()
    assert dict(hourly.select("gpu_uuid", "vendor").unique().iter_rows()) == WANT


def test_fleet_hourly_per_model_with_its_vendor():
    hourly = gpu_hourly(gpu_5min(_frame(_samples())))
    queue = pl.LazyFrame(
        {"ts": [at(2, 10)], "cluster": ["c"], "gpu_model": ["Ascend910B"], "pending_jobs": [1], "pending_gpus": [2.0]}
    ).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))
    out = fleet_hourly(hourly, queue).collect().filter(pl.col("hour") == at(2, 10))
    got = {r["gpu_model"]: (r["vendor"], r["gpus"]) for r in out.iter_rows(named=True)}
    # the MI300X is one physical GPU (its CPX child is part of it); the 910B only waits: vendor from its name
    assert got == {
        H100: ("nvidia", 1),
        MI300X: ("amd", 1),
        ASCEND: ("huawei", 1),
        "Acme Tensor 9": (None, 1),
        "Ascend910B": ("huawei", 0),
    }


@pytest.fixture
def mixed_lake(tmp_path, store):
    local = tmp_path / "src"
    write_rows(local, "gpu_samples", _samples())
    waiting = job_state("J1", "pending", at(2, 10), tenant="nlp", namespace="nlp", gpu_model="Ascend910B", gpus=2.0)
    write_rows(local, "jobs", [waiting | {"cluster": "c", "submitted_at": epoch_us(at(2, 10))}])
    return put_lake(local, store)


def test_a_run_writes_the_vendor_on_both_stores(mixed_lake):
    run(mixed_lake, until_s=NOW.timestamp(), cfg=defaults())
    hourly = scan(mixed_lake, "gpu_hourly").collect()
    assert dict(hourly.select("gpu_uuid", "vendor").unique().iter_rows()) == WANT
    fleet = scan(mixed_lake, "fleet_hourly").filter(pl.col("hour") == at(2, 11)).collect()
    by_vendor = fleet.group_by("vendor").agg(pl.col("gpus").sum()).sort("vendor", nulls_last=True)
    # 10:00-12:00 on every GPU: 1 nvidia, 1 amd (its partition inside), 1 huawei, 1 unknown each hour
    assert by_vendor.rows() == [("amd", 1), ("huawei", 1), ("nvidia", 1), (None, 1)]
