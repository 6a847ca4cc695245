"""`gpuledger reclaim` end to end on each kind of lake, against the stand-in API server: the exact calls, in order;
none in a dry run; every warning and action a reclaim_actions row; refused calls recorded and made again; the
reclaim_savings view over what was done."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from gpuledger.config import ReclaimConfig, defaults
from gpuledger.enforcer.reclaim.kube import Kube
from gpuledger.enforcer.reclaim.run import render, run_once
from gpuledger.lake import LakeWriter, frame_from_rows, has_data, scan
from gpuledger.query import Lake

from builders import epoch_us
from k8s_apiserver import RecordedApiServer

UTC = dt.timezone.utc
T8 = dt.datetime(2026, 11, 2, 8, tzinfo=UTC)
NOON = dt.datetime(2026, 11, 2, 12, tzinfo=UTC)
H100 = "NVIDIA H100 80GB HBM3"

# job_id: (tenant, namespace, pod, class, owner kind, owner name, queue, GPUs, busy until)
JOBS = {
    "uid-nb": ("vision", "vision-dev", "nb-0", "notebook", "StatefulSet", "nb", None, ["g-nb"], None),
    "uid-tr": ("nlp", "nlp", "train-1-x", "training", "Job", "train-1", None, ["g-tr1", "g-tr2"], None),
    "uid-kq": ("recsys", "recsys", "kjob-x", "training", "Job", "kjob", "team-q", ["g-kq"], None),
    "uid-busy": ("nlp", "nlp", "busy-x", "training", "Job", "busy", None, ["g-busy"], "12:00"),
    "uid-ex": ("research", "research", "ex-x", "training", "Job", "ex", None, ["g-ex"], None),
    "uid-inf": ("vision", "vision-dev", "srv-x", "inference", "Deployment", "srv", None, ["g-inf"], None),
}


def config():
    c = defaults()
    return dataclasses.replace(
        c, cluster="c", reclaim=dataclasses.replace(ReclaimConfig(), exempt_tenants=("research",))
    )


def build_lake(store):
    """Six running jobs allocated since 08:00 on H100s; samples every 60 s from 08:00 to 13:00, all idle (0 %) but
    the busy job's GPU, at 90 % until noon."""
    w = LakeWriter(store)
    jobs, allocs, samples = [], [], []
    for uid, (tenant, ns, pod, cls, okind, oname, queue, gpus, busy) in JOBS.items():
        jobs.append(
            dict(
                updated_at=epoch_us(T8),
                cluster="c",
                job_id=uid,
                tenant=tenant,
                namespace=ns,
                pod=pod,
                queue=queue,
                gpu_model=H100,
                gpus=float(len(gpus)),
                status="running",
                owner_kind=okind,
                owner_name=oname,
                source="k8s",
                workload_class=cls,
                node="n1",
                gpu_uuids=gpus,
            )
        )
        for g in gpus:
            allocs.append(
                dict(
                    cluster="c",
                    job_id=uid,
                    tenant=tenant,
                    namespace=ns,
                    pod=pod,
                    node="n1",
                    gpu_model=H100,
                    gpu_uuid=g,
                    share=1.0,
                    start=epoch_us(T8),
                    end=epoch_us(NOON),
                    open=True,
                )
            )
            for m in range(0, 5 * 60 + 1):
                ts = T8 + dt.timedelta(minutes=m)
                util = 90.0 if busy and ts <= NOON else 0.0
                samples.append(
                    dict(ts=epoch_us(ts), cluster="c", node="n1", gpu_uuid=g, util_gpu_pct=util, source="test")
                )
    w.write("jobs", frame_from_rows("jobs", jobs), "t")
    w.write("gpu_allocations", frame_from_rows("gpu_allocations", allocs), "t")
    w.write("gpu_samples", frame_from_rows("gpu_samples", samples), "t")


