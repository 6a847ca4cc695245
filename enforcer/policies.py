"""The policies: pure functions from (what is asked, the decision table's row, what was just admitted) to a verdict.

No I/O and no query: the decision table is the analytics' `decisions` output, loaded into memory by the server.
Each policy runs in a mode: `enforce` (a breach denies), `warn` (a breach admits with a warning) or `dry-run`
(a breach is recorded in the audit only). Messages name the tenant, the policy and the numbers, in words a user
reads in `kubectl`'s output: "tenant vision uses 14 of 16 NVIDIA H100 80GB HBM3 GPUs; this Job asks 4".
"""

from __future__ import annotations

import math
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


def idle_hog(
    tenant: str,
    holds: tuple[IdleHold, ...],
    now_s: float,
    asked: float,
    what: str,
    mode: str,
    max_idle_gpus: float,
    min_idle_s: float,
) -> Verdict | None:
    """A tenant holding more than `max_idle_gpus` allocated-but-idle GPUs, each idle for at least `min_idle_s`,
    gets no new GPU workloads; the message names the idle pods, the most GPUs first, with how long each idled."""
    if asked <= 0:
        return None
    long_idle = [h for h in holds if now_s - h.idle_since_s >= min_idle_s]
    idle = sum(h.share for h in long_idle)
    if idle <= max_idle_gpus + 1e-9:
        return None
    per_pod: dict[str, list[float]] = {}  # namespace/pod -> [GPUs, longest idle seconds]
    for h in long_idle:
        p = per_pod.setdefault(f"{h.namespace}/{h.pod}", [0.0, 0.0])
        p[0] += h.share
        p[1] = max(p[1], now_s - h.idle_since_s)
    top = sorted(per_pod.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
    named = ", ".join(f"{pod} ({_n(g)} GPU{'s' if g != 1 else ''}, {_hours(s)})" for pod, (g, s) in top[:3])
    more = f" and {len(top) - 3} more" if len(top) > 3 else ""
    return Verdict(
        "idle-hog",
        mode,
        True,
        f"tenant {tenant} holds {_n(idle)} GPUs idle for {_hours(min_idle_s)} or more (limit {_n(max_idle_gpus)}): "
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
