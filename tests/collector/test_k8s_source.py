"""The k8s source against recorded pod states replayed over real HTTP to the real kubernetes client."""

import copy
import time

import pytest

from gpuledger.collector.k8s_source import K8sSource
from gpuledger.collector.source import Batch
from gpuledger.config import AcceleratorResource, ClassRule, Config, Tenant

import builders
from k8s_apiserver import RecordedApiServer

CFG = Config(cluster="c", tenants=(Tenant("platform", ("runai-reservation",)),))


@pytest.fixture
def api():
    with RecordedApiServer() as server:
        yield server


def source(api, cfg=CFG):
    return K8sSource(cfg, api_client=api.api_client(), clock=lambda: 1_800_000_000.0, watch_timeout_s=1)


def drain(src):
    """Rows the synchronous tests produced by calling the watcher directly (no background thread)."""
    return src.take_rows()


def collected(src):
    """Rows through the Source protocol, which starts the background watch on first use."""
    return [
        dict(zip(b.columns, vals, strict=True))
        for b in src.collect(0)
        for vals in zip(*b.columns.values(), strict=True)
    ]


RUNNING = builders.raw("pod_runai_reservation_nvidia-gpu-1_running")
UID = RUNNING["metadata"]["uid"]


def test_list_then_watch_then_resume_from_the_last_version(api):
    api.emit("ADDED", RUNNING)
    api.emit("ADDED", builders.raw("pod_nongpu_minikube_succeeded_completed"))  # no GPU: no row
    src = source(api)
    w = src.watcher
    w.watch_once()  # lists (2 pods), then watches from the list's version: nothing new
    (r,) = drain(src)
    assert (r["job_id"], r["status"], r["tenant"]) == (UID, "running", "platform")
    done = builders.derived_terminated("Completed", 0, phase="Succeeded")
    rv = api.emit("MODIFIED", done)
    w.watch_once()
    assert w.rv == str(rv)
    watches = [p for p in api.requests if "watch=true" in p]
    assert f"resourceVersion={rv - 1}" in watches[-1]  # resumed from the last version it had seen
    rows = drain(src)
    assert [(x["status"], x["reason"]) for x in rows] == [("succeeded", "Completed")]
    assert w.stats.lists == 1  # resumed, never re-listed


def test_410_gone_relists_and_reports_pods_that_vanished_meanwhile(api):
    api.emit("ADDED", RUNNING)
    other = copy.deepcopy(RUNNING)
    other["metadata"]["uid"] = "22222222-0000-4000-8000-000000000002"  # derived: a second GPU pod
    other["metadata"]["name"] = "second"
    api.emit("ADDED", other)
    src = source(api)
    src.watcher.watch_once()
    drain(src)
    api.forget(other["metadata"]["uid"])  # it went away while we were not watching...
    api.emit("MODIFIED", RUNNING)
    api.compacted_below = api.rv  # ...and the server compacted history past our version
    src.watcher.watch_once()  # gets 410
    assert src.watcher.stats.relists_410 == 1 and src.watcher.rv is None
    src.watcher.watch_once()  # re-lists
    rows = drain(src)
    vanished = [r for r in rows if r["job_id"] == other["metadata"]["uid"]]
    assert [(r["status"], r["reason"]) for r in vanished] == [("cancelled", "Deleted")]
    assert src.watcher.stats.lists == 2


def test_pagination_reads_every_page(api):
    for i in range(7):
        p = copy.deepcopy(RUNNING)
        p["metadata"]["uid"] = f"33333333-0000-4000-8000-00000000000{i}"  # derived copies
        api.emit("ADDED", p)
    src = source(api)
    import gpuledger.kube_watch as watcher_mod

    old, watcher_mod.PAGE = watcher_mod.PAGE, 3
    try:
        src.watcher.relist()
    finally:
        watcher_mod.PAGE = old
    assert len(drain(src)) == 7
    assert sum("continue=" in p for p in api.requests) == 2  # pages 2 and 3


def test_bad_quantity_is_skipped_and_counted_the_rest_goes_on(api):
    bad = builders.derived_with_limits({"nvidia.com/gpu": "abc"})
    bad["metadata"]["uid"] = "44444444-0000-4000-8000-000000000004"
    api.emit("ADDED", bad)
    api.emit("ADDED", RUNNING)
    src = source(api)
    src.watcher.watch_once()
    assert src.bad_pods == 1 and [r["job_id"] for r in drain(src)] == [UID]


def test_tenant_from_namespace_label_and_owner_chain_through_the_api(api):
    frac = builders.raw("pod_runai_fraction-0.5gpu_running")
    api.namespaces["runai-pa"] = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "runai-pa", "labels": {"gpuledger.io/tenant": "vision"}},
    }
    api.emit("ADDED", frac)
    job = builders.derived_with_limits({"nvidia.com/gpu": "2"})  # derived: a Job-owned pod
    job["metadata"].update(
        uid="55555555-0000-4000-8000-000000000005",
        name="train-0",
        namespace="runai-pa",
        ownerReferences=[{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "j1", "controller": True}],
    )
    api.jobs[("runai-pa", "train")] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "runai-pa",
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": "llm",
                    "uid": "js1",
                    "controller": True,
                }
            ],
        },
    }
    api.emit("ADDED", job)
    src = source(api)
    src.watcher.watch_once()
    rows = {r["pod"]: r for r in drain(src)}
    assert rows["frac-1-0-0"]["tenant"] == "vision"  # from the namespace label
    assert (rows["train-0"]["owner_kind"], rows["train-0"]["owner_name"]) == ("JobSet", "llm")
    assert rows["train-0"]["gpus"] == 2.0