def pod_json(uid: str, labels: dict | None = None) -> dict:
    tenant, ns, pod, *_ = JOBS[uid]
    return {
        "metadata": {"name": pod, "namespace": ns, "uid": uid, "labels": labels or {}},
        "spec": {"containers": [{"name": "main", "image": "x"}]},
        "status": {"phase": "Running"},
    }


@pytest.fixture
def api():
    with RecordedApiServer() as a:
        for uid in JOBS:
            a.emit("ADDED", pod_json(uid))
        a.jobs[("nlp", "train-1")] = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "train-1", "namespace": "nlp"},
            "spec": {"suspend": False},
        }
        a.workloads[("recsys", "job-kjob-1a2b3")] = {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {
                "name": "job-kjob-1a2b3",
                "namespace": "recsys",
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "kjob", "uid": "u"}],
            },
            "spec": {"active": True, "queueName": "team-q"},
        }
        a.workloads[("recsys", "job-other-9z")] = {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {
                "name": "job-other-9z",
                "namespace": "recsys",
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "other", "uid": "v"}],
            },
            "spec": {"active": True},
        }
        yield a


def writes(api):
    return [(m, p) for m, p, _, _ in api.calls]


def actions(store):
    if not has_data(store, "reclaim_actions"):
        return []
    df = scan(store, "reclaim_actions").sort("ts", "job_id", "action").collect()
    return [(r["job_id"], r["action"], r["result"]) for r in df.iter_rows(named=True)]


WARN_CALLS = [
    ("GET", "/api/v1/namespaces/nlp/pods/train-1-x"),
    ("POST", "/api/v1/namespaces/nlp/events"),
    ("PATCH", "/api/v1/namespaces/nlp/pods/train-1-x"),
    ("GET", "/api/v1/namespaces/recsys/pods/kjob-x"),
    ("POST", "/api/v1/namespaces/recsys/events"),
    ("PATCH", "/api/v1/namespaces/recsys/pods/kjob-x"),
    ("GET", "/api/v1/namespaces/vision-dev/pods/nb-0"),
    ("POST", "/api/v1/namespaces/vision-dev/events"),
    ("PATCH", "/api/v1/namespaces/vision-dev/pods/nb-0"),
]


def test_dry_run_makes_no_call_and_writes_nothing(store, api):
    build_lake(store)
    p = run_once(store, config(), NOON, None)
    assert api.calls == [] and not has_data(store, "reclaim_actions")
    # nb (notebook, idle 4 h > 1 h), tr and kq (training, 4 h > 2 h) would be warned; ex is exempt; busy was busy
    # at noon; inference is never reclaimed by default
    assert [(s.step.job.job_id, s.step.action) for s in p.outcomes] == [
        ("uid-tr", "warn"),
        ("uid-kq", "warn"),
        ("uid-ex", "skip"),
        ("uid-nb", "warn"),
    ]
    # frees: tr 2 GPUs + kq 1 + nb 1 = 4 GPUs x 24 h = 96 GPU-h a day, at 2.49 USD = 239.04 USD a day
    assert p.gpu_hours_per_day() == 96.0
    assert p.usd_per_day() == pytest.approx(239.04)
    assert render(p)[-1] == "would free 96.0 GPU-hours a day (239.04 USD a day at the rate card) from 3 job(s)"


