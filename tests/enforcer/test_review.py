"""AdmissionReview parsing and responses, against the real requests and the Kubernetes docs' responses."""

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuledger.enforcer.review import MAX_BODY_BYTES, ReviewError, allow, deny, fit_warnings, parse

from conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "admission"


def docs_response(name, uid):
    return json.loads(
        (FIXTURES / f"k8s_docs_response_{name}_v1.json").read_text().replace("<value from request.uid>", uid)
    )


def test_the_real_kubewarden_request_parses():
    body = (FIXTURES / "kubewarden_loadtesting_pod_create_v1.json").read_bytes()
    r = parse(body)
    raw = json.loads(body)["request"]
    assert (r.uid, r.kind, r.namespace, r.name, r.operation, r.dry_run) == (
        raw["uid"],
        "Pod",
        "default",
        "nginx",
        "CREATE",
        False,
    )
    assert r.obj["spec"]["containers"][1]["name"] == "nginx"


def test_the_real_opa_request_without_dry_run_or_name_parses():
    import yaml

    doc = yaml.safe_load((FIXTURES / "opa_primer_pod_create_v1.yaml").read_text())
    r = parse(json.dumps(doc).encode())
    assert (r.kind, r.namespace, r.name, r.dry_run, r.labels) == ("Pod", "opa", "nginx", False, {"app": "nginx"})


def test_responses_match_the_kubernetes_docs():
    uid = "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert allow(uid) == docs_response("allow", uid)
    patch = [{"op": "add", "path": "/spec/replicas", "value": 3}]
    assert allow(uid, patch=patch) == docs_response("patch", uid)  # byte for byte, base64 included
    warnings = docs_response("warnings", uid)["response"]["warnings"]
    assert allow(uid, warnings=warnings) == docs_response("warnings", uid)
    d = deny(uid, "You cannot do this because it is Tuesday and your name starts with A")
    want = docs_response("deny_403", uid)
    want["response"]["status"]["reason"] = "Forbidden"  # ours also names the reason (metav1.StatusReasonForbidden)
    assert d == want


def test_warnings_are_wrapped_to_120_characters_and_cut_at_4096_in_all():
    long = "tenant vision holds 6 GPUs idle for 2 h or more (limit 4): " + ", ".join(
        f"v/pod-{i} (1 GPU, 3 h)" for i in range(6)
    )
    w = fit_warnings([long] + ["y" * 100] * 50)
    # wrapped at spaces, nothing lost: the continuation starts with an ellipsis
    assert len(w[0]) <= 120 and w[1].startswith("… ") and (w[0] + " " + w[1][2:]) == long
    assert all(len(x) <= 120 for x in w) and sum(map(len, w)) <= 4096 and len(w) == 2 + 39
    assert fit_warnings(["x" * 300]) == ["x" * 120, "… " + "x" * 118, "… " + "x" * 62]


@pytest.mark.parametrize(
    "body,status,message",
    [
        (b"not json", 400, "request body is not JSON"),
        (b"[1, 2]", 400, "expected an AdmissionReview object"),
        (
            b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}',
            400,
            "apiVersion 'admission.k8s.io/v1beta1': only admission.k8s.io/v1 is served",
        ),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}', 400, "kind 'Pod': expected AdmissionReview"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', 400, "request: missing"),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"kind": {"kind": "Pod"}}}',
            400,
            "request.uid: missing",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}}',
            400,
            "request.kind: expected",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", '
            b'"kind": {"kind": "Pod"}, "dryRun": "yes"}}',
            400,
            "request.dryRun 'yes'",
        ),
        (b"\xff\xfe", 400, "request body is not JSON"),
        (b" " * (MAX_BODY_BYTES + 1), 413, "over the 6,291,456-byte limit"),
    ],
)
def test_bad_bodies_are_4xx_with_the_field_named(body, status, message):
    with pytest.raises(ReviewError) as e:
        parse(body)
    assert e.value.status == status and message in str(e.value)


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    )
)
def test_any_json_parses_or_is_a_4xx(doc):
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": doc}).encode()
    try:
        parse(body)
    except ReviewError as e:
        assert e.status in (400, 413)


def test_patch_is_base64_json_patch():
    r = allow("u", patch=[{"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1priority-class", "value": "high"}])
    ops = json.loads(base64.b64decode(r["response"]["patch"]))
    assert r["response"]["patchType"] == "JSONPatch" and ops[0]["value"] == "high"
