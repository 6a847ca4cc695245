"""`gpuledger enforcer manifest`: each object deserialises into the kubernetes client's typed models and back
unchanged (a schema check of field names and types), with the defaults the webhook needs.

Not here yet: `kubectl apply --dry-run=client` (kubectl still asks a server for API discovery first)."""

import pytest
import yaml
from kubernetes import client

MODELS = {
    "ServiceAccount": "V1ServiceAccount",
    "ClusterRole": "V1ClusterRole",
    "ClusterRoleBinding": "V1ClusterRoleBinding",
    "Secret": "V1Secret",
    "Deployment": "V1Deployment",
    "Service": "V1Service",
    "ValidatingWebhookConfiguration": "V1ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration": "V1MutatingWebhookConfiguration",
}


@pytest.fixture
def manifest(cli, tmp_path):
    cli("enforcer", "certs", "--out", tmp_path / "tls", "--namespace", "ops")
    r = cli("enforcer", "manifest", "--namespace", "ops", "--tls-dir", tmp_path / "tls", "--replicas", 3)
    assert r.exit_code == 0, r.output
    return r.output


def test_every_object_fits_its_typed_model(manifest):
    docs = list(yaml.safe_load_all(manifest))
    assert [d["kind"] for d in docs] == list(MODELS)
    api = client.ApiClient()
    for d in docs:
        model = api._ApiClient__deserialize(d, MODELS[d["kind"]])
        assert api.sanitize_for_serialization(model) == d, d["kind"]  # no field dropped as unknown


def test_the_defaults_the_issue_asks_for(manifest):
    docs = {d["kind"]: d for d in yaml.safe_load_all(manifest)}
    assert docs["Deployment"]["spec"]["replicas"] == 3
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for hook in docs[kind]["webhooks"]:
            assert (hook["failurePolicy"], hook["timeoutSeconds"], hook["sideEffects"]) == ("Ignore", 3, "NoneOnDryRun")
            assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "ops"]
            assert hook["clientConfig"]["caBundle"] and hook["clientConfig"]["service"]["namespace"] == "ops"
    pods = docs["ValidatingWebhookConfiguration"]["webhooks"][0]
    assert pods["rules"][0]["resources"] == ["pods"] and "nvidia.com/" in pods["matchConditions"][0]["expression"]


def test_a_tls_dir_without_the_files_is_named(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    r = cli("enforcer", "manifest", "--tls-dir", tmp_path / "empty")
    assert r.exit_code != 0 and "no ca.crt" in r.output
