"""One pass of `gpuledger reclaim`: the lake's open jobs and their recent samples, their idle streaks, the plan,
and (with --apply) the API calls and their reclaim_actions rows. A dry run makes no API call and writes nothing:
it prints what a pass would do now.

Reads: gpu_allocations (the GPUs each open job holds, as of the last analysis), jobs (each job's latest state: its
class, owner, queue; only those still running), gpu_samples (from `read_from` to now: enough to see the longest
limit of a reclaimable class, the grace period and an hour more) and reclaim_actions (what was done before).
"""

from __future__ import annotations

import datetime as dt
import getpass
import logging
import os
import secrets
import socket
from dataclasses import dataclass, field

import polars as pl

from gpuledger.config import Config
from gpuledger.enforcer.reclaim.kube import Kube
from gpuledger.enforcer.reclaim.plan import FREEING, Job, Past, Step, in_run, plan
from gpuledger.enforcer.reclaim.streaks import gpu_streaks, job_streaks
from gpuledger.lake import LakeWriter, frame_from_rows, has_data, scan
from gpuledger.store import LakeRef, open_store

log = logging.getLogger(__name__)
US = 1_000_000
ACTOR_ENV = "GPULEDGER_ACTOR"


def actor(environ=os.environ) -> str:
    """Who acts, for the record: GPULEDGER_ACTOR (a deployment sets its service account's name there), else
    user@host."""
    if environ.get(ACTOR_ENV, "").strip():
        return environ[ACTOR_ENV].strip()
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in a container without a passwd entry
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


def lookback(cfg: Config) -> dt.timedelta:
    """How far back samples are read: the longest limit of a class that may be reclaimed, the grace, an hour."""
    limits = [p.idle_after_h for p in cfg.class_policy.values() if p.reclaim] or [0.0]
    return dt.timedelta(hours=max(limits) + 1) + dt.timedelta(seconds=cfg.reclaim.grace_s)


def open_jobs(store, cfg: Config) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the GPUs open jobs hold: job_id, gpu_uuid, start, share; the jobs: their latest state, running only)."""
    if not has_data(store, "gpu_allocations"):
        return pl.DataFrame(), pl.DataFrame()
    allocs = (
        scan(store, "gpu_allocations")
        .filter(pl.col("open") & (pl.col("cluster") == cfg.cluster) & pl.col("gpu_uuid").is_not_null())
        .group_by("job_id", "gpu_uuid")
        .agg(pl.col("start").min(), pl.col("share").sum(), pl.col("gpu_model").first())
        .collect()
    )
    ids = allocs["job_id"].unique().implode()
    jobs = (
        scan(store, "jobs")
        .filter((pl.col("cluster") == cfg.cluster) & pl.col("job_id").is_in(ids))
        .group_by("job_id")
        .agg(pl.all().sort_by("updated_at").last())  # each job's latest state
        .filter(pl.col("status") == "running")
        .collect()
    )
    return allocs.filter(pl.col("job_id").is_in(jobs["job_id"].implode())), jobs


def read_samples(store, cfg: Config, gpus: pl.Series, read_from: dt.datetime, now: dt.datetime) -> pl.LazyFrame:
    """ts, gpu_uuid, util_gpu_pct of these GPUs from `read_from` to `now`, one day's partition at a time."""
    days, d = [], read_from.date()
    while d <= now.date():
        days.append(scan(store, "gpu_samples", date=d))
        d += dt.timedelta(days=1)
    return (
        pl.concat(days, how="vertical")
        .filter(
            (pl.col("cluster") == cfg.cluster)
            & pl.col("ts").is_between(read_from, now)
            & pl.col("gpu_uuid").is_in(gpus.implode())
        )
        .select("ts", "gpu_uuid", "util_gpu_pct")
    )


def history(store, cfg: Config, ids: pl.Series) -> dict[str, list[Past]]:
    if not has_data(store, "reclaim_actions"):
        return {}
    rows = (
        scan(store, "reclaim_actions")
        .filter((pl.col("cluster") == cfg.cluster) & pl.col("job_id").is_in(ids.implode()))
        .select("job_id", "ts", "action", "result", "deadline")
        .collect()
    )
    out: dict[str, list[Past]] = {}
    for r in rows.iter_rows(named=True):
        out.setdefault(r["job_id"], []).append(Past(r["ts"], r["action"], r["result"], r["deadline"]))
    return out


def idle_jobs(store, cfg: Config, now: dt.datetime) -> tuple[list[Job], dict[str, list[Past]]]:
    """The open jobs with their streaks now, and what reclaim did to them before."""
    allocs, jobs = open_jobs(store, cfg)
    if jobs.is_empty():
        return [], {}
    read_from = now - lookback(cfg)
    threshold = {c: p.idle_below_pct for c, p in cfg.class_policy.items()}
    jobs = jobs.with_columns(pl.col("workload_class").fill_null("other").alias("_cls"))
    holds = allocs.join(jobs.select("job_id", "_cls"), on="job_id").with_columns(
        pl.col("_cls")
        .replace_strict(threshold, default=threshold["other"], return_dtype=pl.Float64)
        .alias("idle_below_pct")
    )
    samples = read_samples(store, cfg, holds["gpu_uuid"].unique(), read_from, now)
    per_gpu = gpu_streaks(
        samples,
        holds.lazy(),
        now,
        window_s=cfg.reclaim.window_s,
        max_gap_s=cfg.reclaim.max_gap_s,
        read_from=read_from,
    )
    streaks = job_streaks(per_gpu, holds.lazy()).collect()
    held = allocs.group_by("job_id").agg(pl.col("share").sum().alias("_gpus"), pl.col("gpu_model").first())
    table = jobs.join(streaks, on="job_id").join(held, on="job_id", suffix="_held")
    out = [
        Job(
            job_id=r["job_id"],
            tenant=r["tenant"],
            namespace=r["namespace"],
            pod=r["pod"],
            workload_class=r["workload_class"],
            owner_kind=r["owner_kind"],
            owner_name=r["owner_name"],
            queue=r["queue"],
            gpu_model=r["gpu_model"] or r["gpu_model_held"],
            gpus=float(r["_gpus"] or 0.0),
            idle_since=r["idle_since"],
            idle_s=r["idle_s"],
            since_lookback=r["since_lookback"],
        )
        for r in table.iter_rows(named=True)
    ]
    return out, history(store, cfg, table["job_id"])


