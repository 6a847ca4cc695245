"""The FOCUS view and `gpuledger export focus`, by hand: exact decimal splits that sum to their origin, the rounding
remainder on the unallocated row, the origin's dimensions and tags on every split, CSV and Parquet files, an empty
period, a rate-card gap, and mistakes in the arguments."""

import datetime as dt
import json
from decimal import Decimal

import polars as pl
import pytest
from click.testing import CliRunner
from focus_rules import check_focus, check_split_allocation

from gpuledger.analytics.cost_allocation import cost_allocation, exact_quantities
from gpuledger.cli import main
from gpuledger.config import Rate
from gpuledger.lake import LakeWriter
from gpuledger.query import Lake

from builders import at
from finops.split_case import ALLOCS, RATES, START, STOP, hourly

ONLY_A100 = [Rate("A100", 1.0, START)]  # a rate card with no price for the H100s of the hand case
# Optional FOCUS columns gpuledger supports, so they must be there: the rate card is a published price list, and the
# monthly chargeback is the invoice.
SUPPORTED = ("SkuPriceDetails", "InvoiceId", "ChargeFrequency", "ServiceSubcategory", "AllocatedMethodDetails")


def write_lake(tmp_path, rows: pl.DataFrame, lake=None):
    """Hand-written cost_allocation rows get their exact quantities as the analytics would write them, into `lake`
    (a Store) or a folder under tmp_path."""
    lake = tmp_path / "lake" if lake is None else lake
    if "charge_gpu_hours" not in rows.columns:
        rows = exact_quantities(rows)
    LakeWriter(lake).write_partitions("cost_allocation", rows, "t")
    return lake


@pytest.fixture
def lake(tmp_path):
    return write_lake(tmp_path, cost_allocation(ALLOCS, hourly(), RATES, START, STOP, "request"))


@pytest.fixture
def lake_on_store(store, tmp_path):
    """The hand case on each kind of Store."""
    return write_lake(tmp_path, cost_allocation(ALLOCS, hourly(), RATES, START, STOP, "request"), store)


def focus(lake, where="true"):
    with Lake(lake) as q:
        return q.execute(f"SELECT * FROM focus_cost WHERE {where} ORDER BY ALL").frame


def test_rows_and_exact_costs_by_hand(lake):
    f = focus(lake)
    # G1: Nov 1 A (its idle remainder is 0, so no row); Nov 2 morning A, B, idle; afternoon B, idle.
    # G2: morning C and idle; afternoon idle. D: one row of its own. Ten charges.
    assert f.height == 10
    row = {(r["ResourceId"], r["ChargePeriodStart"], r["x_JobId"]): r for r in f.iter_rows(named=True)}
    idle = row[("G1", at(2, 0), None)]
    assert idle["PricingQuantity"] == Decimal("9") and idle["ListUnitPrice"] == Decimal("2")
    assert idle["BilledCost"] == Decimal("18") == idle["EffectiveCost"] == idle["ListCost"] == idle["ContractedCost"]
    assert idle["AllocatedResourceId"] is None and idle["AllocatedMethodId"] == "gpuledger-request-v1"
    b = row[("G1", at(2, 12), "B")]
    assert b["BilledCost"] == Decimal("5") and b["ChargePeriodEnd"] == STOP and b["AllocatedResourceId"] == "B"
    assert json.loads(b["AllocatedTags"]) == {
        "gpuledger/tenant": "nlp",
        "gpuledger/namespace": "nlp",
        "gpuledger/job": "B",
    }
    c = row[("G2", at(2, 0), "C")]
    assert c["PricingQuantity"] == Decimal("1") and c["x_SliceId"] == "MIG-1" and c["ResourceType"] == "GPU"
    d = row[(None, at(2, 0), "D")]  # on no known GPU: an ordinary charge, not a split
    assert d["AllocatedMethodId"] is None and d["ResourceType"] is None and d["BilledCost"] == Decimal("2")
    assert f["BilledCost"].sum() == Decimal("174")  # G1 88 + G2 84 + D 2, as in test_cost_allocation
    # The rate card is the price list: one GPU per GPU-hour priced, and the [[rates]] entry; the same for every charge
    # of a SkuPriceId ("H100@2.000000" and "H100@5.000000" are two prices of one entry).
    assert {(r["SkuPriceId"], r["SkuPriceDetails"]) for r in f.iter_rows(named=True)} == {
        ("H100@2.000000", '{"GpuCount":1,"x_RateCardModel":"H100"}'),
        ("H100@5.000000", '{"GpuCount":1,"x_RateCardModel":"H100"}'),
    }
    assert set(f["InvoiceId"]) == {"c/2026-11"}  # the month's chargeback of cluster c
    assert set(f["BillingPeriodStart"]) == {at(1)}
    assert set(f["BillingPeriodEnd"]) == {at(1, month=12)}


