"""One admission decision: the review, the decision table and the recent admissions in; the response and its audit
row out. Pure: the clock, the table and the recent admissions are arguments and nothing is changed; an admission
that counts against quotas comes back in the Outcome (`counted`) for the caller to record (`Recent.record`, as the
server does under its lock). So every policy x mode is tested without a server.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuledger.config import Config, EnforcerConfig
from gpuledger.enforcer import policies
from gpuledger.enforcer.review import Review, allow, deny
from gpuledger.enforcer.workload import AskError, ask, controller_kind


@dataclass(frozen=True)
class Settings:
    """The enforcer's settings: the config's [enforcer] table as declared and validated in gpuledger/config.py (its
    defaults are there, not here), the namespace -> tenant map of its [[tenants]], and the priority classes fair
    share sets."""

    tenant_of_namespace: dict[str, str]
    enforcer: EnforcerConfig = EnforcerConfig()
    priority_classes: tuple[tuple[float, str], ...] = ((0.5, "gpu-high"), (0.25, "gpu-normal"), (0.0, "gpu-low"))

    @classmethod
    def of(cls, cfg: Config) -> Settings:
        return cls(cfg.tenant_of_namespace(), cfg.enforcer)

    @property
    def modes(self) -> dict[str, str]:
        """Each policy's mode, by the name the audit gives the policy."""
        e = self.enforcer
        return {
            "quota": e.quota_mode,
            "budget": e.budget_mode,
            "idle-hog": e.idle_hog_mode,
            "fair-share": e.fair_share_mode,
        }

    @property
    def idle_min_s(self) -> float:
        return self.enforcer.idle_min_h * 3600


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
    events, and summing them on every request made the webhook's latency grow with its own load. `record` (the
    caller's, after each decision) drops what expired; `gpus` (decide's) only reads, taking off the few events
    that expired since the last record.
    """

    def __init__(self, window_s: float):
        self.window_s = window_s
        self._events: deque[tuple[float, str, str | None, float]] = deque()
        self._sums: dict[tuple[str, str | None], float] = {}

    def record(self, now_s: float, o: Outcome) -> None:
        """After a decision: drop what expired, and count its GPUs if it was an admission that counts."""
        while self._events and self._events[0][0] < now_s - self.window_s:
            _, t, m, g = self._events.popleft()
            self._sums[(t, m)] -= g
        if o.counted:
            self.add(now_s, o.tenant, o.gpu_model, o.gpus)

    def add(self, now_s: float, tenant: str, model: str | None, gpus: float) -> None:
        model = model_key(model)  # one count per model however the pods spell it
        self._events.append((now_s, tenant, model, gpus))
        self._sums[(tenant, model)] = self._sums.get((tenant, model), 0) + gpus

    def gpus(self, now_s: float, tenant: str, model: str | None) -> float:
        """GPUs admitted within the window before `now_s` (changes nothing)."""
        model = model_key(model)
        sums = self._sums
        cutoff = now_s - self.window_s
        if self._events and self._events[0][0] < cutoff:  # expired since the last record: take them off a copy
            sums = dict(sums)
            for ts, t, m, g in self._events:
                if ts >= cutoff:
                    break
                sums[(t, m)] -= g
        if model is not None:
            return sums.get((tenant, model), 0)
        return sum(n for (t, _), n in sums.items() if t == tenant)


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
    counted: bool = False  # an admission by /validate (not a dry run): the caller records it in Recent


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
    """One admission decision. /validate (mutate False) runs quota, budget and idle-hog and marks what it admits as
    `counted`; /mutate runs fair share only, never denies on a policy and counts nothing: the API server calls both
    for the same object, the mutating webhook first. Changes nothing: `recent` is only read.

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
    en = s.enforcer
    state, age = table_state(table, now, en.max_table_age_s)
    if state != "fresh":
        if mutate:  # the validating call says so (and denies, with failure mode deny)
            return plain(model=a.model, gpus=asked)
        why = (
            "gpuledger has no decision table yet"
            if age is None
            else f"gpuledger's decision table is {age / 60:.0f} min old (limit {en.max_table_age_s / 60:.0f} min)"
        )
        if en.failure_mode == "deny":
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
            verdicts.append(policies.budget(row, asked, what, s.modes["budget"], en.budget_warn_pct))
            verdicts.append(
                policies.idle_hog(
                    tenant,
                    table.idle.get(tenant, ()),
                    now_s,
                    asked,
                    what,
                    s.modes["idle-hog"],
                    en.idle_max_gpus,
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
        counted=not review.dry_run,
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
