"""`gpuledger enforcer certs` and `gpuledger enforcer serve` as a user runs them: a real process over real TLS."""

import copy
import json
import os
import shutil
import signal
import time

from gpuledger.config import TENANT_LABEL
from gpuledger.query import Lake
from gpuledger.spool import default_dir

from builders import serve_enforcer, stop_enforcer
from conftest import REPO
from k8s_apiserver import RecordedApiServer

RAW = json.loads((REPO / "tests" / "fixtures" / "admission" / "kubewarden_loadtesting_pod_create_v1.json").read_text())


def test_certs_name_the_service(cli, tmp_path):
    from cryptography import x509

    r = cli("enforcer", "certs", "--service", "gl", "--namespace", "ops", "--out", tmp_path / "tls")
    assert r.exit_code == 0, r.output
    cert = x509.load_pem_x509_certificate((tmp_path / "tls" / "tls.crt").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert sans == ["gl", "gl.ops", "gl.ops.svc", "gl.ops.svc.cluster.local"]
    assert oct((tmp_path / "tls" / "tls.key").stat().st_mode & 0o777) == "0o600"


def test_serve_refuses_a_bad_certificate(cli, tmp_path):
    (tmp_path / "c.pem").write_text("not a certificate")
    r = cli("enforcer", "serve", "--cert", tmp_path / "c.pem", "--key", tmp_path / "c.pem", "--lake", tmp_path / "l")
    assert r.exit_code != 0 and "not a usable certificate and key" in r.output and "Traceback" not in r.output


def serve(tmp_path, lake, replica, env=None):
    return serve_enforcer(tmp_path, lake, replica, env)


def stop(p, sig=signal.SIGINT) -> str:
    return stop_enforcer(p, sig)


def gpu_request(uid, namespace, gpus):
    """DERIVED from the kubewarden Pod CREATE: `gpus` H100s on its first container."""
    gpu = copy.deepcopy(RAW)
    gpu["request"].update(uid=uid, namespace=namespace)
    gpu["request"]["object"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    gpu["request"]["object"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    return gpu


def test_serve_answers_over_tls_and_audits_into_the_lake(analysed_lake, tmp_path):
    lake = tmp_path / "lake"
    shutil.copytree(analysed_lake, lake)
    # The analysed lake's table is from END, long ago: allow it any age, so the policies (not the failure mode) run.
    (tmp_path / "gpuledger.toml").write_text("[enforcer]\nmax_table_age_s = 1e12\n")
    # The cluster: the stand-in API server, with a namespace the config does not map, labelled for tenant vision.
    with RecordedApiServer() as api:
        api.emit(
            "ADDED", {"metadata": {"name": "lab", "uid": "ns-lab", "labels": {TENANT_LABEL: "vision"}}}, "Namespace"
        )
        env = os.environ | {
            "KUBECONFIG": str(api.kubeconfig(tmp_path / "kubeconfig")),
            "GPULEDGER_CONFIG": str(tmp_path / "gpuledger.toml"),
        }
        p, client = serve(tmp_path, lake, "r1", env)
        try:
            assert client.get("/readyz").status_code == 200  # the analysed lake has a decision table
            r = client.post("/validate", json=RAW).json()
            assert r["response"] == {"uid": RAW["request"]["uid"], "allowed": True}
            deadline = time.time() + 20
            while "gpuledger_labelled_namespaces 1.0" not in client.get("/metrics").text:
                assert time.time() < deadline, "the namespace watch never saw the labelled namespace"
                time.sleep(0.1)
            # 100 H100s asked in the labelled namespace, over vision's quota of 40.
            r = client.post("/validate", json=gpu_request("u-lab", "lab", 100)).json()["response"]
            assert r["allowed"] is False and r["status"]["message"].startswith("tenant vision uses ")
            assert "of 40 NVIDIA H100 80GB HBM3 GPUs; this Pod asks 100" in r["status"]["message"]
            client.close()
        finally:
            stop(p, signal.SIGTERM)  # what the kubelet sends: the audit is flushed on the way out
    with Lake(lake) as q:
        assert q.execute("SELECT uid, node, decision, tenant FROM admission_decisions ORDER BY ts").rows == [
            (RAW["request"]["uid"], "r1", "allow", None),
            ("u-lab", "r1", "deny", "vision"),
        ]
    assert not [f for f in default_dir(str(lake), "webhook-r1").glob("seg-*.wal") if f.stat().st_size]


def test_serve_without_a_cluster_says_labels_are_not_watched(tmp_path):
    p, client = serve(tmp_path, tmp_path / "lake", "r1")
    client.close()
    assert "namespace labels are not watched" in stop(p)


def test_kill_9_loses_no_decision(analysed_lake, tmp_path):
    lake = tmp_path / "lake"
    shutil.copytree(analysed_lake, lake)
    p, client = serve(tmp_path, lake, "doomed")
    uids = [f"k9-{i}" for i in range(50)]
    for uid in uids:
        assert client.post("/validate", json=gpu_request(uid, "vision-train", 1)).status_code == 200
    client.close()
    p.kill()  # SIGKILL right after the last answer: no flush, no clean shutdown
    p.communicate()
    assert not list((lake / "admission_decisions").glob("date=*/*.parquet"))  # nothing reached the lake yet...
    # ...and a replica of another name (a Deployment's restarted pod) adopts the dead one's spool on start.
    p, client = serve(tmp_path, lake, "successor")
    client.close()
    stop(p)
    with Lake(lake) as q:
        rows = q.execute("SELECT uid, node FROM admission_decisions ORDER BY uid").rows
    assert rows == sorted((uid, "doomed") for uid in uids)
    # replayed and its segments removed; LOCK stays (removing a LOCK another replica may have open is a race)
    assert sorted(f.name for f in default_dir(str(lake), "webhook-doomed").iterdir()) == ["LOCK"]


def test_serve_without_the_kubernetes_client_installed(tmp_path):
    # The kubernetes client is the optional [k8s] extra: without it the webhook serves on the config's tenants.
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text("import sys\nsys.modules['kubernetes'] = None\n")
    env = os.environ | {"PYTHONPATH": str(tmp_path / "site"), "GPULEDGER_CONFIG": ""}
    p, client = serve(tmp_path, tmp_path / "lake", "r1", env)
    assert client.get("/healthz").status_code == 200
    client.close()
    err = stop(p)
    assert "namespace labels are not watched (the kubernetes client is not installed" in err


def test_serve_refuses_a_replica_name_that_cannot_name_files(cli, tmp_path):
    cli("enforcer", "certs", "--out", tmp_path / "tls")
    tls = tmp_path / "tls"
    r = cli(
        "enforcer",
        "serve",
        "--cert",
        tls / "tls.crt",
        "--key",
        tls / "tls.key",
        "--lake",
        tmp_path / "l",
        "--replica",
        "bad/name",
    )
    assert r.exit_code != 0 and "--replica 'bad/name' cannot be used in a lake path" in r.output
    assert "Traceback" not in r.output