def test_warn_then_act_after_the_grace_with_the_exact_calls(store, api):
    build_lake(store)
    cfg = config()
    run_once(store, cfg, NOON, Kube(api.api_client()), by="ops@test")
    assert writes(api) == WARN_CALLS
    # the Event and the annotation: deadline = noon + 1800 s
    ev = api.created_events[0]
    assert (ev["involvedObject"]["uid"], ev["reason"], ev["type"]) == ("uid-tr", "IdleGPUReclaimWarning", "Warning")
    patch = [(ct, body) for m, p, ct, body in api.calls if m == "PATCH"][0]
    assert patch == (
        "application/merge-patch+json",
        {"metadata": {"annotations": {"gpuledger.io/reclaim-deadline": "2026-11-02T12:30:00Z"}}},
    )
    assert next(p for p in api.pods.values() if p["metadata"]["name"] == "nb-0")["metadata"]["annotations"] == {
        "gpuledger.io/reclaim-deadline": "2026-11-02T12:30:00Z"
    }
    assert actions(store) == [
        ("uid-ex", "skip", "ok"),
        ("uid-kq", "warn", "ok"),
        ("uid-nb", "warn", "ok"),
        ("uid-tr", "warn", "ok"),
    ]

    # 12:10: warned, before the deadline: no call, no row
    api.calls.clear()
    run_once(store, cfg, NOON + dt.timedelta(minutes=10), Kube(api.api_client()), by="ops@test")
    assert api.calls == [] and len(actions(store)) == 4

    # 12:31: past the deadline and still idle: suspend the Job, deactivate the Kueue Workload, delete the notebook
    run_once(store, cfg, NOON + dt.timedelta(minutes=31), Kube(api.api_client()), by="ops@test")
    assert writes(api) == [
        ("GET", "/api/v1/namespaces/nlp/pods/train-1-x"),
        ("PATCH", "/apis/batch/v1/namespaces/nlp/jobs/train-1"),
        ("GET", "/api/v1/namespaces/recsys/pods/kjob-x"),
        ("GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/recsys/workloads"),
        ("PATCH", "/apis/kueue.x-k8s.io/v1beta1/namespaces/recsys/workloads/job-kjob-1a2b3"),
        ("GET", "/api/v1/namespaces/vision-dev/pods/nb-0"),
        ("DELETE", "/api/v1/namespaces/vision-dev/pods/nb-0"),
    ]
    assert [b for m, _, _, b in api.calls if m == "PATCH"] == [{"spec": {"suspend": True}}, {"spec": {"active": False}}]
    assert all(ct == "application/merge-patch+json" for m, _, ct, _ in api.calls if m == "PATCH")
    assert api.jobs[("nlp", "train-1")]["spec"]["suspend"] is True
    assert api.workloads[("recsys", "job-kjob-1a2b3")]["spec"]["active"] is False
    assert api.workloads[("recsys", "job-other-9z")]["spec"]["active"] is True
    assert "nb-0" not in {p["metadata"]["name"] for p in api.pods.values()}
    done = scan(store, "reclaim_actions").collect()
    acted = done.filter(done["action"].is_in(["suspend", "deactivate", "delete"])).sort("job_id")
    assert acted.select("job_id", "action", "owner_kind", "owner_name", "actor", "result").rows() == [
        ("uid-kq", "deactivate", "Workload", "job-kjob-1a2b3", "ops@test", "ok"),
        ("uid-nb", "delete", None, None, "ops@test", "ok"),
        ("uid-tr", "suspend", "Job", "train-1", "ops@test", "ok"),
    ]
    # tr: 2 H100 x 24 = 48 GPU-h a day, 119.52 USD. Samples are read back 3.5 h (training's 2 h + 1 h + the 0.5 h
    # grace): from 09:01, all idle, so the run is measured from there: 3.5 h to 12:31, "at least".
    tr = acted.row(2, named=True)
    assert (tr["gpu_hours_freed_per_day"], tr["usd_per_day"]) == (48.0, pytest.approx(119.52))
    assert (tr["idle_since"], tr["idle_s"]) == (dt.datetime(2026, 11, 2, 9, 1, tzinfo=UTC), 3.5 * 3600)
    assert "idle at least 3.50 h" in tr["reason"]

    # 12:32: acted on already: nothing more
    api.calls.clear()
    run_once(store, cfg, NOON + dt.timedelta(minutes=32), Kube(api.api_client()), by="ops@test")
    assert api.calls == []

    # the savings view: per tenant and month, the actions that freed GPUs
    with Lake(store) as q:
        rows = q.execute(
            "SELECT tenant, month, actions, gpus, gpu_hours_freed_per_day, round(usd_per_day, 2) "
            "FROM reclaim_savings ORDER BY tenant"
        ).rows
    assert rows == [
        ("nlp", dt.date(2026, 11, 1), 1, 2.0, 48.0, 119.52),
        ("recsys", dt.date(2026, 11, 1), 1, 1.0, 24.0, 59.76),
        ("vision", dt.date(2026, 11, 1), 1, 1.0, 24.0, 59.76),
    ]


