"""Fuzz the webhook endpoint (hypothesis, 10,000 cases): no crash, no 500, no hang; every answer is a valid
AdmissionReview for the request's uid, or a 4xx with an error. In process (starlette's TestClient): TLS is
tested in test_server_tls.py; this is about what the handler does with anything a client can send."""

import datetime as dt
import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from enforcer.decide import Settings, Table
from enforcer.policies import TenantRow
from enforcer.server import Webhook, create_app

NOW = dt.datetime(2026, 11, 2, 12, tzinfo=dt.timezone.utc)
HOOK = Webhook(
    Settings({"ns": "t"}),
    Table({("t", None): TenantRow("t", None, 3, 8, budget_usd=100, spent_usd=90, fairshare=0.4)}, NOW),
    clock=lambda: NOW,
)
CLIENT = TestClient(create_app(HOOK))

junk = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=12,
)
quantity = st.one_of(
    st.integers(-5, 64),
    st.sampled_from(["1", "2", "1.5", "500m", "abc", "", " 3 ", "-1", "1e3"]),
    st.floats(allow_nan=False, allow_infinity=False),
    junk,
)
resources = st.fixed_dictionaries(
    {},
    optional={
        "limits": st.dictionaries(
            st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "cpu"]), quantity, max_size=2
        )
        | junk,
        "requests": junk,
    },
)
container = st.fixed_dictionaries({"name": st.text(max_size=5)}, optional={"resources": resources | junk})
pod_spec = st.fixed_dictionaries(
    {},
    optional={
        "containers": st.lists(container, max_size=3) | junk,
        "initContainers": st.lists(container, max_size=2) | junk,
        "nodeSelector": st.dictionaries(st.sampled_from(["nvidia.com/gpu.product", "x"]), st.text(max_size=6)) | junk,
    },
)
template = st.fixed_dictionaries({}, optional={"spec": pod_spec | junk})
obj = st.one_of(
    st.fixed_dictionaries({}, optional={"metadata": junk, "spec": pod_spec | junk}),
    st.fixed_dictionaries(
        {},
        optional={
            "spec": st.fixed_dictionaries(
                {},
                optional={
                    "parallelism": st.integers(-3, 9) | junk,
                    "template": template | junk,
                    "replicatedJobs": st.lists(
                        st.fixed_dictionaries({}, optional={"replicas": st.integers(-2, 4) | junk, "template": junk}),
                        max_size=2,
                    )
                    | junk,
                    "podSets": st.lists(
                        st.fixed_dictionaries(
                            {}, optional={"count": st.integers(-2, 4) | junk, "template": template | junk}
                        ),
                        max_size=2,
                    )
                    | junk,
                    "rayClusterSpec": junk,
                },
            )
            | junk
        },
    ),
    junk,
)
request = st.fixed_dictionaries(
    {"uid": st.text(min_size=1, max_size=10)},
    optional={
        "kind": st.fixed_dictionaries(
            {"kind": st.sampled_from(["Pod", "Job", "JobSet", "RayJob", "RayCluster", "Workload", "ConfigMap"])}
        )
        | junk,
        "namespace": st.sampled_from(["ns", "other", ""]) | junk,
        "operation": st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", "PATCH"]) | junk,
        "object": obj,
        "dryRun": st.booleans() | junk,
    },
)
review = st.one_of(
    st.fixed_dictionaries(
        {"apiVersion": st.just("admission.k8s.io/v1"), "kind": st.just("AdmissionReview"), "request": request}
    ),
    st.fixed_dictionaries({}, optional={"apiVersion": junk, "kind": junk, "request": request | junk}),
)


# Derandomized: CI runs the same 10,000 cases every time, so a red build always means a change broke something.
# GPULEDGER_FUZZ_RANDOM=1 explores new ones (two such runs of 10,000 passed before this landed).
@settings(
    max_examples=10_000,
    deadline=None,
    derandomize=not os.environ.get("GPULEDGER_FUZZ_RANDOM"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(review, st.sampled_from(["/validate", "/mutate"]))
def test_every_answer_is_a_review_or_a_4xx(doc, path):
    r = CLIENT.post(path, content=json.dumps(doc))
    assert r.status_code in (200, 400, 413), r.text
    body = r.json()
    if r.status_code != 200:
        assert isinstance(body["error"], str) and body["error"]
        return
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    resp = body["response"]
    assert resp["uid"] == doc["request"]["uid"] and isinstance(resp["allowed"], bool)
    if not resp["allowed"]:
        assert resp["status"]["code"] in (400, 403, 503) and resp["status"]["message"]
    assert all(isinstance(w, str) and len(w) <= 120 for w in resp.get("warnings", []))
    # The fallback that admits when a decision raises must never be what answered: that would be a bug hidden.
    assert not any("internal error" in w for w in resp.get("warnings", [])), resp
    if "patch" in resp:
        assert path == "/mutate" and resp["patchType"] == "JSONPatch"


def test_an_internal_error_admits_with_a_warning_not_a_500(monkeypatch):
    import enforcer.server

    def broken(*a, **kw):
        raise RuntimeError("a bug")

    monkeypatch.setattr(enforcer.server, "decide", broken)
    doc = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-9", "kind": {"kind": "Pod"}, "namespace": "ns", "object": {"spec": {}}},
    }
    r = CLIENT.post("/validate", content=json.dumps(doc))
    assert r.status_code == 200
    resp = r.json()["response"]
    assert resp["uid"] == "u-9" and resp["allowed"] is True and "internal error" in resp["warnings"][0]
    assert 'gpuledger_admission_bad_requests_total{status="internal"} 1.0' in CLIENT.get("/metrics").text
