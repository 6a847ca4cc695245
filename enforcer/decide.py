"""One admission decision: the review, the decision table and the recent admissions in; the response and its audit
row out. Pure (the clock and the table are arguments), so every policy x mode is tested without a server.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuledger.enforcer import policies
from gpuledger.enforcer.review import Review, allow, deny
from gpuledger.enforcer.workload import AskError, ask, controller_kind


@dataclass(frozen=True)
class Settings:
    """The enforcer's policy settings (validated once, from the config's [enforcer] table)."""

    tenant_of_namespace: dict[str, str]
    modes: dict[str, str] = field(
        default_factory=lambda: {"quota": "enforce", "budget": "warn", "idle-hog": "warn", "fair-share": "enforce"}
    )
    budget_warn_pct: float = 80.0
    idle_max_gpus: float = 4.0
    idle_min_s: float = 7200.0
    priority_classes: tuple[tuple[float, str], ...] = ((0.5, "gpu-high"), (0.25, "gpu-normal"), (0.0, "gpu-low"))
    max_table_age_s: float = 900.0
    failure_mode: str = "allow"  # what a stale or missing table does: allow (with a warning) or deny
    burst_window_s: float = 30.0
    policy_version: str = "v1"


@dataclass
class Table:
    """The decision table in memory: (tenant, model or None) -> row, with when the analytics computed it, and each
    tenant's idle GPUs (the analytics' idle_holds of the same run)."""

    rows: dict[tuple[str, str | None], policies.TenantRow]
    computed_at: dt.datetime | None
    idle: dict[str, tuple[policies.IdleHold, ...]] = field(default_factory=dict)

    def __post_init__(self):
        self._by_key = {(t, model_key(m)): row for (t, m), row in self.rows.items()}

    def row(self, tenant: str, model: str | None) -> policies.TenantRow | None:
        """The row of a tenant and model, however the model is spelt: a pod names it by its node label
        (nvidia.com/gpu.product = NVIDIA-H100-80GB-HBM3), the lake by its NVML name (NVIDIA H100 80GB HBM3)."""
        return self._by_key.get((tenant, model_key(model)))


@functools.lru_cache(maxsize=256)  # a fleet has a handful of models; the key is asked for several times a request
def model_key(model: str | None) -> str | None:
    """One spelling per GPU model: GPU feature discovery's labels put dashes where NVML names have spaces."""
    return None if model is None else re.sub(r"[\s_-]+", " ", model).strip().casefold()


def table_state(table: Table | None, now: dt.datetime, max_age_s: float) -> tuple[str, float | None]:
    """("missing" | "stale" | "fresh", age in seconds): one rule for the decision, /metrics and the log."""
    if table is None or table.computed_at is None:
        return "missing", None
    age = (now - table.computed_at).total_seconds()
    return ("stale" if age > max_age_s else "fresh"), age


class Recent:
    """GPUs this replica admitted in the last seconds, per (tenant, model): not in the decision table yet.

    Running sums per key, updated as events arrive and expire: at 500 admissions/s a 30 s window holds 15,000
    events, and summing them on every request made the webhook's latency grow with its own load.
    """

    def __init__(self, window_s: float):
        self.window_s = window_s
        self._events: deque[tuple[float, str, str | None, float]] = deque()
        self._sums: dict[tuple[str, str | None], float] = {}

    def add(self, now_s: float, tenant: str, model: str | None, gpus: float) -> None:
        model = model_key(model)  # one count per model however the pods spell it
        self._events.append((now_s, tenant, model, gpus))
        self._sums[(tenant, model)] = self._sums.get((tenant, model), 0) + gpus

    def gpus(self, now_s: float, tenant: str, model: str | None) -> float:
        model = model_key(model)
        while self._events and self._events[0][0] < now_s - self.window_s:
            _, t, m, g = self._events.popleft()
            self._sums[(t, m)] -= g
        if model is not None:
            return self._sums.get((tenant, model), 0)
        return sum(n for (t, _), n in self._sums.items() if t == tenant)


@dataclass(frozen=True)
class Outcome:
    response: dict
    decision: str  # allow, warn, deny
    policy: str | None
    mode: str | None
    reason: str
    tenant: str | None
    gpu_model: str | None
    gpus: float


# An object whose controller is one of these was decided when its controller was: a Job's pods, a JobSet's Jobs,
# a RayJob's RayCluster and its pods, the Kueue Workload of a Job. Checking them again would count the same GPUs
# twice (the Job's admission is still in the burst window when its pods arrive) and could deny half a Job.
DECIDED_WITH_OWNER = frozenset({"Job", "JobSet", "RayJob", "RayCluster"})


