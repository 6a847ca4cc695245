"""`gpuledger export focus`: one billing period (a calendar month, UTC) of the focus_cost view as a FOCUS 1.3 file.

The dataset is the view's rows for the month, in a stable order, written atomically (Parquet keeps FOCUS's types:
Decimal as DECIMAL, DateTime as a UTC timestamp; CSV writes DateTime as `YYYY-MM-DDTHH:mm:ssZ` as the spec's
DateTime format asks). Beside it, `<file>.metadata.json` carries the spec's metadata (FocusVersion,
DataGenerator, CreationDate, the schema). A month with no GPU cost gives a valid, empty dataset. A GPU model with
no rate is an error naming the models and their GPU-hours (its charges would be null), unless the caller asks to
leave those rows out.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from gpuledger import __version__
from gpuledger.atomic import write_atomic, write_bytes_atomic
from gpuledger.config import Config
from gpuledger.errors import UsageError
from gpuledger.query import Lake
from gpuledger.store import LakeRef

FOCUS_VERSION = "1.3"
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}
_ORDER = "ChargePeriodStart, BillingAccountId, ResourceId NULLS LAST, AllocatedResourceId NULLS LAST, x_JobId"


@dataclass
class ExportReport:
    path: Path
    rows: int
    billed_cost_usd: float
    gpu_hours: float
    left_out: dict[str, float]  # unpriced GPU model -> GPU-hours left out (only with allow_unpriced)


def parse_period(period: str, option: str = "--period") -> tuple[dt.datetime, dt.datetime]:
    """'2026-11' -> [2026-11-01, 2026-12-01) UTC; anything else is a UsageError naming `option` and the value (a
    month before 1970 too: the lake's times are Unix times, so it can hold nothing then)."""
    m = re.fullmatch(r"(\d{4})-(\d{2})", period.strip())
    if not m or not 1 <= int(m.group(2)) <= 12 or int(m.group(1)) < 1970:
        raise UsageError(f"{option} {period!r}: expected a calendar month as YYYY-MM, e.g. 2026-11")
    start = dt.datetime(int(m.group(1)), int(m.group(2)), 1, tzinfo=dt.timezone.utc)
    end = dt.datetime(start.year + start.month // 12, start.month % 12 + 1, 1, tzinfo=dt.timezone.utc)
    return start, end


def finops_variables(cfg: Config) -> dict[str, str]:
    """The DuckDB variables sql/focus_cost.sql reads, from the config's [finops] table."""
    f = cfg.finops
    return {"focus_provider_name": f.provider_name, "focus_host_provider_name": f.host_provider_name or f.provider_name}


def export_focus(lake_root: LakeRef, cfg: Config, period: str, out: Path, allow_unpriced: bool = False) -> ExportReport:
    fmt = FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise UsageError(f"--out {str(out)!r}: the file name must end in .parquet or .csv")
    start, end = parse_period(period)
    with Lake(lake_root, variables=finops_variables(cfg)) as lake:
        # The month's charges by ChargePeriodStart (a column the view passes through, so DuckDB prunes the files
        # of other days); the billing period is the month of the charge period, so it is the same set of rows.
        res = lake.execute(
            f"SELECT * FROM focus_cost WHERE ChargePeriodStart >= CAST($start AS TIMESTAMPTZ) "
            f"AND ChargePeriodStart < CAST($end AS TIMESTAMPTZ) ORDER BY {_ORDER}",
            {"start": start.isoformat(), "end": end.isoformat()},
            timeout_s=None,
        )
    unpriced = (
        res.frame.filter(pl.col("BilledCost").is_null())
        .group_by(pl.col("x_GpuModel").fill_null("unknown model"))
        .agg(pl.col("PricingQuantity").cast(pl.Float64).sum())
        .sort("x_GpuModel")
        .rows()
    )
    left_out = {m: h for m, h in unpriced}
    if unpriced and not allow_unpriced:
        names = ", ".join(f"{m} ({h:,.1f} GPU-hours)" for m, h in unpriced)
        raise UsageError(
            f"period {period}: no rate for GPU model(s) {names}; FOCUS costs cannot be null: add them to "
            "[[rates]] in the config and run `gpuledger analyze`, or pass --allow-unpriced to leave them out"
        )
    df = res.frame.filter(pl.col("BilledCost").is_not_null())
    _write(df, out, fmt)
    write_bytes_atomic(out.with_name(out.name + ".metadata.json"), json.dumps(metadata(df), indent=1).encode())
    billed = float(df["BilledCost"].sum()) if df.height else 0.0
    hours = float(df["PricingQuantity"].sum()) if df.height else 0.0
    return ExportReport(out, df.height, billed, hours, left_out if allow_unpriced else {})


def _write(df: pl.DataFrame, out: Path, fmt: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        write_atomic(out, lambda tmp: df.write_parquet(tmp, compression="zstd", statistics=True))
        return
    # FOCUS DateTime in text: ISO 8601 UTC with a Z, to the second.
    text = df.with_columns(
        pl.col(c).dt.strftime("%Y-%m-%dT%H:%M:%SZ") for c, t in df.schema.items() if isinstance(t, pl.Datetime)
    )
    write_atomic(out, lambda tmp: text.write_csv(tmp))


_FOCUS_TYPES = {pl.Decimal: "Decimal", pl.Datetime: "DateTime", pl.String: "String", pl.Boolean: "Boolean"}
_JSON_COLUMNS = {"Tags", "AllocatedTags", "AllocatedMethodDetails", "SkuPriceDetails"}


def metadata(df: pl.DataFrame) -> dict:
    """FOCUS metadata: the version, who generated it, when, and each column's FOCUS data type."""
    cols = []
    for name, dtype in df.schema.items():
        kind = "JSON" if name in _JSON_COLUMNS else _FOCUS_TYPES.get(dtype.base_type(), str(dtype))
        cols.append({"ColumnName": name, "DataType": kind, "Custom": name.startswith("x_")})
    return {
        "FocusVersion": FOCUS_VERSION,
        "DataGenerator": {"DataGenerator": "gpuledger", "Version": __version__},
        "CreationDate": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "Schema": {"SchemaId": f"gpuledger-focus-{FOCUS_VERSION}-{__version__}", "ColumnDefinitions": cols},
    }