def test_splits_carry_the_origin_and_sum_to_it_exactly(lake):
    f = focus(lake, "ResourceId IS NOT NULL")
    with Lake(lake) as q:
        origins = q.execute(
            "SELECT gpu_uuid, period_start, any_value(CAST(round(usd_per_gpu_hour, 6) AS DECIMAL(18, 6))) AS price, "
            "greatest(any_value(CAST(round(origin_gpu_hours, 9) AS DECIMAL(18, 9))), "
            "coalesce(sum(CAST(round(gpu_hours, 9) AS DECIMAL(18, 9))) FILTER (WHERE job_id IS NOT NULL), 0)) AS qty "
            "FROM cost_allocation WHERE gpu_uuid IS NOT NULL GROUP BY ALL"
        ).frame
    dims = [
        "ChargeDescription",
        "ListUnitPrice",
        "ContractedUnitPrice",
        "SkuId",
        "SkuPriceId",
        "ResourceType",
        "BillingAccountId",
        "ChargePeriodEnd",
        "ServiceName",
        "PricingUnit",
    ]
    for (gpu, start), g in f.group_by("ResourceId", "ChargePeriodStart"):
        o = origins.filter((pl.col("gpu_uuid") == gpu) & (pl.col("period_start") == start)).row(0, named=True)
        assert g["PricingQuantity"].sum() == o["qty"] == g["ConsumedQuantity"].sum()
        for col in ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost"):
            assert g[col].sum() == o["qty"] * o["price"], (gpu, start, col)  # Decimal: exact, no tolerance
        for col in dims:
            assert g[col].n_unique() == 1, (gpu, start, col)
        origin_tags = {
            "gpuledger/cluster": "c",
            "gpuledger/node": g["x_Node"][0],
            "gpuledger/gpu_model": g["x_GpuModel"][0],
        }
        for tags in g["Tags"]:
            assert origin_tags.items() <= json.loads(tags).items()
        assert g["AllocatedResourceId"].null_count() <= 1


