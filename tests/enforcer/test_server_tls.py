"""The webhook over real TLS (uvicorn, a CA and serving certificate from enforcer.certs), with a real HTTP client:
the real request and derived GPU variants, bad bodies, readiness, metrics, the audit in the lake, a reload under load.
"""

import base64
import concurrent.futures
import copy
import datetime as dt
import json
import socket
import ssl
import threading
import time
from dataclasses import replace

import httpx
import polars as pl
import pytest
import uvicorn

from gpuledger.config import DEFAULT_CLASS_POLICIES, EnforcerConfig
from gpuledger.enforcer import certs
from gpuledger.enforcer.connections import server_config
from gpuledger.enforcer.decide import Settings, Table
from gpuledger.enforcer.policies import IdleHold, TenantRow
from gpuledger.enforcer.review import fit_warnings
from gpuledger.enforcer.server import Webhook, create_app
from gpuledger.enforcer.store import AuditWriter, load_table
from gpuledger.lake import LakeWriter, frame_from_rows, scan
from gpuledger.query import Lake

from conftest import REPO

RAW = json.loads((REPO / "tests" / "fixtures" / "admission" / "kubewarden_loadtesting_pod_create_v1.json").read_text())
H100 = "NVIDIA-H100-80GB-HBM3"


def now():
    return dt.datetime.now(dt.timezone.utc)


def gpu_review(gpus, uid="u-1", namespace="vision-train"):
    """DERIVED from the kubewarden Pod CREATE: GPUs on its first container, an H100 node selector."""
    doc = copy.deepcopy(RAW)
    doc["request"]["uid"], doc["request"]["namespace"] = uid, namespace
    spec = doc["request"]["object"]["spec"]
    spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    spec["nodeSelector"] = {"nvidia.com/gpu.product": H100}
    return doc


def table(quota=16, allocated=10):
    rows = {
        ("vision", H100): TenantRow("vision", H100, allocated, quota),
        ("vision", None): TenantRow("vision", None, allocated, None),
    }
    return Table(rows, now())


@pytest.fixture
def served(tmp_path):
    issued = certs.issue(["localhost", "127.0.0.1"])
    paths = certs.write(issued, tmp_path / "tls")
    hook = Webhook(Settings({"vision-train": "vision"}), None, AuditWriter(tmp_path / "lake", "r0", "default"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(server_config(create_app(hook), "127.0.0.1", port, str(paths["cert"]), str(paths["key"])))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    deadline = time.time() + 20
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    verify = ssl.create_default_context(cafile=str(paths["ca"]))
    # One retry of a connection that could not be set up (httpx retries only that: ConnectError, ConnectTimeout; a
    # request that reached the app is never sent twice). Under a full CI machine one of 16 concurrent TLS handshakes
    # was once cut short (UNEXPECTED_EOF) and not again in many runs since; that says nothing of the quota under test.
    client = httpx.Client(
        base_url=f"https://localhost:{port}",
        verify=verify,
        timeout=10,
        transport=httpx.HTTPTransport(verify=verify, retries=1),
    )
    yield hook, client, tmp_path / "lake", port
    client.close()
    server.should_exit = True
    t.join(10)


def test_tls_only_and_the_ca_verifies(served):
    hook, client, _, port = served
    assert client.get("/healthz").text == "ok"
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"https://localhost:{port}/healthz", timeout=5)  # the system roots do not know our CA
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://localhost:{port}/healthz", timeout=5)  # no plain HTTP


def test_ready_only_once_a_table_is_loaded(served):
    hook, client, _, _ = served
    assert client.get("/readyz").status_code == 503
    hook.set_table(table())
    assert client.get("/readyz").status_code == 200


def test_the_real_request_and_a_derived_gpu_denial(served):
    hook, client, lake, _ = served
    hook.set_table(table())
    r = client.post("/validate", json=RAW).json()
    assert r == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": RAW["request"]["uid"], "allowed": True},
    }
    r = client.post("/validate", json=gpu_review("8", uid="u-deny")).json()["response"]
    assert r["allowed"] is False and r["uid"] == "u-deny" and r["status"]["code"] == 403
    assert r["status"]["message"] == f"tenant vision uses 10 of 16 {H100} GPUs; this Pod asks 8 (quota exceeded by 2)"
    hook.audit.flush()
    with Lake(lake) as q:
        rows = q.execute("SELECT uid, decision, policy, mode, tenant, gpus FROM admission_decisions ORDER BY uid").rows
    assert rows == [
        (RAW["request"]["uid"], "allow", None, None, None, 0.0),
        ("u-deny", "deny", "quota", "enforce", "vision", 8.0),
    ]
    m = client.get("/metrics").text
    assert 'gpuledger_admission_decisions_total{decision="deny",policy="quota",tenant="vision"} 1.0' in m
    assert "gpuledger_admission_latency_seconds_bucket" in m and "gpuledger_decision_table_age_seconds" in m


