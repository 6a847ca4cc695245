"""One admission decision: the review, the decision table and the recent admissions in; the response and its audit
row out. Pure: the clock, the table and the recent admissions are arguments and nothing is changed; an admission
that counts against quotas comes back in the Outcome (`counted`) for the caller to record (`Recent.record`, as the
server does under its lock). So every policy x mode is tested without a server.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuledger.classify import classify_object
from gpuledger.config import DEFAULT_CLASS_POLICIES, ClassPolicy, ClassRule, Config, EnforcerConfig
from gpuledger.enforcer import policies
from gpuledger.enforcer.review import Review, allow, deny
from gpuledger.enforcer.workload import Ask, AskError, ask, controller_kind
from gpuledger.vendors import Resource


@dataclass(frozen=True)
class Settings:
    """The enforcer's settings: the config's [enforcer] table as declared and validated in gpuledger/config.py (its
    defaults are there, not here), the namespace -> tenant map of its [[tenants]], the priority classes fair
    share sets, and the workload classes: the [[classes]] rules and each class's [class_policy.<class>]."""

    tenant_of_namespace: dict[str, str]
    enforcer: EnforcerConfig = EnforcerConfig()
    priority_classes: tuple[tuple[float, str], ...] = ((0.5, "gpu-high"), (0.25, "gpu-normal"), (0.0, "gpu-low"))
    class_rules: tuple[ClassRule, ...] = ()
    class_policy: Mapping[str, ClassPolicy] = field(default_factory=lambda: dict(DEFAULT_CLASS_POLICIES))
    # the config's [[accelerators]]: resource names read as GPU asks beside the built-in ones (gpuledger/vendors.py)
    accelerators: Mapping[str, Resource] = field(default_factory=dict)

    @classmethod
    def of(cls, cfg: Config) -> Settings:
        return cls(
            cfg.tenant_of_namespace(),
            cfg.enforcer,
            class_rules=tuple(cfg.classes),
            class_policy=cfg.class_policy,
            accelerators=cfg.accelerator_resources(),
        )

    @functools.cached_property
    def idle_after_s(self) -> dict[str, float | None]:
        """Class -> how long its GPUs idle before they count against the idle-hog gate; None for a class that is not
        reclaimed (inference and other by default): their idle GPUs are not the waste the gate is about (a
        service idles at night by design), as they are not what `gpuledger reclaim` takes back."""
        return {c: p.idle_after_h * 3600 if p.reclaim else None for c, p in self.class_policy.items()}

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
    workload_class: str | None = None  # what the object is (gpuledger/classify.py); None without an object


# An object whose controller is one of these was decided when its controller was: a Job's pods, a JobSet's Jobs,
# a RayJob's RayCluster and its pods, the Kueue Workload of a Job. Checking them again would count the same GPUs
# twice (the Job's admission is still in the burst window when its pods arrive) and could deny half a Job.
DECIDED_WITH_OWNER = frozenset({"Job", "JobSet", "RayJob", "RayCluster"})


def workload_class(review: Review, s: Settings) -> str | None:
    """The class of the object under review, by the rules the k8s source classes its pods with
    (gpuledger/classify.py): its `gpuledger.io/class` label, the config's [[classes]] rows, its own kind (a Job is
    training, a Notebook a notebook), a pod's ownerReferences and labels. The webhook reads no other object: a pod
    whose owner chain goes on above its direct owner (a StatefulSet's Notebook) is classed by the controllers'
    labels, as the source is when it may not read the owner."""
    obj = review.obj
    if obj is None:
        return None
    if not isinstance(obj.get("kind"), str) or not isinstance(obj.get("apiVersion"), str):
        # the API server sends both; a review built by hand may not: the request's kind says the same
        obj = {**obj, "kind": review.kind, "apiVersion": f"{review.group}/{review.version}".lstrip("/")}
    return classify_object(obj, s.class_rules, review.namespace or None).workload_class


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
    `counted`; /mutate runs the priority class (the workload class's, else fair share's) only, never denies on a
    policy and counts nothing: the API server calls both for the same object, the mutating webhook first. Changes
    nothing: `recent` is only read. The Outcome names the object's workload class, for the audit.

    `labelled`: namespace -> tenant from the namespaces' labels, for namespaces the config does not map."""
    wc = workload_class(review, s) if review.operation in ("CREATE", "UPDATE") else None
    a: Ask | AskError | None = None
    if review.operation in ("CREATE", "UPDATE") and review.obj is not None:
        try:
            a = ask(review.kind, review.obj, s.accelerators)
        except AskError as e:
            a = e
    o = _decide(review, table, s, recent, now, mutate, labelled, wc, a)
    if isinstance(a, Ask) and a.unmapped and not mutate:  # said once, by /validate
        o = _unmapped(review, o, a.unmapped)
    return dataclasses.replace(o, workload_class=wc) if wc is not None else o


