"""What `gpuledger reclaim` does about each idle job, as a pure function of the jobs' streaks, the config, the
reclaim_actions already recorded and the time (docs/reclaim.md).

For a job idle (streaks.py) at least its class's `idle_after_h`, whose class may be reclaimed and whose tenant is
not exempt:
- no warning yet in this idle run: warn (an Event on the pod, and the deadline in an annotation);
- warned, and the deadline (warning + `grace_s`) has passed: the action its class and owner allow: a notebook's pod
  is deleted (its controller makes a new one when its owner comes back); a job Kueue admitted (it has a queue) is
  deactivated (its Workload's spec.active: false, which Kueue's maintainers point to for idle suspension); a plain
  batch Job is suspended (spec.suspend: true); anything else (a bare pod, an owner that cannot be suspended) is
  skipped, as nothing gives it back without losing its work. Inference whose class policy sets reclaim = true is
  warned and never acted on: a service idle at night is not done, and deleting its pod only makes its Deployment
  start another;
- acted on already in this run of idleness (a call that succeeded): nothing, until the collector sees it end.
A row of the run counts when it was recorded at or after the run's start (or the run reaches back past what was
read). A failed call records its error and is made again at the next pass. An exempt tenant's job is recorded as
skipped once per idle run.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from gpuledger.config import Config, Rate, match_model

FREEING = ("deactivate", "suspend", "delete")
NO_CLASS = "other"  # a job recorded before classes existed: the class nobody reclaims by default


@dataclass(frozen=True)
class Job:
    """An open job holding GPUs, with its idle streak (streaks.job_streaks) and what the lake knows of it."""

    job_id: str
    tenant: str | None
    namespace: str | None
    pod: str | None
    workload_class: str | None
    owner_kind: str | None
    owner_name: str | None
    queue: str | None
    gpu_model: str | None
    gpus: float
    idle_since: dt.datetime | None
    idle_s: float
    since_lookback: bool = False

    @property
    def cls(self) -> str:
        return self.workload_class or NO_CLASS


@dataclass(frozen=True)
class Past:
    """A reclaim_actions row of the job, as far as planning needs it."""

    ts: dt.datetime
    action: str
    result: str
    deadline: dt.datetime | None = None


@dataclass(frozen=True)
class Step:
    job: Job
    action: str  # warn, deactivate, suspend, delete, skip
    reason: str
    gpu_hours_per_day: float
    usd_per_day: float | None
    deadline: dt.datetime | None = None  # warn: when the action may follow


def rate_at(rates: tuple[Rate, ...], model: str | None, at: dt.datetime) -> float | None:
    """USD per GPU-hour of `model` at `at`: the rate card's entry for it (config.match_model) in force then."""
    key = match_model(model, {r.gpu_model for r in rates})
    live = [r for r in rates if r.gpu_model == key and r.effective_from <= at]
    return max(live, key=lambda r: r.effective_from).usd_per_gpu_hour if live else None


def in_run(job: Job, past: Past) -> bool:
    """Whether `past` was recorded in the job's current run of idleness."""
    return job.since_lookback or (job.idle_since is not None and past.ts >= job.idle_since)


def freeing_action(job: Job) -> tuple[str | None, str]:
    """The action that gives the job's GPUs back, and why (None: warn only, or nothing can)."""
    if job.cls == "notebook":
        return "delete", "notebook: its pod is deleted, its controller starts another when its owner returns"
    if job.cls == "inference":
        return None, "inference: warned only, a service is never stopped by reclaim"
    if job.queue:
        return "deactivate", f"managed by Kueue (queue {job.queue}): its Workload is deactivated"
    if job.owner_kind == "Job":
        return "suspend", "a batch Job: suspended"
    return None, f"no owner that can be suspended ({job.owner_kind or 'a bare pod'}): deleting it would lose its work"


def plan(
    jobs: list[Job], history: dict[str, list[Past]], cfg: Config, now: dt.datetime
) -> tuple[list[Step], list[Step]]:
    """(steps to take now, jobs past their limit that wait: warned, before the deadline); see the module."""
    todo: list[Step] = []
    waiting: list[Step] = []
    for job in sorted(jobs, key=lambda j: (j.tenant or "", j.namespace or "", j.pod or "", j.job_id)):
        policy = cfg.class_policy[job.cls]
        limit_s = policy.idle_after_h * 3600
        if job.idle_s < limit_s or not policy.reclaim:
            continue
        rate = rate_at(cfg.rates, job.gpu_model, now)
        per_day = job.gpus * 24.0
        usd = None if rate is None else per_day * rate
        at_least = "at least " if job.since_lookback else ""  # idle through all the samples read
        why = f"{job.cls} idle {at_least}{job.idle_s / 3600:.2f} h (limit {policy.idle_after_h:g} h)"

        def step(action: str, reason: str, deadline: dt.datetime | None = None, job=job, per_day=per_day, usd=usd):
            return Step(job, action, reason, per_day, usd, deadline)

        run = [p for p in history.get(job.job_id, ()) if in_run(job, p)]
        if any(p.action in FREEING and p.result == "ok" for p in run):
            continue
        if job.tenant in cfg.reclaim.exempt_tenants:
            if not any(p.action == "skip" for p in run):
                todo.append(step("skip", f"{why}; tenant {job.tenant} is exempt ([reclaim] exempt_tenants)"))
            continue
        warned = [p for p in run if p.action == "warn" and p.result == "ok"]
        if not warned:
            deadline = now + dt.timedelta(seconds=cfg.reclaim.grace_s)
            todo.append(step("warn", f"{why}; acts after {deadline:%Y-%m-%dT%H:%M:%SZ} if still idle", deadline))
            continue
        deadline = min(p.deadline or p.ts for p in warned)
        action, because = freeing_action(job)
        if now < deadline:
            waiting.append(step("wait", f"{why}; warned, acts after {deadline:%Y-%m-%dT%H:%M:%SZ}", deadline))
        elif action is None:
            if not any(p.action == "skip" for p in run):
                todo.append(step("skip", f"{why}; {because}"))
        else:
            todo.append(step(action, f"{why}; warned, deadline {deadline:%Y-%m-%dT%H:%M:%SZ} passed; {because}"))
    return todo, waiting
