"""Fuzz the webhook endpoint (hypothesis, 10,000 cases, and the hostile bodies probing found): no crash, no 500,
no hang; every answer is a valid AdmissionReview for the request's uid, or a 4xx with an error, and every
AdmissionReview /validate answers is audited. In process (starlette's TestClient): TLS is tested in
test_server_tls.py, slow clients in test_connections.py; this is about what the handler does with anything a
client can send."""

import datetime as dt
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from gpuledger.enforcer.decide import Settings, Table
from gpuledger.enforcer.policies import TenantRow
from gpuledger.enforcer.server import Webhook, create_app

NOW = dt.datetime(2026, 11, 2, 12, tzinfo=dt.timezone.utc)


class Audit:
    """The audit writer's interface, keeping the rows in memory."""

    replica = "fuzz"

    def __init__(self):
        self.rows = []

    def put(self, row: dict) -> None:
        self.rows.append(row)


AUDIT = Audit()
HOOK = Webhook(
    Settings({"ns": "t"}),
    Table({("t", None): TenantRow("t", None, 3, 8, budget_usd=100, spent_usd=90, fairshare=0.4)}, NOW),
    AUDIT,
    clock=lambda: NOW,
)
CLIENT = TestClient(create_app(HOOK))

# Any code point, unpaired surrogates included (hypothesis leaves them out by default): json.dumps escapes them.
text = st.text(st.characters(exclude_categories=()), max_size=12)
junk = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False) | text,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=12,
)
huge = st.integers(2**31 - 2, 10**4299) | st.integers(-(10**4299), -(2**63))  # past int32 and int64, to 4,300 digits
quantity = st.one_of(
    st.integers(-5, 64),
    huge,
    st.sampled_from(["1", "2", "1.5", "500m", "abc", "", " 3 ", "-1", "1e3", "9" * 401, "9" * 5001, "0" * 500 + "2"]),
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
        "nodeSelector": st.dictionaries(st.sampled_from(["nvidia.com/gpu.product", "x"]), text) | junk,
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
                    "parallelism": st.integers(-3, 9) | huge | junk,
                    "template": template | junk,
                    "replicatedJobs": st.lists(
                        st.fixed_dictionaries({}, optional={"replicas": st.integers(-2, 4) | huge, "template": junk}),
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
    {"uid": st.text(st.characters(exclude_categories=()), min_size=1, max_size=10)},
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
    audited = len(AUDIT.rows)
    r = CLIENT.post(path, content=json.dumps(doc))
    assert r.status_code in (200, 400, 413), r.text
    body = r.json()
    if r.status_code != 200:
        assert isinstance(body["error"], str) and body["error"]
        return
    assert path == "/mutate" or len(AUDIT.rows) == audited + 1, "a /validate answer was not audited"
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


def review_body(kind: str, obj: str) -> str:
    """An AdmissionReview around `obj`, given as JSON text (so it can hold numbers json.dumps would refuse)."""
    head = '{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u-h", '
    return head + f'"kind": {{"kind": "{kind}"}}, "namespace": "ns", "object": {obj}}}}}'


def pod_with_gpus(q: str) -> str:
    return f'{{"spec": {{"containers": [{{"name": "c", "resources": {{"limits": {{"nvidia.com/gpu": {q}}}}}}}]}}}}'


# Hostile bodies probing found (each gave an HTTP 500, or "admitted unchecked" with no audit row): the status
# expected, and for AdmissionReviews the words of the denial.
HOSTILE = {
    "1,500 levels of lists": ("[" * 1500 + "]" * 1500, 400, "nested too deeply"),
    "1,500 levels of objects": ('{"a":' * 1500 + "1" + "}" * 1500, 400, "nested too deeply"),
    "a top-level integer of 4,301 digits": ("7" * 4301, 400, "an integer of 4,301 digits"),
    "a 5,001-digit integer inside": (review_body("Pod", pod_with_gpus("9" * 5001)), 400, "5,001 digits"),
    "a GPU quantity of 401 digits": (review_body("Pod", pod_with_gpus('"' + "9" * 401 + '"')), 200, "more GPUs"),
    "a GPU quantity of 5,001 digits": (review_body("Pod", pod_with_gpus('"' + "9" * 5001 + '"')), 200, "more GPUs"),
    "a 401-digit integer GPU quantity": (review_body("Pod", pod_with_gpus("9" * 401)), 200, "more GPUs"),
    "an int64-and-one GPU quantity": (review_body("Pod", pod_with_gpus(str(2**63))), 200, "more GPUs"),
    "a GPU quantity of 1e400": (review_body("Pod", pod_with_gpus("1e400")), 200, "not a whole number"),
    "an unpaired surrogate in the uid": (review_body("Pod", "{}").replace('"u-h"', '"u-\\ud800"'), 400, "surrogate"),
    "an unpaired surrogate in a name, as bytes": (
        review_body("Pod", '{"metadata": {"name": "aX"}}').encode().replace(b"aX", b"a\xed\xa0\x80"),
        400,
        "surrogate",
    ),
    "an unpaired surrogate in the GPU model": (
        review_body("Pod", pod_with_gpus('"1"')[:-1] + ', "nodeSelector": {"nvidia.com/gpu.product": "H\\udc00"}}'),
        400,
        "surrogate",
    ),
    "parallelism 10**400": (
        review_body("Job", '{"spec": {"parallelism": 1' + "0" * 400 + ', "template": ' + pod_with_gpus('"1"') + "}}"),
        200,
        "more pods than Kubernetes counts",
    ),
    "JobSet replicas 2**31": (
        review_body(
            "JobSet",
            '{"spec": {"replicatedJobs": [{"replicas": 2147483648, "template": {"spec": {"template": '
            + pod_with_gpus("1")
            + "}}}]}}",
        ),
        200,
        "more pods than Kubernetes counts",
    ),
}


@pytest.mark.parametrize("body,status,words", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_bodies_get_a_4xx_or_an_audited_denial(body, status, words):
    audited = len(AUDIT.rows)
    r = CLIENT.post("/validate", content=body)
    assert r.status_code == status, r.text
    if status != 200:
        assert words in r.json()["error"] and len(AUDIT.rows) == audited
        return
    resp = r.json()["response"]
    assert resp["uid"] == "u-h" and resp["allowed"] is False and resp["status"]["code"] == 400
    assert words in resp["status"]["message"] and len(resp["status"]["message"]) < 300
    assert len(AUDIT.rows) == audited + 1
    row = AUDIT.rows[-1]
    assert (row["uid"], row["decision"], row["policy"], row["gpus"]) == ("u-h", "deny", "request", 0.0)


def test_a_surrogate_pair_is_text_like_any_other():
    audited = len(AUDIT.rows)
    r = CLIENT.post("/validate", content=review_body("Pod", '{"metadata": {"name": "run-\\ud83d\\ude80"}}'))
    assert r.status_code == 200 and r.json()["response"]["uid"] == "u-h"
    assert AUDIT.rows[audited:] and AUDIT.rows[-1]["name"] == "run-\U0001f680"


def test_an_internal_error_admits_with_a_warning_not_a_500(monkeypatch):
    import gpuledger.enforcer.server as server_mod

    def broken(*a, **kw):
        raise RuntimeError("a bug")

    monkeypatch.setattr(server_mod, "decide", broken)
    doc = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-9", "kind": {"kind": "Pod"}, "namespace": "ns", "object": {"spec": {}}},
    }
    audited = len(AUDIT.rows)
    r = CLIENT.post("/validate", content=json.dumps(doc))
    assert r.status_code == 200
    resp = r.json()["response"]
    assert resp["uid"] == "u-9" and resp["allowed"] is True and "internal error" in resp["warnings"][0]
    assert len(AUDIT.rows) == audited + 1  # admitted unchecked, and the audit says so
    assert (AUDIT.rows[-1]["uid"], AUDIT.rows[-1]["decision"], AUDIT.rows[-1]["policy"]) == (
        "u-9",
        "warn",
        "internal-error",
    )
    assert 'gpuledger_admission_bad_requests_total{status="internal"} 1.0' in CLIENT.get("/metrics").text