def _unmapped(review: Review, o: Outcome, names: tuple[str, ...]) -> Outcome:
    """The outcome with a warning naming the accelerator-like resources no rule or [[accelerators]] row maps: the
    object is admitted (unless a policy denies it for the GPUs it does ask), and those are counted nowhere."""
    what = f"{review.kind} {review.namespace}/{review.name or '(generated)'}"
    msg = (
        f"{what} asks for {', '.join(names)}, which looks like an accelerator but no [[accelerators]] row in "
        "gpuledger's config maps it: not counted in any quota or budget"
    )
    response = o.response["response"]
    warnings = [msg, *response.get("warnings", [])]
    if response["allowed"]:
        new = allow(response["uid"], warnings)
        if "patch" in response:  # keep /mutate's patch as it was (never reached: /mutate does not warn of it)
            new["response"] |= {k: response[k] for k in ("patch", "patchType")}
    else:
        st = response["status"]
        new = deny(response["uid"], st["message"], st["reason"], st["code"], warnings)
    reason = f"{msg}; {o.reason}" if o.reason else msg
    return dataclasses.replace(o, response=new, decision="warn" if o.decision == "allow" else o.decision, reason=reason)


def _decide(
    review: Review,
    table: Table | None,
    s: Settings,
    recent: Recent,
    now: dt.datetime,
    mutate: bool,
    labelled: Mapping[str, str] | None,
    wc: str | None,
    a: Ask | AskError | None,
) -> Outcome:
    uid = review.uid
    policy = s.class_policy.get(wc) if wc is not None else None

    def plain(why: str = "", model: str | None = None, gpus: float = 0) -> Outcome:
        """Admitted with no policy involved (and, when `why` is given, a warning saying it)."""
        return Outcome(
            allow(uid, [why] if why else ()), "warn" if why else "allow", None, None, why, tenant, model, gpus
        )

    tenant = s.tenant_of_namespace.get(review.namespace)
    if tenant is None and labelled is not None:
        tenant = labelled.get(review.namespace)
    if a is None:  # not a CREATE or UPDATE, or no object
        return plain()
    if isinstance(a, AskError):
        if mutate:  # the validating call refuses it, once
            return plain()
        msg = f"{review.kind} {review.namespace}/{review.name or '(generated)'}: {a}"
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
        if mutate:  # the validating call says so (and denies, with failure mode deny); a class's own priority
            # class is the config's, not the table's: it is still set
            return _priority(review, None, s, tenant, a.model, asked, wc, policy)
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
        return _priority(review, table, s, tenant, a.model, asked, wc, policy)
    now_s = now.timestamp()
    verdicts = []
    for model in ([a.model] if a.model else []) + [None]:
        row = table.row(tenant, model)
        held_recent = recent.gpus(now_s, tenant, model)
        v = policies.quota(row, asked, held_recent, what, s.modes["quota"])
        verdicts.append(policies.may_exceed(v, wc) if policy is not None and policy.may_exceed_quota else v)
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
                    s.idle_after_s,
                )
            )
    verdicts = [v for v in verdicts if v is not None]
    denials = [v for v in verdicts if v.breach and v.mode == "enforce"]
    warned = [v for v in verdicts if (v.breach and v.mode == "warn") or v.warning]
    warnings = [v.message for v in warned]
    dry = [v for v in verdicts if (v.breach or v.exempt) and v.mode == "dry-run"]
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


def _priority(
    review: Review,
    table: Table | None,
    s: Settings,
    tenant: str,
    model: str | None,
    asked: float,
    wc: str | None,
    policy: ClassPolicy | None,
) -> Outcome:
    """/mutate: the workload class's PriorityClass when its [class_policy] names one, else the tenant's fair-share
    tier (`table` None: the table is stale or missing, and only a class's own is set). Both under the fair-share
    mode, the one switch for whether the webhook changes priorities: enforce sets it, warn says which it would set,
    dry-run records it in the audit only. Kinds without a template to patch (a bare Pod) get nothing."""
    row = table.row(tenant, None) if table is not None else None
    fairshare = row.fairshare if row else None
    cls, source = policies.choose_priority(policy.priority_class if policy else None, fairshare, s.priority_classes)
    ops = policies.priority_patch(review.kind, review.obj, cls) if cls else []
    if not ops:
        return Outcome(allow(review.uid), "allow", None, None, "", tenant, model, asked)  # nothing to set
    mode = s.modes["fair-share"]
    verb = "gets" if mode == "enforce" else "would get"
    if source == "class":
        msg = f"workload class {wc}: this {review.kind} {verb} priority class {cls}"
        tier = policies.priority_class(fairshare, s.priority_classes)
        if tier and tier != cls:
            msg += f" (not tenant {tenant}'s fair-share {tier})"
        audited = "class-priority"
    else:
        msg = f"tenant {tenant}'s fair-share factor is {fairshare:.2f}: this {review.kind} {verb} priority class {cls}"
        audited = "fair-share"
    response = allow(review.uid, [msg] if mode == "warn" else (), ops if mode == "enforce" else None)
    return Outcome(response, "warn" if mode == "warn" else "allow", audited, mode, msg, tenant, model, asked)
