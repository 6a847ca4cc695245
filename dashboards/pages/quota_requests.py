"""Quota requests: what waits for a decision, the grants in force (or approved for later), and every step taken.

Read-only: requests are made and decided with `gpuledger quota request|approve|reject` (docs/governance.md). Read
from the lake itself, not the snapshot: a step is taken at any time, and the snapshot is rebuilt only when the
analytics write. Scoped like every page: the viewer's tenants (filters.SCOPE_SQL), the URL's cluster and tenant;
the GPU model filter keeps the requests whose model key names that model (H100 names NVIDIA H100 80GB HBM3).
"""

from __future__ import annotations

import polars as pl

from gpuledger.config import match_model
from gpuledger.dashboards.filters import TENANT_SQL
from gpuledger.dashboards.ui import kpi, note, section, table

PATH = "/quota-requests"
NAME = "Quota requests"

_PENDING = (
    "SELECT request_id, tenant, gpu_model, gpus, valid_from, valid_until, requested_by, requested_at, reason "
    f"FROM quota_requests WHERE state = 'pending' AND {TENANT_SQL} ORDER BY requested_at"
)
_GRANTED = (
    "SELECT request_id, state, tenant, gpu_model, gpus, valid_from, valid_until, requested_by, decided_by, "
    f"decided_at, note FROM quota_requests WHERE state IN ('active', 'approved') AND {TENANT_SQL} "
    "ORDER BY valid_from, request_id"
)
_HISTORY = (
    "SELECT ts, request_id, action, actor, tenant, gpu_model, gpus, valid_from, valid_until, reason "
    f"FROM quota_events WHERE ts >= ? AND ts < ? AND {TENANT_SQL} ORDER BY ts DESC, event_id"
)


def _of_model(frame: pl.DataFrame, model: str | None) -> pl.DataFrame:
    """The rows whose model key names `model` (by the quota keys' rule), all of them without a model filter."""
    if model is None or frame.is_empty():
        return frame
    keep = [match_model(model, [key]) is not None for key in frame["gpu_model"]]
    return frame.filter(pl.Series(keep, dtype=pl.Boolean))


def layout(ctx, f):
    data = ctx.data
    if not data.has("quota_events"):
        return [
            note(
                "No quota requests yet. A tenant asks for more GPUs with `gpuledger quota request --tenant T --model M "
                "--gpus N --from D --until D --reason TEXT`; someone else decides with `gpuledger quota approve ID "
                "--by NAME` (or reject). Approved grants raise the tenant's quota in the next analytics run.",
                "no-data",
            )
        ]
    pending = _of_model(data.frame(_PENDING, f.tenant_args, lake=True), f.model)
    granted = _of_model(data.frame(_GRANTED, f.tenant_args, lake=True), f.model)
    history = _of_model(data.frame(_HISTORY, [f.start_ts, f.end_ts, *f.tenant_args], lake=True), f.model)
    active = granted.filter(pl.col("state") == "active")
    return [
        kpi("qr-pending", "requests waiting for a decision", pending.height, "requests"),
        kpi("qr-active", "grants in force now", active.height, "grants"),
        kpi("qr-granted-gpus", "GPUs they add to quotas now", float(active["gpus"].sum() or 0), "GPUs", 1),
        section("Waiting for a decision", table("qr-pending-table", pending)),
        section(
            "Grants in force now, or approved from a later time",
            note(
                "Each raises its tenant's quota for its model, and its all-models quota, by its GPUs between its "
                "dates; the webhook applies it from the first analytics run after the approval.",
            ),
            table("qr-granted", granted),
        ),
        section("Every step in the range (requests, approvals, rejections)", table("qr-history", history)),
    ]