def test_refused_calls_are_recorded_and_made_again(store, api):
    build_lake(store)
    cfg = config()
    kube = Kube(api.api_client())
    api.fail[("PATCH", "/api/v1/namespaces/nlp/pods/train-1-x")] = (403, "Forbidden")
    api.forget("uid-kq")  # the pod is gone from the cluster: its GET is a 404
    run_once(store, cfg, NOON, kube)
    got = {(j, a): r for j, a, r in actions(store)}
    assert got[("uid-tr", "warn")] == "403 Forbidden"
    assert got[("uid-kq", "warn")] == "404 gone"
    assert got[("uid-nb", "warn")] == "ok"
    # the next pass warns tr again (now allowed) and kq again (still 404); nb waits for its deadline
    del api.fail[("PATCH", "/api/v1/namespaces/nlp/pods/train-1-x")]
    api.calls.clear()
    run_once(store, cfg, NOON + dt.timedelta(minutes=5), kube)
    assert writes(api) == WARN_CALLS[:3] + [("GET", "/api/v1/namespaces/recsys/pods/kjob-x")]
    # past nb's deadline, its DELETE conflicts (409): recorded, and tried again at the next pass
    api.fail[("DELETE", "/api/v1/namespaces/vision-dev/pods/nb-0")] = (409, "Conflict")
    run_once(store, cfg, NOON + dt.timedelta(minutes=31), kube)
    assert ("uid-nb", "delete", "409 Conflict") in actions(store)
    del api.fail[("DELETE", "/api/v1/namespaces/vision-dev/pods/nb-0")]
    api.calls.clear()
    run_once(store, cfg, NOON + dt.timedelta(minutes=32), kube)
    assert ("DELETE", "/api/v1/namespaces/vision-dev/pods/nb-0") in writes(api)
    assert ("uid-nb", "delete", "ok") in actions(store)


def test_a_pod_labelled_never_is_skipped_once(store, api):
    build_lake(store)
    api.emit("MODIFIED", pod_json("uid-nb", {"gpuledger.io/reclaim": "never"}))
    kube = Kube(api.api_client())
    run_once(store, config(), NOON, kube)
    nb = [a for a in actions(store) if a[0] == "uid-nb"]
    assert nb == [("uid-nb", "skip", "ok")]
    assert ("POST", "/api/v1/namespaces/vision-dev/events") not in writes(api)
    run_once(store, config(), NOON + dt.timedelta(minutes=5), kube)
    assert [a for a in actions(store) if a[0] == "uid-nb"] == nb  # not recorded again


# -- the command, and its pass under `up` ----------------------------------------------------------------------------
CONFIG = """
cluster = "c"
[reclaim]
exempt_tenants = ["research"]
"""


def test_the_command_is_a_dry_run_by_default(cli, tmp_path):
    from gpuledger.store import open_store

    build_lake(open_store(tmp_path / "lake"))
    (tmp_path / "gpuledger.toml").write_text(CONFIG)
    args = ("reclaim", "--lake", tmp_path / "lake", "--config", tmp_path / "gpuledger.toml")
    r = cli(*args, "--at", "2026-11-02T12:00:00Z")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert (
        lines[0] == "reclaim at 2026-11-02T12:00:00Z, dry run (no API call made, nothing recorded): 6 open job(s) read"
    )
    assert [ln.split()[:2] for ln in lines[1:-1]] == [
        ["would", "warn"],
        ["would", "warn"],
        ["would", "skip"],
        ["would", "warn"],
    ]
    assert "nlp/train-1-x (training, 2 GPU NVIDIA H100 80GB HBM3, 48 GPU-h/day, 119.52 USD/day)" in lines[1]
    assert lines[-1] == "would free 96.0 GPU-hours a day (239.04 USD a day at the rate card) from 3 job(s)"
    assert not (tmp_path / "lake" / "reclaim_actions").exists()
    # bad input: one line, exit 1, nothing written
    for bad, says in (
        (("--at", "noon"), "--at 'noon' is not an ISO-8601 time"),
        (("--apply", "--at", "2026-11-02T12:00:00Z"), "--at is for a dry run"),
    ):
        r = cli(*args, *bad)
        assert r.exit_code == 1 and says in r.output and "Traceback" not in r.output, r.output
    assert not (tmp_path / "lake" / "reclaim_actions").exists()