@pytest.mark.parametrize(
    "body,status",
    [
        (b"not json", 400),
        (b'{"apiVersion": "v1", "kind": "AdmissionReview"}', 400),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}', 400),
    ],
)
def test_bad_bodies_are_4xx_never_500(served, body, status):
    _, client, _, _ = served
    r = client.post("/validate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status and "error" in r.json()


def test_hostile_workloads_are_denied_and_the_denials_reach_the_lake(served):
    """Quantities and counts no API server sends (they were admitted unchecked, with no audit row): each is a
    denial naming the field, and each denial is a row of admission_decisions."""
    hook, client, lake, _ = served
    hook.set_table(table())
    big = client.post("/validate", json=gpu_review("9" * 5001, uid="u-digits")).json()["response"]
    job = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-parallel",
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "namespace": "vision-train",
            "operation": "CREATE",
            "object": {"spec": {"parallelism": 10**400, "template": gpu_review("1")["request"]["object"]}},
        },
    }
    par = client.post("/validate", content=json.dumps(job)).json()["response"]
    assert (big["allowed"], big["status"]["code"], par["allowed"], par["status"]["code"]) == (False, 400, False, 400)
    assert big["status"]["message"] == (
        "Pod vision-train/nginx: spec.containers[0].resources.limits[nvidia.com/gpu]: '9999999999999999999... "
        "(5,003 characters) is more GPUs than a Kubernetes quantity holds (9,223,372,036,854,775,807)"
    )
    assert "spec.parallelism: 10000000000000000000... (401 characters) is more pods" in par["status"]["message"]
    hook.audit.flush()
    with Lake(lake) as q:
        rows = q.execute("SELECT uid, decision, policy, gpus FROM admission_decisions ORDER BY uid").rows
    assert rows == [("u-digits", "deny", "request", 0.0), ("u-parallel", "deny", "request", 0.0)]


def test_a_huge_body_is_413(served):
    _, client, _, _ = served
    r = client.post("/validate", content=b"x" * (7 * 1024 * 1024))
    assert r.status_code == 413


def test_a_burst_of_concurrent_admissions_cannot_overrun_the_quota(served):
    hook, client, _, _ = served
    hook.set_table(table(quota=16, allocated=10))  # room for 6 GPUs
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(
            pool.map(lambda i: client.post("/validate", json=gpu_review("1", uid=f"b{i}")).json(), range(20))
        )
    allowed = sum(a["response"]["allowed"] for a in answers)
    assert allowed == 6


def test_a_reload_during_load_never_fails_a_request(served):
    hook, client, _, _ = served
    hook.set_table(table(quota=1000))
    stop = threading.Event()

    def reload():
        while not stop.is_set():
            hook.set_table(table(quota=1000, allocated=0))
            time.sleep(0.001)

    t = threading.Thread(target=reload)
    t.start()
    try:
        codes = [client.post("/validate", json=gpu_review("1", uid=f"r{i}")).status_code for i in range(100)]
    finally:
        stop.set()
        t.join()
    assert codes == [200] * 100


