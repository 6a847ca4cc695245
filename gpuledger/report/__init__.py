"""`gpuledger report`: one month of the fleet as a single self-contained HTML file for managers and finance.

month.py runs the queries over the sql/ views (every figure is one of theirs), html.py renders them with the
figures of svg.py inline. The file is written atomically: a reader sees the previous report or the new one.
docs/report.md describes each section and its definitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuledger.atomic import write_bytes_atomic
from gpuledger.config import Config
from gpuledger.errors import LakeError, UsageError
from gpuledger.query import Lake, require_lake
from gpuledger.store import LakeRef


@dataclass
class ReportSummary:
    path: Path
    month: str
    partial: bool
    total_usd: float | None
    reconciles: bool
    parts_usd: float
    tenants: int
    bytes: int


def write_report(lake_root: LakeRef, cfg: Config, month: str, out: Path, cluster: str | None = None) -> ReportSummary:
    """Query `month` (YYYY-MM, UTC) of the lake and write the report to `out`. A malformed month, a month with no
    data or an unknown cluster is a UsageError; a file that cannot be written a LakeError naming it."""
    from gpuledger.focus_export import finops_variables
    from gpuledger.report.html import render
    from gpuledger.report.month import gather, parse_month

    parse_month(month)  # a malformed month is one line before the lake is opened
    store = require_lake(lake_root)
    a = cfg.analytics
    with Lake(store, variables=finops_variables(cfg)) as lake:
        data = gather(lake, month, cluster, a.idle_policy, a.platform_tenant)
    text = render(data).encode()
    try:
        write_bytes_atomic(out, text)
    except LakeError as e:  # the OS's reason, named for the option rather than the lake
        raise UsageError(f"--out {str(out)!r}: {e}") from e
    return ReportSummary(
        path=out,
        month=month,
        partial=data.partial,
        total_usd=data.totals["total_usd"],
        reconciles=data.reconciles,
        parts_usd=data.parts_usd,
        tenants=data.tenants.filter(data.tenants["tenant"].is_not_null()).height,
        bytes=len(text),
    )