class _Scheduler:
    def __init__(self):
        self.jobs = {}

    def add_job(self, fn, trigger, **kw):
        self.jobs[kw["id"]] = (fn, trigger, kw)


def test_ups_pass_never_stops_up(tmp_path, monkeypatch, caplog):
    import logging

    from gpuledger import config as config_mod
    from gpuledger.cli import Ctx, _schedule_reclaim
    from gpuledger.store import open_store

    store = open_store(tmp_path / "lake")
    build_lake(store)
    cfg = dataclasses.replace(config(), reclaim=dataclasses.replace(config().reclaim, mode="apply", interval_s=60))
    sch = _Scheduler()
    _schedule_reclaim(sch, Ctx(cfg, store))
    fn, trigger, kw = sch.jobs["reclaim"]
    assert (trigger, kw["seconds"], kw["max_instances"]) == ("interval", 60, 1)
    # apply, and no cluster to reach: a warning, no exception
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing-kubeconfig"))
    with caplog.at_level(logging.INFO, logger="gpuledger.reclaim"):
        fn()
    assert (
        "reclaim pass failed (SourceError: k8s: no in-cluster service account and no usable kubeconfig" in caplog.text
    )
    # report mode: the dry run's summary in the log (now, the lake's jobs stopped reporting: nothing to free)
    caplog.clear()
    sch = _Scheduler()
    _schedule_reclaim(sch, Ctx(config_mod.defaults(), store))
    with caplog.at_level(logging.INFO, logger="gpuledger.reclaim"):
        sch.jobs["reclaim"][0]()
    assert "would free 0.0 GPU-hours a day" in caplog.text


def test_a_job_that_ended_since_is_not_reclaimed(store):
    # the analysis still has tr's allocation open, but the collector has seen it succeed at 11:00: its latest state
    build_lake(store)
    row = dict(
        updated_at=epoch_us(NOON - dt.timedelta(hours=1)),
        cluster="c",
        job_id="uid-tr",
        status="succeeded",
        source="k8s",
        workload_class="training",
    )
    LakeWriter(store).write("jobs", frame_from_rows("jobs", [row]), "later")
    p = run_once(store, config(), NOON, None)
    assert [o.step.job.job_id for o in p.outcomes] == ["uid-kq", "uid-ex", "uid-nb"]
    assert p.jobs_seen == 5


def test_a_bad_reclaim_setting_is_one_line(cli, tmp_path):
    for text, says in (
        ('[reclaim]\nmode = "sometimes"\n', "reclaim.mode"),
        ("[reclaim]\nwindow_s = 0\n", "reclaim.window_s"),
        ("[reclaim]\ninterval_s = 5\n", "reclaim.interval_s: must be at least 30"),
        ('[reclaim]\nexempt_tenants = [""]\n', "reclaim.exempt_tenants"),
    ):
        (tmp_path / "c.toml").write_text(text)
        r = cli("reclaim", "--lake", tmp_path / "lake", "--config", tmp_path / "c.toml")
        assert r.exit_code == 1 and says in r.output and "Traceback" not in r.output, (text, r.output)
    assert not (tmp_path / "lake").exists()