@dataclass
class Outcome:
    step: Step
    calls: list[str] = field(default_factory=list)
    result: str = "dry run"
    target: tuple[str | None, str | None] = (None, None)
    recorded: bool = False


@dataclass
class Pass:
    at: dt.datetime
    applied: bool
    outcomes: list[Outcome]
    waiting: list[Step]
    jobs_seen: int

    def freeing(self) -> list[Step]:
        """Every job this pass is giving back, now or after its warning: warned, waiting or acted on."""
        return [o.step for o in self.outcomes if o.step.action != "skip"] + list(self.waiting)

    def gpu_hours_per_day(self) -> float:
        return sum(s.gpu_hours_per_day for s in self.freeing())

    def usd_per_day(self) -> float:
        return sum(s.usd_per_day or 0.0 for s in self.freeing())


def run_once(
    lake: LakeRef, cfg: Config, now: dt.datetime | None = None, kube: Kube | None = None, by: str | None = None
) -> Pass:
    """One pass: plan at `now` (the wall clock by default); with `kube`, make the calls and record every one."""
    store = open_store(lake)
    now = now or dt.datetime.now(dt.timezone.utc)
    jobs, past = idle_jobs(store, cfg, now)
    steps, waiting = plan(jobs, past, cfg, now)
    outcomes = [Outcome(s) for s in steps]
    if kube is None:
        return Pass(now, False, outcomes, waiting, len(jobs))
    by = by or actor()
    rows = []
    for o in outcomes:
        s = o.step
        if s.action == "warn":
            o.calls, o.result = kube.warn(s)
        elif s.action in FREEING:
            o.calls, o.result, o.target = kube.act(s)
        else:  # skip: nothing to call
            o.result = "ok"
        action, reason = s.action, s.reason
        if o.result == "exempt":
            if any(p.action == "skip" for p in past.get(s.job.job_id, ()) if in_run(s.job, p)):
                continue  # recorded once per idle run
            action, reason, o.result = "skip", f"{s.reason}; the pod is labelled gpuledger.io/reclaim=never", "ok"
        if o.result != "ok":
            log.warning(
                "reclaim: %s %s/%s failed (%s); tried again next pass", action, s.job.namespace, s.job.pod, o.result
            )
        o.recorded = True
        rows.append(_row(cfg, by, now, s, action, reason, o))
    if rows:
        w = LakeWriter(store)
        w.init()
        w.write(
            "reclaim_actions",
            frame_from_rows("reclaim_actions", rows),
            f"reclaim-{int(now.timestamp() * US)}-{secrets.token_hex(4)}",
        )
    return Pass(now, True, outcomes, waiting, len(jobs))


def _row(cfg: Config, by: str, ts: dt.datetime, s: Step, action: str, reason: str, o: Outcome) -> dict:
    j = s.job
    us = lambda t: None if t is None else int(t.timestamp() * US)  # noqa: E731
    return {
        "ts": us(ts),
        "cluster": cfg.cluster,
        "actor": by,
        "action": action,
        "job_id": j.job_id,
        "tenant": j.tenant,
        "namespace": j.namespace,
        "pod": j.pod,
        "owner_kind": o.target[0],
        "owner_name": o.target[1],
        "workload_class": j.cls,
        "gpu_model": j.gpu_model,
        "gpus": j.gpus,
        "idle_since": us(j.idle_since),
        "idle_s": j.idle_s,
        "deadline": us(s.deadline) if action == "warn" else None,
        "reason": reason,
        "api_call": "; ".join(o.calls) or None,
        "result": o.result,
        "gpu_hours_freed_per_day": s.gpu_hours_per_day,
        "usd_per_day": s.usd_per_day,
    }


def render(p: Pass) -> list[str]:
    """The pass as lines for a person: one per step, then the totals."""
    head = "applied" if p.applied else "dry run (no API call made, nothing recorded)"
    lines = [f"reclaim at {p.at:%Y-%m-%dT%H:%M:%SZ}, {head}: {p.jobs_seen} open job(s) read"]
    for o in p.outcomes:
        s, j = o.step, o.step.job
        verb = s.action if p.applied else f"would {s.action}"
        usd = "unpriced" if s.usd_per_day is None else f"{s.usd_per_day:.2f} USD/day"
        tail = f" -> {o.result}" if p.applied else ""
        lines.append(
            f"  {verb:<16} {j.tenant or '-'} {j.namespace}/{j.pod} ({j.cls}, {j.gpus:g} GPU {j.gpu_model or '?'}, "
            f"{s.gpu_hours_per_day:g} GPU-h/day, {usd}): {s.reason}{tail}"
        )
    for s in p.waiting:
        j = s.job
        lines.append(f"  {'waiting':<16} {j.tenant or '-'} {j.namespace}/{j.pod} ({j.cls}): {s.reason}")
    n = len(p.freeing())
    lines.append(
        f"{'frees' if p.applied else 'would free'} {p.gpu_hours_per_day():.1f} GPU-hours a day "
        f"({p.usd_per_day():.2f} USD a day at the rate card) from {n} job(s)"
    )
    return lines