def test_load_table_reads_the_analytics_decisions(analysed_store):
    t = load_table(analysed_store, "default")
    assert t is not None and t.computed_at is not None and t.rows
    assert load_table(f"{analysed_store}-nothing", "default") is None  # a lake with no table yet
    assert load_table(analysed_store, "no-such-cluster") is None
    # The decisions and idle GPUs of the same run, as the analysts see them in SQL (the simulated day leaves one pod
    # idle).
    # The latest run's decisions as polars reads them from the files.
    decisions = scan(analysed_store, "decisions").filter(pl.col("cluster") == "default").collect()
    latest = decisions.filter(pl.col("computed_at") == decisions["computed_at"].max())
    assert t.computed_at == latest["computed_at"][0]
    assert {k: r.allocated_gpus for k, r in t.rows.items()} == {
        (r["tenant"], r["gpu_model"]): r["allocated_gpus"] or 0.0 for r in latest.iter_rows(named=True)
    }
    with Lake(analysed_store) as lake:
        sql = lake.execute(
            "SELECT tenant, namespace, pod, share, epoch_us(idle_since), workload_class FROM idle_holds ORDER BY ALL"
        ).rows
    got = sorted(
        (tn, h.namespace, h.pod, h.share, round(h.idle_since_s * 1e6), h.workload_class)
        for tn, hs in t.idle.items()
        for h in hs
    )
    assert sql and got == [tuple(r) for r in sql]
    # each hold carries its job's class (the simulator's jobs have one), for the idle-hog gate's per-class times
    assert all(h.workload_class is not None for hs in t.idle.values() for h in hs)


def test_load_table_ignores_idle_holds_of_an_older_run(tmp_path):
    at = dt.datetime(2026, 11, 2, 12, tzinfo=dt.timezone.utc)
    us = lambda d: int(d.timestamp() * 1e6)  # noqa: E731 - rows carry UTC microseconds, as the writers' do
    w = LakeWriter(tmp_path)
    row = dict(computed_at=us(at), cluster="c", tenant="vision", gpu_model=None, allocated_gpus=4.0)
    w.write("decisions", frame_from_rows("decisions", [row]), "t")
    hold = dict(cluster="c", tenant="vision", namespace="v", pod="p", job_id="j", gpu_uuid="G", share=1.0)
    old = at - dt.timedelta(minutes=5)
    w.write(
        "idle_holds",
        frame_from_rows(
            "idle_holds",
            [
                hold | dict(computed_at=us(at), idle_since=us(at - dt.timedelta(hours=3))),
                hold | dict(computed_at=us(old), pod="woke-up", idle_since=us(old - dt.timedelta(hours=9))),
            ],
        ),
        "t",
    )
    t = load_table(tmp_path, "c")
    assert [(h.pod, h.idle_since_s) for h in t.idle["vision"]] == [("p", (at - dt.timedelta(hours=3)).timestamp())]
    assert t.idle["vision"][0].workload_class is None  # written without the column (an old lake): null
    # A reload between the analytics' two writes sees the next run's holds beside this run's decisions: newer, kept.
    nxt = at + dt.timedelta(minutes=5)
    w.write(
        "idle_holds",
        frame_from_rows("idle_holds", [hold | dict(computed_at=us(nxt), pod="q", idle_since=us(at))]),
        "t2",
    )
    assert [h.pod for h in load_table(tmp_path, "c").idle["vision"]] == ["q"]


def job_review(gpus, uid="u-job", namespace="vision-train"):
    """DERIVED: the kubewarden request's pod spec as the template of a Job with GPUs (what /mutate patches)."""
    doc = gpu_review(gpus, uid, namespace)
    req = doc["request"]
    req["kind"] = {"group": "batch", "version": "v1", "kind": "Job"}
    req["resource"] = {"group": "batch", "version": "v1", "resource": "jobs"}
    req["object"] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": namespace, "labels": {"app": "train"}},
        "spec": {"template": {"spec": req["object"]["spec"]}},
    }
    return doc


NOW_TABLE = {  # per policy: a decision table that the request below breaches, and that request
    "quota": (lambda: table(quota=16, allocated=10), lambda: gpu_review("8", uid="u-q")),
    "budget": (
        lambda: Table({("vision", None): TenantRow("vision", None, 2, None, budget_usd=1000, spent_usd=1200)}, now()),
        lambda: gpu_review("1", uid="u-b"),
    ),
    "idle-hog": (
        lambda: Table(
            {("vision", None): TenantRow("vision", None, 3, None)},
            now(),
            {"vision": tuple(IdleHold("vision-train", f"nb-{i}", H100, 1.0, time.time() - 5 * 3600) for i in range(3))},
        ),
        lambda: gpu_review("1", uid="u-i"),
    ),
    "fair-share": (
        lambda: Table({("vision", None): TenantRow("vision", None, 2, None, fairshare=0.1)}, now()),
        lambda: job_review("1", uid="u-f"),
    ),
}