def test_rounding_remainder_goes_to_the_unallocated_row(tmp_path):
    # Three jobs each hold a third of G9 for its one reported hour: 0.333333333 GPU-hours each after rounding to 1e-9,
    # so the unallocated row carries 0.000000001 and the four sum to exactly 1 GPU-hour ($3).
    base = dict(
        period_start=at(2, 0),
        period_end=at(3, 0),
        cluster="c",
        gpu_uuid="G9",
        node="n9",
        gpu_model="X",
        rate_model="X",
        usd_per_gpu_hour=3.0,
        origin_gpu_hours=1.0,
        tenant="t",
        namespace="t",
        pod=None,
        slice_uuid=None,
        method="request",
        date=dt.date(2026, 11, 2),
    )
    rows = [dict(base, gpu_hours=1 / 3, cost_usd=1.0, job_id=f"j{i}") for i in range(3)]
    rows.append(dict(base, gpu_hours=0.0, cost_usd=0.0, job_id=None, tenant=None, namespace=None))
    lake = write_lake(
        tmp_path,
        pl.DataFrame(
            rows, schema_overrides={"period_start": pl.Datetime("us", "UTC"), "period_end": pl.Datetime("us", "UTC")}
        ),
    )
    f = focus(lake)
    assert f.height == 4
    assert sorted(f["PricingQuantity"].to_list()) == [Decimal("0.000000001")] + [Decimal("0.333333333")] * 3
    assert f["PricingQuantity"].sum() == Decimal(1) and f["BilledCost"].sum() == Decimal(3)
    assert f.filter(pl.col("x_Unallocated"))["BilledCost"].item() == Decimal("0.000000003")


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_export_parquet_and_csv(lake_on_store, tmp_path):
    lake = str(lake_on_store)
    cfg = tmp_path / "gl.toml"
    cfg.write_text('[finops]\nprovider_name = "ACME GPU Platform"\nhost_provider_name = "ACME Datacenter"\n')
    r = cli(
        "export", "focus", "--lake", lake, "--config", cfg, "--period", "2026-11", "--out", tmp_path / "nov.parquet"
    )
    assert r.exit_code == 0, r.output
    assert "wrote 10 FOCUS 1.3 charge(s) for 2026-11" in r.output and "BilledCost 174.00 USD" in r.output
    p = pl.read_parquet(tmp_path / "nov.parquet")
    assert p.height == 10 and p["BilledCost"].dtype == pl.Decimal(38, 15) and p["BilledCost"].sum() == Decimal(174)
    assert p["ChargePeriodStart"].dtype == pl.Datetime("us", "UTC")
    assert set(p["ServiceProviderName"]) == set(p["InvoiceIssuerName"]) == {"ACME GPU Platform"}
    assert set(p["HostProviderName"]) == {"ACME Datacenter"}
    meta = json.loads((tmp_path / "nov.parquet.metadata.json").read_text())
    assert meta["FocusVersion"] == "1.3" and meta["DataGenerator"]["DataGenerator"] == "gpuledger"
    assert [c["ColumnName"] for c in meta["Schema"]["ColumnDefinitions"]] == p.columns
    r = cli("export", "focus", "--lake", lake, "--period", "2026-11", "--out", tmp_path / "nov.csv")
    assert r.exit_code == 0, r.output
    c = pl.read_csv(tmp_path / "nov.csv", infer_schema=False)
    assert c.columns == p.columns and c.height == 10
    assert c["ChargePeriodStart"].str.contains(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$").all()
    assert sum(Decimal(v) for v in c["BilledCost"]) == Decimal(174)
    # The same rows, in the same order, in both files.
    assert c["x_JobId"].to_list() == p["x_JobId"].to_list()


def test_a_month_without_cost_is_an_empty_valid_dataset(lake, tmp_path):
    r = cli("export", "focus", "--lake", lake, "--period", "2026-09", "--out", tmp_path / "sep.parquet")
    assert r.exit_code == 0 and "wrote 0 FOCUS 1.3 charge(s)" in r.output and "empty, valid dataset" in r.output
    empty = pl.read_parquet(tmp_path / "sep.parquet")
    assert empty.height == 0 and "BilledCost" in empty.columns and empty["BilledCost"].dtype == pl.Decimal(38, 15)


def test_a_rate_card_gap_is_an_error_naming_the_model(tmp_path):
    rows = cost_allocation(ALLOCS, hourly(), ONLY_A100, START, STOP)
    lake = write_lake(tmp_path, rows)
    r = cli("export", "focus", "--lake", lake, "--period", "2026-11", "--out", tmp_path / "x.csv")
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "period 2026-11: no rate for GPU model(s) NVIDIA H100 80GB HBM3 (" in r.output
    assert "add them to [[rates]]" in r.output and not (tmp_path / "x.csv").exists()
    r = cli("export", "focus", "--lake", lake, "--period", "2026-11", "--out", tmp_path / "x.csv", "--allow-unpriced")
    assert r.exit_code == 0 and "left out: NVIDIA H100 80GB HBM3:" in r.output
    assert pl.read_csv(tmp_path / "x.csv").height == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--period", "2026-13", "--out", "x.csv"], "--period '2026-13': expected a calendar month as YYYY-MM"),
        (["--period", "Nov 2026", "--out", "x.csv"], "--period 'Nov 2026': expected a calendar month as YYYY-MM"),
        (["--period", "2026-11", "--out", "x.xlsx"], "the file name must end in .parquet or .csv"),
        (["--out", "x.csv"], "Missing option '--period'"),
    ],
)
def test_mistakes_get_one_line_and_a_nonzero_exit(lake, tmp_path, args, message):
    r = CliRunner().invoke(main, ["export", "focus", "--lake", str(lake), *args])
    assert r.exit_code != 0 and message in r.output and "Traceback" not in r.output