def test_background_watch_feeds_collect(api):
    api.emit("ADDED", RUNNING)
    src = source(api)
    try:
        got = []
        deadline = time.time() + 10
        while not got and time.time() < deadline:
            got = collected(src)  # collect() starts the watch thread on first use
            time.sleep(0.05)
        assert [r["job_id"] for r in got] == [UID]
        api.emit("MODIFIED", builders.derived_terminated("OOMKilled", 137))
        deadline = time.time() + 10
        more = []
        while not more and time.time() < deadline:
            more = collected(src)
            time.sleep(0.05)
        assert [(r["status"], r["reason"]) for r in more] == [("failed", "OOMKilled")]
    finally:
        src.close()


def test_unreachable_api_server_is_retried_with_backoff():
    from kubernetes import client

    conf = client.Configuration()
    conf.host = "http://127.0.0.1:9"  # nothing listens on the discard port
    src = K8sSource(CFG, api_client=client.ApiClient(conf), watch_timeout_s=1)
    import threading

    stop = threading.Event()
    t = threading.Thread(target=src.watcher.run, args=(stop, 0.05, 0.1))
    t.start()
    time.sleep(0.6)
    stop.set()
    t.join(5)
    assert src.watcher.stats.errors >= 2 and "MaxRetryError" in src.watcher.stats.last_error


def test_workload_class_from_the_chain_the_label_and_the_config(api):
    """The source writes `workload_class`: Job -> JobSet through the API is training, the pod's label outranks the
    chain, a [[classes]] row outranks the chain and an unowned pod's shape."""

    def gpu_pod(uid, name, namespace, owners=(), labels=None):
        p = builders.derived_with_limits({"nvidia.com/gpu": "1"})  # derived: see builders
        p["metadata"].update(uid=uid, name=name, namespace=namespace, ownerReferences=list(owners))
        p["metadata"]["labels"] = labels or {}
        return p

    job = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "j1", "controller": True}
    api.jobs[("team", "train")] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "team",
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": "llm",
                    "uid": "js1",
                    "controller": True,
                }
            ],
        },
    }
    api.emit("ADDED", gpu_pod("66666666-0000-4000-8000-000000000001", "train-0", "team", [job]))
    api.emit(
        "ADDED",
        gpu_pod("66666666-0000-4000-8000-000000000002", "eval-0", "team", [job], {"gpuledger.io/class": "evaluation"}),
    )
    api.emit("ADDED", gpu_pod("66666666-0000-4000-8000-000000000003", "chat-0", "serving"))
    api.emit("ADDED", gpu_pod("66666666-0000-4000-8000-000000000004", "lone-0", "team"))
    cfg = Config(cluster="c", classes=(ClassRule("inference", namespaces=("serving",)),))
    src = source(api, cfg)
    src.watcher.watch_once()
    rows = {r["pod"]: r for r in drain(src)}
    assert rows["train-0"]["owner_kind"] == "JobSet" and rows["train-0"]["workload_class"] == "training"
    assert rows["eval-0"]["workload_class"] == "evaluation"
    assert rows["chat-0"]["workload_class"] == "inference"
    assert rows["lone-0"]["workload_class"] == "other"  # no owner, restartPolicy Always (the recorded pod's)
    # typed by the schema on the way to the spool
    assert sorted(Batch.from_rows("jobs", list(rows.values())).columns["workload_class"]) == [
        "evaluation",
        "inference",
        "other",
        "training",
    ]


def test_a_pod_asking_for_an_unmapped_accelerator_is_recorded_and_said_once(api, caplog):
    npu = builders.derived_with_limits({"acme.com/npu": "1"})
    npu["metadata"]["uid"] = "55555555-0000-4000-8000-000000000005"
    api.emit("ADDED", npu)
    api.emit("MODIFIED", npu)
    api.emit("ADDED", RUNNING)
    src = source(api)
    with caplog.at_level("WARNING"):
        src.watcher.watch_once()
    rows = drain(src)
    unmapped = [r for r in rows if r["job_id"] == "55555555-0000-4000-8000-000000000005"]
    assert unmapped and all((r["gpus"], r["gpu_sharing"]) == (0.0, "unmapped") for r in unmapped)
    said = [m for m in caplog.messages if "acme.com/npu" in m]
    assert len(said) == 1 and "runai-reservation/" in said[0] and "recorded with 0 GPUs" in said[0]
    # mapped by the config, the same pod counts one GPU
    mapped = Config(cluster="c", tenants=CFG.tenants, accelerators=(AcceleratorResource("acme.com/npu", "huawei"),))
    src = source(api, mapped)
    src.watcher.watch_once()
    assert {r["gpus"] for r in drain(src) if r["job_id"].startswith("5555")} == {1.0}