@pytest.mark.parametrize("mode", ["enforce", "warn", "dry-run"])
@pytest.mark.parametrize("policy", list(NOW_TABLE))
def test_every_policy_in_every_mode_through_the_served_endpoint(served, policy, mode):
    hook, client, lake, _ = served
    modes = {f"{p.replace('-', '_')}_mode": "dry-run" for p in NOW_TABLE} | {f"{policy.replace('-', '_')}_mode": mode}
    hook.settings = Settings({"vision-train": "vision"}, EnforcerConfig(**modes, idle_max_gpus=2, idle_min_h=2))
    make_table, make_review = NOW_TABLE[policy]
    hook.set_table(make_table())
    body = make_review()
    path = "/mutate" if policy == "fair-share" else "/validate"
    r = client.post(path, json=body).json()["response"]
    assert r["uid"] == body["request"]["uid"]
    if policy == "fair-share":
        assert r["allowed"] is True
        if mode == "enforce":
            ops = json.loads(base64.b64decode(r["patch"]))
            assert (
                r["patchType"] == "JSONPatch"
                and {"op": "add", "path": "/spec/template/spec/priorityClassName", "value": "gpu-low"} in ops
            )
        else:
            assert "patch" not in r
    elif mode == "enforce":
        assert r["allowed"] is False and r["status"]["code"] == 403 and "tenant vision" in r["status"]["message"]
    else:
        assert r["allowed"] is True and "status" not in r
    assert bool(r.get("warnings")) == (mode == "warn")
    hook.audit.flush()
    with Lake(lake) as q:
        (row,) = q.execute(
            "SELECT decision, policy, mode, tenant, reason, policy_version FROM admission_decisions"
        ).rows
    decision = {"enforce": "allow" if policy == "fair-share" else "deny", "warn": "warn", "dry-run": "allow"}[mode]
    assert row[:4] == (decision, policy, mode, "vision") and row[4] and row[5] == "v1"


def test_tenants_come_from_namespace_labels_kept_by_a_watch(served):
    from gpuledger.config import TENANT_LABEL
    from gpuledger.enforcer.namespaces import NamespaceTenants

    from k8s_apiserver import RecordedApiServer

    hook, client, lake, _ = served
    hook.set_table(table(quota=16, allocated=10))

    def ns(name, labels):
        return {"metadata": {"name": name, "uid": f"uid-{name}", "labels": labels}}

    with RecordedApiServer() as api:
        api.emit("ADDED", ns("lab", {TENANT_LABEL: "vision"}), "Namespace")
        api.emit("ADDED", ns("vision-train", {TENANT_LABEL: "nlp"}), "Namespace")  # the config's map wins
        api.emit("ADDED", ns("plain", {}), "Namespace")
        hook.namespaces = tenants = NamespaceTenants(api.api_client(), TENANT_LABEL, timeout_s=5)
        tenants.start()
        try:
            _wait(lambda: tenants.get("lab") == "vision")
            r = client.post("/validate", json=gpu_review("8", uid="u-lab", namespace="lab")).json()["response"]
            assert r["allowed"] is False and r["status"]["message"].startswith("tenant vision uses 10 of 16")
            r = client.post("/validate", json=gpu_review("8", uid="u-vt")).json()["response"]
            assert r["status"]["message"].startswith("tenant vision uses 10 of 16")  # not nlp
            r = client.post("/validate", json=gpu_review("1", uid="u-plain", namespace="plain")).json()["response"]
            assert r["warnings"] == ["namespace plain belongs to no tenant: not checked"]
            # The label is taken off: the watch sees it and the namespace belongs to no tenant any more.
            api.emit("MODIFIED", ns("lab", {}), "Namespace")
            _wait(lambda: tenants.get("lab") is None)
            r = client.post("/validate", json=gpu_review("8", uid="u-lab2", namespace="lab")).json()["response"]
            assert r["allowed"] is True and r["warnings"] == ["namespace lab belongs to no tenant: not checked"]
            assert "gpuledger_labelled_namespaces 1.0" in client.get("/metrics").text  # vision-train's
        finally:
            tenants.stop()
    hook.audit.flush()
    with Lake(lake) as q:
        rows = q.execute("SELECT uid, tenant, namespace FROM admission_decisions ORDER BY uid").rows
    assert rows == [
        ("u-lab", "vision", "lab"),
        ("u-lab2", None, "lab"),
        ("u-plain", None, "plain"),
        ("u-vt", "vision", "vision-train"),
    ]