# -- Conformance: the export checked by tests/focus_rules.py (written from the FOCUS 1.3 text, apart from the view) --

ORIGIN_KEY = ["ResourceId", "ChargePeriodStart", "ChargePeriodEnd"]
DECIMALS = [
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "ContractedCost",
    "PricingQuantity",
    "ConsumedQuantity",
    "ListUnitPrice",
    "ContractedUnitPrice",
]


def origins_from_cost_allocation(lake) -> pl.DataFrame:
    """Each GPU's origin charge, from cost_allocation's origin_gpu_hours and price (not from the split rows)."""
    with Lake(lake) as q:
        return q.execute(
            "WITH o AS (SELECT gpu_uuid AS ResourceId, period_start AS ChargePeriodStart, "
            "period_end AS ChargePeriodEnd, "
            "any_value(CAST(round(usd_per_gpu_hour, 6) AS DECIMAL(18, 6))) AS price, "
            "greatest(any_value(CAST(round(origin_gpu_hours, 9) AS DECIMAL(18, 9))), coalesce(sum("
            "CAST(round(gpu_hours, 9) AS DECIMAL(18, 9))) FILTER (WHERE job_id IS NOT NULL), 0)) AS q "
            "FROM cost_allocation WHERE gpu_uuid IS NOT NULL GROUP BY ALL) "
            "SELECT ResourceId, ChargePeriodStart, ChargePeriodEnd, q AS PricingQuantity, q AS ConsumedQuantity, "
            "price AS ListUnitPrice, CAST(q * price AS DECIMAL(38, 15)) AS BilledCost, "
            "CAST(q * price AS DECIMAL(38, 15)) AS EffectiveCost, CAST(q * price AS DECIMAL(38, 15)) AS ListCost "
            "FROM o"
        ).frame


def exported(lake, tmp_path, ext):
    out = tmp_path / f"focus.{ext}"
    r = cli("export", "focus", "--lake", lake, "--period", "2026-11", "--out", out)
    assert r.exit_code == 0, r.output
    if ext == "parquet":
        return pl.read_parquet(out)
    # A CSV reader is told which columns are FOCUS Decimals; DateTimes stay text, checked against the spec's format.
    return pl.read_csv(out, infer_schema=False).with_columns(pl.col(DECIMALS).cast(pl.Decimal(38, 15)))


@pytest.mark.parametrize("ext", ["parquet", "csv"])
def test_the_hand_case_export_conforms(lake, tmp_path, ext):
    f = exported(lake, tmp_path, ext)
    assert f.height == 10
    assert check_focus(f, supported=SUPPORTED) == []
    origins = origins_from_cost_allocation(lake)
    if ext == "csv":
        origins = origins.with_columns(pl.col(c).dt.strftime("%Y-%m-%dT%H:%M:%SZ") for c in ORIGIN_KEY[1:])
    assert check_split_allocation(f, ORIGIN_KEY, origins) == []


@pytest.mark.parametrize("ext", ["parquet", "csv"])
def test_a_simulated_month_conforms_and_adds_up_to_the_fleet_cost(analysed_lake, tmp_path, ext):
    analysed = analysed_lake
    # small_lake's one day is 2026-11-01 (it ends at 2026-11-02 00:00): all of it in the 2026-11 billing period.
    f = exported(analysed, tmp_path, ext)
    assert f.height > 20
    assert check_focus(f, supported=SUPPORTED) == []
    origins = origins_from_cost_allocation(analysed)
    if ext == "csv":
        origins = origins.with_columns(pl.col(c).dt.strftime("%Y-%m-%dT%H:%M:%SZ") for c in ORIGIN_KEY[1:])
    month = origins.filter(pl.col("ChargePeriodStart").cast(pl.String).str.starts_with("2026-11"))
    assert check_split_allocation(f, ORIGIN_KEY, month) == []
    with Lake(analysed) as q:
        (fleet,) = q.execute(
            "SELECT sum(cost_usd + idle_share_usd) FROM cost_daily WHERE day_start >= TIMESTAMPTZ '2026-11-01'"
        ).rows[0]
    assert float(f["BilledCost"].sum()) == pytest.approx(fleet, rel=1e-9) and fleet > 0
