"""The policies: pure functions from (what is asked, the decision table's row, what was just admitted) to a verdict.

No I/O and no query: the decision table is the analytics' `decisions` output, loaded into memory by the server.
Each policy runs in a mode: `enforce` (a breach denies), `warn` (a breach admits with a warning) or `dry-run`
(a breach is recorded in the audit only). Messages name the tenant, the policy and the numbers, in words a user
reads in `kubectl`'s output: "tenant vision uses 14 of 16 NVIDIA H100 80GB HBM3 GPUs; this Job asks 4".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

MODES = ("enforce", "warn", "dry-run")
POLICIES = ("quota", "budget", "idle-hog", "fair-share")
ANY_MODEL = "any model"


@dataclass(frozen=True)
class TenantRow:
    """What the decision table says of one tenant and GPU model (model None: all models together)."""

    tenant: str
    gpu_model: str | None
    allocated_gpus: float
    quota_gpus: float | None  # None: no quota
    budget_usd: float | None = None
    spent_usd: float = 0.0
    fairshare: float | None = None
    budget_gpu_h: float | None = None
    spent_gpu_h: float = 0.0


@dataclass(frozen=True)
class Verdict:
    policy: str
    mode: str
    breach: bool  # the policy's rule is broken (deny in enforce mode)
    message: str
    warning: bool = False  # a notice short of a breach (budget at 80%), sent as a warning in every mode
    exempt: bool = False  # a breach the workload's class may make (may_exceed_quota): admitted, and noted


def quota(row: TenantRow | None, asked: float, recent: float, what: str, mode: str) -> Verdict | None:
    """Concurrent GPUs: allocated (decision table) + admitted in the last seconds (not yet in it) + asked <= quota."""
    if row is None or row.quota_gpus is None or asked <= 0:
        return None
    held = row.allocated_gpus + recent
    model = row.gpu_model or ANY_MODEL
    if held + asked <= row.quota_gpus + 1e-9:
        return Verdict("quota", mode, False, "")
    return Verdict(
        "quota",
        mode,
        True,
        f"tenant {row.tenant} uses {_n(held)} of {_n(row.quota_gpus)} {model} GPUs; this {what} asks {_n(asked)} "
        f"(quota exceeded by {_n(held + asked - row.quota_gpus)})",
    )


def may_exceed(v: Verdict | None, workload_class: str) -> Verdict | None:
    """A quota breach by a workload whose class may exceed quota ([class_policy.<class>] may_exceed_quota): admitted,
    with the breach's message and the class that excuses it. A warning in enforce and warn modes; in dry-run mode
    the audit notes it, as it notes every dry-run breach, and the user sees nothing. The GPUs still count: the
    admission is recorded in the burst window and the analytics count what it holds, so the next workload of
    another class meets the quota with them."""
    if v is None or not v.breach:
        return v
    msg = f"{v.message}; admitted: class {workload_class} may exceed quota"
    return Verdict(v.policy, v.mode, False, msg, warning=v.mode != "dry-run", exempt=True)


def budget(row: TenantRow | None, asked: float, what: str, mode: str, warn_at_pct: float = 80.0) -> Verdict | None:
    """Monthly budgets, in USD and/or GPU-hours: a breach once either is spent; a warning from `warn_at_pct`.
    A breach outranks a warning; of two breaches (or two warnings), the USD one is named."""
    if row is None or asked <= 0:
        return None
    found = []
    if row.budget_usd is not None and row.budget_usd > 0:
        pct = 100 * row.spent_usd / row.budget_usd
        words = f"tenant {row.tenant} has spent ${row.spent_usd:,.0f} of its ${row.budget_usd:,.0f} monthly budget"
        found.append((row.spent_usd >= row.budget_usd, pct, words))
    if row.budget_gpu_h is not None and row.budget_gpu_h > 0:
        pct = 100 * row.spent_gpu_h / row.budget_gpu_h
        words = (
            f"tenant {row.tenant} has used {row.spent_gpu_h:,.0f} of its {row.budget_gpu_h:,.0f} GPU-hour "
            "monthly budget"
        )
        found.append((row.spent_gpu_h >= row.budget_gpu_h, pct, words))
    if not found:
        return None
    for spent, pct, words in found:
        if spent:
            return Verdict("budget", mode, True, f"{words} ({pct:.0f}%); this {what} asks {_n(asked)} more GPUs")
    for _, pct, words in found:
        if pct >= warn_at_pct:
            return Verdict("budget", mode, False, f"{words} ({pct:.0f}%)", warning=True)
    return Verdict("budget", mode, False, "")


@dataclass(frozen=True)
class IdleHold:
    """One GPU (or share) a tenant's open job holds while it sits idle: a row of the analytics' idle_holds."""

    namespace: str
    pod: str
    gpu_model: str | None
    share: float
    idle_since_s: float  # UTC epoch seconds
    workload_class: str | None = None  # the job's class; None in rows the analytics wrote before the column


def idle_after_s(hold: IdleHold, by_class, default_s: float) -> float | None:
    """How long `hold` must have been idle to count against its tenant: its class's time (`by_class`: class ->
    seconds, or None for a class whose idle GPUs never count), or `default_s` for a hold of no known class."""
    if hold.workload_class in by_class:
        return by_class[hold.workload_class]
    return default_s


def idle_hog(
    tenant: str,
    holds: tuple[IdleHold, ...],
    now_s: float,
    asked: float,
    what: str,
    mode: str,
    max_idle_gpus: float,
    min_idle_s: float,
    by_class: Mapping[str, float | None] | None = None,
) -> Verdict | None:
    """A tenant holding more than `max_idle_gpus` allocated-but-idle GPUs, each idle for at least its class's time
    (`by_class`: class -> seconds, None for a class whose idle GPUs never count; `min_idle_s` for a hold of no known
    class), gets no new GPU workloads; the message names the idle pods, the most GPUs first, with how long each
    idled and, when known, its class."""
    if asked <= 0:
        return None
    by_class = by_class or {}
    long_idle, limits = [], {}
    for h in holds:
        after = idle_after_s(h, by_class, min_idle_s)
        if after is not None and now_s - h.idle_since_s >= after:
            long_idle.append(h)
            limits[h.workload_class] = after
    idle = sum(h.share for h in long_idle)
    if idle <= max_idle_gpus + 1e-9:
        return None
    per_pod: dict[str, list] = {}  # namespace/pod -> [GPUs, longest idle seconds, class]
    for h in long_idle:
        p = per_pod.setdefault(f"{h.namespace}/{h.pod}", [0.0, 0.0, h.workload_class])
        p[0] += h.share
        p[1] = max(p[1], now_s - h.idle_since_s)
    top = sorted(per_pod.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
    named = ", ".join(
        f"{pod} ({f'{c}, ' if c else ''}{_n(g)} GPU{'s' if g != 1 else ''}, {_hours(s)})" for pod, (g, s, c) in top[:3]
    )
    more = f" and {len(top) - 3} more" if len(top) > 3 else ""
    if len(set(limits.values())) == 1:  # one time for all (a single class, or none known): said once
        since = f"idle for {_hours(next(iter(limits.values())))} or more"
    else:  # each by its class's: "notebook 1 h, training 2 h" (a hold of no known class: "unclassed")
        each = sorted(limits.items(), key=lambda kv: (kv[1], kv[0] or "~"))
        since = "idle past their class's time (" + ", ".join(f"{c or 'unclassed'} {_hours(t)}" for c, t in each) + ")"
    return Verdict(
        "idle-hog",
        mode,
        True,
        f"tenant {tenant} holds {_n(idle)} GPUs {since} (limit {_n(max_idle_gpus)}): "
        f"{named}{more}; free them before this {what} asks {_n(asked)} more",
    )


def _hours(s: float) -> str:
    h = s / 3600
    return f"{h:.0f} h" if h >= 10 or float(round(h, 1)).is_integer() else f"{h:.1f} h"


def priority_class(fairshare: float | None, classes: tuple[tuple[float, str], ...]) -> str | None:
    """The class of the first threshold the factor reaches: classes sorted high to low, e.g.
    ((0.5, "gpu-high"), (0.25, "gpu-normal"), (0.0, "gpu-low")). Slurm's factor: 0.5 = at its share."""
    if fairshare is None or not math.isfinite(fairshare):
        return None
    for threshold, name in classes:
        if fairshare >= threshold:
            return name
    return classes[-1][1] if classes else None