def _wait(ok, timeout_s=10.0):
    deadline = time.time() + timeout_s
    while not ok():
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def test_a_stale_table_is_the_failure_mode_and_said_in_metrics_and_logs(served, caplog):
    hook, client, _, _ = served
    old = table()
    old.computed_at = now() - dt.timedelta(minutes=20)
    with caplog.at_level("WARNING", logger="gpuledger.enforcer.server"):
        hook.set_table(old)
        r = client.post("/validate", json=gpu_review("8", uid="u-stale")).json()["response"]
        assert r["allowed"] is True and r["warnings"] == [
            "gpuledger's decision table is 20 min old (limit 15 min): admitted unchecked"
        ]
        m = client.get("/metrics").text
        assert "gpuledger_decision_table_stale 1.0" in m
        age = float(next(x for x in m.splitlines() if x.startswith("gpuledger_decision_table_age_seconds ")).split()[1])
        assert 1199 < age < 1260
        hook.set_table(old)  # the same stale table reloaded: said once, not at every reload
        hook.settings = Settings({"vision-train": "vision"}, EnforcerConfig(failure_mode="deny"))
        r = client.post("/validate", json=gpu_review("8", uid="u-stale2")).json()["response"]
        assert r["allowed"] is False and r["status"]["code"] == 503
        hook.set_table(table())  # fresh again
        assert "gpuledger_decision_table_stale 0.0" in client.get("/metrics").text
    said = [rec.getMessage() for rec in caplog.records]
    assert said == [
        "enforcer: the decision table is 20 min old (limit 15 min): GPU workloads are admitted unchecked until the "
        "analytics write a fresh one",
        said[1],
    ] and said[1].startswith("enforcer: the decision table is fresh again")


def test_an_audit_that_fails_does_not_turn_a_denial_into_a_500(served, monkeypatch):
    hook, client, _, _ = served
    hook.set_table(table())

    def broken(row):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(hook.audit, "put", broken)
    r = client.post("/validate", json=gpu_review("8", uid="u-full"))
    assert r.status_code == 200 and r.json()["response"]["allowed"] is False  # still denied, not a webhook error
    assert "gpuledger_audit_errors_total 1.0" in client.get("/metrics").text


def test_a_lake_write_that_fails_is_retried_at_the_next_flush(served, monkeypatch):
    hook, client, lake, _ = served
    hook.set_table(table())
    assert client.post("/validate", json=gpu_review("1", uid="u-1")).status_code == 200
    real = hook.audit.writer.write
    monkeypatch.setattr(hook.audit.writer, "write", lambda *a: (_ for _ in ()).throw(OSError(28, "disk full")))
    with pytest.raises(OSError):
        hook.audit.flush()
    monkeypatch.setattr(hook.audit.writer, "write", real)
    assert client.post("/validate", json=gpu_review("1", uid="u-2")).status_code == 200
    assert hook.audit.flush() == 2  # u-1 from the segment left behind, u-2 from memory
    with Lake(lake) as q:
        assert q.execute("SELECT uid FROM admission_decisions ORDER BY uid").rows == [("u-1",), ("u-2",)]


