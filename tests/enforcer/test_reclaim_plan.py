"""What reclaim decides for each idle job (enforcer/reclaim/plan.py): warn, wait, act as the class and owner allow,
exempt, and never twice."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from gpuledger.config import ClassPolicy, Config, ReclaimConfig, defaults
from gpuledger.enforcer.reclaim.plan import Job, Past, plan, rate_at

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 11, 2, 12, tzinfo=UTC)
H = 3600.0
H100 = "NVIDIA H100 80GB HBM3"


def cfg(**reclaim) -> Config:
    c = defaults()
    return dataclasses.replace(c, reclaim=dataclasses.replace(ReclaimConfig(), **reclaim))


def job(job_id="j", cls="training", idle_h=3.0, **kw) -> Job:
    base = dict(
        job_id=job_id,
        tenant="vision",
        namespace="vision-train",
        pod=f"pod-{job_id}",
        workload_class=cls,
        owner_kind="Job",
        owner_name=f"job-{job_id}",
        queue=None,
        gpu_model=H100,
        gpus=2.0,
        idle_since=NOW - dt.timedelta(hours=idle_h),
        idle_s=idle_h * H,
    )
    return Job(**(base | kw))


def one(jobs, history=None, c=None, now=NOW):
    todo, waiting = plan(jobs, history or {}, c or cfg(), now)
    return [(s.job.job_id, s.action) for s in todo], [(s.job.job_id, s.action) for s in waiting], todo


def test_first_a_warning_with_the_deadline_and_the_price():
    todo, waiting, steps = one([job()])
    assert (todo, waiting) == ([("j", "warn")], [])
    s = steps[0]
    # grace 1800 s after now; 2 H100 x 24 h = 48 GPU-h a day at 2.49 USD = 119.52 USD a day
    assert s.deadline == NOW + dt.timedelta(seconds=1800)
    assert s.gpu_hours_per_day == 48.0
    assert s.usd_per_day == pytest.approx(119.52)


def test_under_the_class_limit_nothing():
    # training's limit is 2 h: 1.9 h is not enough; a notebook's is 1 h: 1.5 h is
    assert one([job(idle_h=1.9)])[0] == []
    assert one([job(cls="notebook", idle_h=1.5)])[0] == [("j", "warn")]


def test_classes_never_reclaimed_by_default():
    # inference and other (and a job without a class, counted as other) are not reclaimed by default
    assert one([job("a", cls="inference"), job("b", cls="other"), job("c", cls=None)])[0] == []


def warned(at: dt.datetime, grace_s=1800.0, result="ok") -> Past:
    return Past(at, "warn", result, at + dt.timedelta(seconds=grace_s))


def test_after_the_warning_it_waits_for_the_deadline_then_acts():
    h = {"j": [warned(NOW - dt.timedelta(minutes=10))]}
    assert one([job()], h)[:2] == ([], [("j", "wait")])
    h = {"j": [warned(NOW - dt.timedelta(minutes=30))]}  # deadline = now: due
    assert one([job()], h)[:2] == ([("j", "suspend")], [])


@pytest.mark.parametrize(
    ("kw", "action"),
    [
        (dict(cls="notebook", owner_kind="StatefulSet"), "delete"),
        (dict(queue="team-a", owner_kind="JobSet"), "deactivate"),
        (dict(queue="team-a", owner_kind="Job"), "deactivate"),  # Kueue manages it: its Workload, not the Job
        (dict(owner_kind="Job"), "suspend"),
        (dict(owner_kind=None, owner_name=None), "skip"),  # a bare pod: nothing recreates it
        (dict(owner_kind="RayJob"), "skip"),
    ],
)
def test_the_action_the_class_and_owner_allow(kw, action):
    h = {"j": [warned(NOW - dt.timedelta(hours=1))]}
    assert one([job(**kw)], h)[0] == [("j", action)]


def test_inference_configured_for_reclaim_is_warned_only():
    c = cfg()
    c = dataclasses.replace(c, class_policy=c.class_policy | {"inference": ClassPolicy(idle_after_h=2.0, reclaim=True)})
    assert one([job(cls="inference")], c=c)[0] == [("j", "warn")]
    h = {"j": [warned(NOW - dt.timedelta(hours=1))]}
    todo, _, steps = one([job(cls="inference")], h, c)
    assert todo == [("j", "skip")] and "warned only" in steps[0].reason
    # recorded once per idle run
    h["j"].append(Past(NOW - dt.timedelta(minutes=5), "skip", "ok"))
    assert one([job(cls="inference")], h, c)[0] == []


def test_a_failed_call_is_made_again():
    # a warning refused (403) is no warning: warned again; a failed suspension is retried
    assert one([job()], {"j": [warned(NOW - dt.timedelta(hours=1), result="403 Forbidden")]})[0] == [("j", "warn")]
    h = {"j": [warned(NOW - dt.timedelta(hours=1)), Past(NOW - dt.timedelta(minutes=5), "suspend", "409 Conflict")]}
    assert one([job()], h)[0] == [("j", "suspend")]


def test_once_acted_on_nothing_more_in_that_idle_run():
    h = {"j": [warned(NOW - dt.timedelta(hours=1)), Past(NOW - dt.timedelta(minutes=5), "suspend", "ok")]}
    assert one([job()], h)[0] == []


def test_a_warning_of_an_earlier_idle_run_does_not_count():
    # warned 5 h ago, but the job was busy since and has been idle only 3 h: a new warning
    assert one([job()], {"j": [warned(NOW - dt.timedelta(hours=5))]})[0] == [("j", "warn")]
    # unless the run reaches back past what was read (since_lookback): the warning may be in it
    assert one([job(since_lookback=True)], {"j": [warned(NOW - dt.timedelta(hours=5))]})[0] == [("j", "suspend")]


def test_exempt_tenants_are_skipped_once():
    c = cfg(exempt_tenants=("vision",))
    todo, _, steps = one([job()], c=c)
    assert todo == [("j", "skip")] and "exempt" in steps[0].reason
    assert one([job()], {"j": [Past(NOW - dt.timedelta(minutes=5), "skip", "ok")]}, c)[0] == []


def test_rate_in_force_at_the_time():
    from gpuledger.config import Rate

    rates = (Rate("H100", 2.0, dt.date(2026, 1, 1)), Rate("H100", 3.0, dt.date(2026, 11, 3)))
    assert rate_at(rates, H100, NOW) == 2.0  # Nov 2: the January rate
    assert rate_at(rates, H100, NOW + dt.timedelta(days=1)) == 3.0
    assert rate_at(rates, "Tesla V100", NOW) is None
