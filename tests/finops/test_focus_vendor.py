"""The FOCUS export of a mixed fleet names each charge's vendor in x_GpuVendor, on both stores, and stays conformant.

By hand: an H100 (G-H) and an MI300X (G-M, split into CPX partitions, G-M/p1 one of its 8) report every hour of
Nov 2. J1 (vision) holds all of G-H 10:00-14:00; J2 (nlp) holds the CPX partition G-M/p1 (1/8 of G-M) 00:00-08:00.
Rates from January: H100 $2, MI300X $1 per GPU-hour (example prices).
  G-H: 24 GPU-h x $2 = $48: J1 4 h = $8, unallocated 20 h = $40
  G-M: 24 GPU-h x $1 = $24: J2 8 h x 1/8 = 1 GPU-h = $1, unallocated 23 GPU-h = $23
So nvidia $48, amd $24, $72 in all.
"""

from decimal import Decimal

import polars as pl
from click.testing import CliRunner
from focus_rules import check_focus

from gpuledger.analytics.cost_allocation import cost_allocation
from gpuledger.cli import main
from gpuledger.config import Rate
from gpuledger.lake import LakeWriter

from builders import H100, allocation, allocations, at

MI300X = "AMD Instinct MI300X OAM"
RATES = [Rate("H100", 2.0, at(1, month=1)), Rate("MI300X", 1.0, at(1, month=1))]
SUPPORTED = ("SkuPriceDetails", "InvoiceId", "ChargeFrequency", "ServiceSubcategory", "AllocatedMethodDetails")


def hourly() -> pl.LazyFrame:
    rows = [
        dict(cluster="c", node=node, gpu_uuid=g, parent_gpu_uuid=parent, hour=at(2, h), model=model, busy_ratio=0.0)
        for h in range(24)
        for g, parent, node, model in (
            ("G-H", None, "n1", H100),
            ("G-M", None, "n2", MI300X),
            ("G-M/p1", "G-M", "n2", MI300X),
        )
    ]
    return pl.LazyFrame(rows, schema_overrides={"hour": pl.Datetime("us", "UTC")})


ALLOCS = allocations(
    allocation("J1", "vision", "G-H", 1.0, at(2, 10), at(2, 14)),
    allocation("J2", "nlp", "G-M/p1", 1 / 8, at(2, 0), at(2, 8), node="n2", gpu_model=MI300X),
)


def test_x_gpu_vendor_on_both_stores(store, tmp_path):
    rows = cost_allocation(ALLOCS, hourly(), RATES, at(1), at(3), "request")
    assert dict(rows.select("gpu_model", "vendor").unique().iter_rows()) == {H100: "nvidia", MI300X: "amd"}
    LakeWriter(store).write_partitions("cost_allocation", rows, "t")
    out = tmp_path / "nov.parquet"
    r = CliRunner().invoke(main, ["export", "focus", "--lake", str(store), "--period", "2026-11", "--out", str(out)])
    assert r.exit_code == 0, r.output
    f = pl.read_parquet(out)
    assert check_focus(f, supported=SUPPORTED) == []
    by = f.group_by("x_GpuVendor").agg(pl.col("BilledCost").sum()).sort("x_GpuVendor")
    assert by.rows() == [("amd", Decimal(24)), ("nvidia", Decimal(48))]
    j2 = f.filter(pl.col("x_JobId") == "J2").row(0, named=True)
    assert (j2["x_GpuVendor"], j2["ResourceId"], j2["BilledCost"]) == ("amd", "G-M", Decimal(1))
    meta = (tmp_path / "nov.parquet.metadata.json").read_text()
    assert '"ColumnName": "x_GpuVendor"' in meta.replace('":"', '": "')