def decide(
    review: Review,
    table: Table | None,
    s: Settings,
    recent: Recent,
    now: dt.datetime,
    mutate: bool = False,
    labelled: Mapping[str, str] | None = None,
):
    """One admission decision. /validate (mutate False) runs quota, budget and idle-hog and counts what it admits;
    /mutate runs fair share only, never denies on a policy and counts nothing: the API server calls both for the
    same object, the mutating webhook first.

    `labelled`: namespace -> tenant from the namespaces' labels, for namespaces the config does not map."""
    uid = review.uid

    def plain(why: str = "", model: str | None = None, gpus: float = 0) -> Outcome:
        """Admitted with no policy involved (and, when `why` is given, a warning saying it)."""
        return Outcome(
            allow(uid, [why] if why else ()), "warn" if why else "allow", None, None, why, tenant, model, gpus
        )

    tenant = s.tenant_of_namespace.get(review.namespace)
    if tenant is None and labelled is not None:
        tenant = labelled.get(review.namespace)
    if review.operation not in ("CREATE", "UPDATE") or review.obj is None:
        return plain()
    try:
        a = ask(review.kind, review.obj)
    except AskError as e:
        if mutate:  # the validating call refuses it, once
            return plain()
        msg = f"{review.kind} {review.namespace}/{review.name or '(generated)'}: {e}"
        return Outcome(
            deny(uid, msg, reason="BadRequest", code=400), "deny", "request", "enforce", msg, tenant, None, 0
        )
    asked = a.gpu_share
    owner = controller_kind(review.obj)
    if a.asks_gpus and owner in DECIDED_WITH_OWNER:
        return Outcome(allow(uid), "allow", None, None, f"decided with its {owner}", tenant, a.model, asked)
    if not a.asks_gpus or tenant is None:
        unmapped = a.asks_gpus and not mutate
        return plain(
            f"namespace {review.namespace} belongs to no tenant: not checked" if unmapped else "", a.model, asked
        )
    what = review.kind
    state, age = table_state(table, now, s.max_table_age_s)
    if state != "fresh":
        if mutate:  # the validating call says so (and denies, with failure mode deny)
            return plain(model=a.model, gpus=asked)
        why = (
            "gpuledger has no decision table yet"
            if age is None
            else f"gpuledger's decision table is {age / 60:.0f} min old (limit {s.max_table_age_s / 60:.0f} min)"
        )
        if s.failure_mode == "deny":
            msg = f"{why}; GPU workloads are refused until it is fresh (failure mode deny)"
            return Outcome(
                deny(uid, msg, reason="ServiceUnavailable", code=503),
                "deny",
                "stale-table",
                "enforce",
                msg,
                tenant,
                a.model,
                asked,
            )
        msg = f"{why}: admitted unchecked"
        return Outcome(allow(uid, [msg]), "warn", "stale-table", "warn", msg, tenant, a.model, asked)
    if mutate:
        return _fair_share(review, table, s, tenant, a.model, asked)
    now_s = now.timestamp()
    verdicts = []
    for model in ([a.model] if a.model else []) + [None]:
        row = table.row(tenant, model)
        held_recent = recent.gpus(now_s, tenant, model)
        verdicts.append(policies.quota(row, asked, held_recent, what, s.modes["quota"]))
        if model is None:
            verdicts.append(policies.budget(row, asked, what, s.modes["budget"], s.budget_warn_pct))
            verdicts.append(
                policies.idle_hog(
                    tenant,
                    table.idle.get(tenant, ()),
                    now_s,
                    asked,
                    what,
                    s.modes["idle-hog"],
                    s.idle_max_gpus,
                    s.idle_min_s,
                )
            )
    verdicts = [v for v in verdicts if v is not None]
    denials = [v for v in verdicts if v.breach and v.mode == "enforce"]
    warned = [v for v in verdicts if (v.breach and v.mode == "warn") or v.warning]
    warnings = [v.message for v in warned]
    dry = [v for v in verdicts if v.breach and v.mode == "dry-run"]
    if denials:
        first = denials[0]
        return Outcome(
            deny(uid, first.message, warnings=warnings),
            "deny",
            first.policy,
            first.mode,
            first.message,
            tenant,
            a.model,
            asked,
        )
    if not review.dry_run:
        recent.add(now_s, tenant, a.model, asked)
    # The audit's policy and mode are the first noted; its reason joins them all.
    noted = warned + dry
    return Outcome(
        allow(uid, warnings),
        "warn" if warnings else "allow",
        noted[0].policy if noted else None,
        noted[0].mode if noted else None,
        "; ".join(v.message for v in noted),
        tenant,
        a.model,
        asked,
    )


def _fair_share(review: Review, table: Table, s: Settings, tenant: str, model: str | None, asked: float) -> Outcome:
    """/mutate: enforce sets the tenant's priority class, warn says which class it would set, dry-run records it in
    the audit only. Kinds without a template to patch (a bare Pod) get nothing."""
    row = table.row(tenant, None)
    cls = policies.priority_class(row.fairshare if row else None, s.priority_classes)
    ops = policies.priority_patch(review.kind, review.obj, cls) if cls else []
    if not ops:
        return Outcome(allow(review.uid), "allow", None, None, "", tenant, model, asked)  # nothing to set
    mode = s.modes["fair-share"]
    msg = (
        f"tenant {tenant}'s fair-share factor is {row.fairshare:.2f}: this {review.kind} "
        f"{'gets' if mode == 'enforce' else 'would get'} priority class {cls}"
    )
    response = allow(review.uid, [msg] if mode == "warn" else (), ops if mode == "enforce" else None)
    return Outcome(response, "warn" if mode == "warn" else "allow", "fair-share", mode, msg, tenant, model, asked)