def choose_priority(
    class_priority: str | None, fairshare: float | None, tiers: tuple[tuple[float, str], ...]
) -> tuple[str | None, str | None]:
    """(the PriorityClass to set, its source: "class" or "fair-share"). The workload class's own PriorityClass
    ([class_policy.<class>] priority_class) outranks the tenant's fair-share tier: it says what kind of work this is
    (a serving replica that must not wait behind batch), where fair share ranks tenants; Kubernetes takes one
    PriorityClass per pod, so one of the two is set (docs/workload-classes.md)."""
    if class_priority:
        return class_priority, "class"
    tier = priority_class(fairshare, tiers)
    return (tier, "fair-share") if tier else (None, None)


def priority_patch(kind: str, obj: dict, cls: str) -> list[dict]:
    """JSON Patch setting the priority the Kubernetes way for each kind, never a Pod's priorityClassName.

    The Priority admission plugin runs before webhooks and fills spec.priority from priorityClassName; a webhook
    changing the name afterwards makes the API server reject the pod. So: the Kueue label
    `kueue.x-k8s.io/priority-class` on the workload (Kueue's WorkloadPriorityClass), and for a plain Job its pod
    template's priorityClassName (the Job controller creates the pods after that). A Pod is left alone.
    """
    meta = obj.get("metadata")
    if kind == "Pod" or not isinstance(meta, dict):
        return []  # a Pod is never patched; an object without metadata cannot be (the API server sends none such)
    labels = meta.get("labels")
    if labels is not None and not isinstance(labels, dict):
        return []
    ops = []
    if labels is None:
        ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
    ops.append({"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1priority-class", "value": cls})
    if kind == "Job":
        ops.append({"op": "add", "path": "/spec/template/spec/priorityClassName", "value": cls})
    return ops


def _n(x: float) -> str:
    return f"{x:g}" if float(x).is_integer() else f"{x:.1f}"