def test_mutate_then_validate_is_one_audited_decision(served):
    hook, client, lake, _ = served
    hook.set_table(Table({("vision", None): TenantRow("vision", None, 2, None, fairshare=0.9)}, now()))
    pod = gpu_review("1", uid="u-pod")
    client.post("/mutate", json=pod)  # nothing to patch on a Pod: no decision recorded
    client.post("/validate", json=pod)
    job = job_review("1", uid="u-job")
    assert "patch" in client.post("/mutate", json=job).json()["response"]  # fair share set: recorded
    client.post("/validate", json=job)
    hook.audit.flush()
    with Lake(lake) as q:
        rows = q.execute("SELECT uid, policy FROM admission_decisions ORDER BY uid, policy NULLS LAST").rows
    assert rows == [("u-job", "fair-share"), ("u-job", None), ("u-pod", None)]


def test_readiness_with_failure_mode_deny_and_before_the_namespaces_are_listed(served):
    hook, client, _, _ = served
    assert client.get("/readyz").status_code == 503  # no table, failure mode allow: not an endpoint yet
    hook.settings = Settings({"vision-train": "vision"}, EnforcerConfig(failure_mode="deny"))
    assert client.get("/readyz").status_code == 200  # it must be reachable to refuse
    r = client.post("/validate", json=gpu_review("1", uid="u-d")).json()["response"]
    assert r["allowed"] is False and r["status"]["code"] == 503

    class NotListed:
        class watcher:
            class stats:
                lists = 0
                errors = 3

        def get(self, ns, default=None):
            return default

        def __len__(self):
            return 0

    hook.namespaces = NotListed()
    r = client.get("/readyz")
    assert r.status_code == 503 and r.text == "namespace labels not listed yet"


def test_class_policies_through_the_served_endpoints_and_in_the_audit(served):
    """Serving may exceed quota and has its own PriorityClass; a notebook after it meets the quota with serving's
    GPUs counted; each decision's class is in admission_decisions."""
    hook, client, lake, _ = served
    inference = replace(DEFAULT_CLASS_POLICIES["inference"], may_exceed_quota=True, priority_class="serving-critical")
    policy = DEFAULT_CLASS_POLICIES | {"inference": inference}
    hook.settings = Settings({"vision-train": "vision"}, class_policy=policy)
    hook.set_table(table(quota=16, allocated=10))
    serve = gpu_review("8", uid="u-serve")
    serve["request"]["object"]["metadata"]["labels"] = {"gpuledger.io/class": "inference"}
    r = client.post("/validate", json=serve).json()["response"]
    over = f"tenant vision uses 10 of 16 {H100} GPUs; this Pod asks 8 (quota exceeded by 2)"
    assert r["allowed"] is True and r["warnings"] == fit_warnings(
        [f"{over}; admitted: class inference may exceed quota"]
    )
    # a Kubeflow notebook's pod (its controller's label): 10 held + 8 just admitted + 1 asked = 19 > 16
    nb = gpu_review("1", uid="u-nb")
    nb["request"]["object"]["metadata"]["labels"] = {"notebook-name": "nb"}
    r = client.post("/validate", json=nb).json()["response"]
    assert r["allowed"] is False
    assert r["status"]["message"] == f"tenant vision uses 18 of 16 {H100} GPUs; this Pod asks 1 (quota exceeded by 3)"
    job = job_review("1", uid="u-job")
    job["request"]["object"]["metadata"]["labels"]["gpuledger.io/class"] = "inference"
    r = client.post("/mutate", json=job).json()["response"]
    assert json.loads(base64.b64decode(r["patch"])) == [
        {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1priority-class", "value": "serving-critical"},
        {"op": "add", "path": "/spec/template/spec/priorityClassName", "value": "serving-critical"},
    ]
    client.post("/validate", json=RAW)  # the recorded pod: no GPUs, restartPolicy Always, no owner: other
    hook.audit.flush()
    with Lake(lake) as q:
        rows = q.execute("SELECT uid, decision, policy, mode, workload_class FROM admission_decisions").rows
    assert sorted(rows) == sorted(
        [
            ("u-serve", "warn", "quota", "enforce", "inference"),
            ("u-nb", "deny", "quota", "enforce", "notebook"),
            ("u-job", "allow", "class-priority", "enforce", "inference"),
            (RAW["request"]["uid"], "allow", None, None, "other"),
        ]
    )
