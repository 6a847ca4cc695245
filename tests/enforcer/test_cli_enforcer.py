"""`gpuledger enforcer certs` and `gpuledger enforcer serve` as a user runs them: a real process over real TLS."""

import copy
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import httpx

from gpuledger.config import TENANT_LABEL
from gpuledger.query import Lake

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


def test_serve_answers_over_tls_and_audits_into_the_lake(cli, analysed_lake, tmp_path):
    lake = tmp_path / "lake"
    shutil.copytree(analysed_lake, lake)
    cli("enforcer", "certs", "--out", tmp_path / "tls")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The analysed lake's table is from END, long ago: allow it any age, so the policies (not the failure mode) run.
    (tmp_path / "gpuledger.toml").write_text("[enforcer]\nmax_table_age_s = 1e12\n")
    # The cluster: the stand-in API server, with a namespace the config does not map, labelled for tenant vision.
    api = RecordedApiServer().__enter__()
    api.emit("ADDED", {"metadata": {"name": "lab", "uid": "ns-lab", "labels": {TENANT_LABEL: "vision"}}}, "Namespace")
    (tmp_path / "kubeconfig").write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "t", "cluster": {"server": api.url}}],
                "contexts": [{"name": "t", "context": {"cluster": "t", "user": "u"}}],
                "users": [{"name": "u", "user": {}}],
                "current-context": "t",
            }
        )
    )
    env = os.environ | {
        "KUBECONFIG": str(tmp_path / "kubeconfig"),
        "GPULEDGER_CONFIG": str(tmp_path / "gpuledger.toml"),
    }
    env.pop("KUBERNETES_SERVICE_HOST", None)  # not in a pod, whatever runs the tests
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuledger.cli",
            "enforcer",
            "serve",
            "--cert",
            str(tmp_path / "tls" / "tls.crt"),
            "--key",
            str(tmp_path / "tls" / "tls.key"),
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
            "--lake",
            str(lake),
            "--replica",
            "r1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        # The certificate names the Service, so the client checks it against the CA with that name.
        client = httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=False, timeout=5)
        deadline = time.time() + 30
        while True:
            try:
                if client.get("/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                if time.time() > deadline or p.poll() is not None:
                    raise
                time.sleep(0.2)
        assert client.get("/readyz").status_code == 200  # the analysed lake has a decision table
        r = client.post("/validate", json=RAW).json()
        assert r["response"] == {"uid": RAW["request"]["uid"], "allowed": True}
        # DERIVED from the same request: 100 H100s asked in the labelled namespace, over vision's quota of 40.
        gpu = copy.deepcopy(RAW)
        gpu["request"].update(uid="u-lab", namespace="lab")
        gpu["request"]["object"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "100"}}
        gpu["request"]["object"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        deadline = time.time() + 20
        while "gpuledger_labelled_namespaces 1.0" not in client.get("/metrics").text:
            assert time.time() < deadline, "the namespace watch never saw the labelled namespace"
            time.sleep(0.1)
        r = client.post("/validate", json=gpu).json()["response"]
        assert r["allowed"] is False and r["status"]["message"].startswith("tenant vision uses ")
        assert "of 40 NVIDIA H100 80GB HBM3 GPUs; this Pod asks 100" in r["status"]["message"]
        client.close()
    finally:
        api.__exit__(None, None, None)
        p.send_signal(signal.SIGINT)
        try:
            err = p.communicate(timeout=30)[1]
        except subprocess.TimeoutExpired:
            p.kill()
            raise AssertionError("enforcer serve did not stop on Ctrl-C: " + p.communicate()[1]) from None
    assert "Traceback" not in err, err
    with Lake(lake) as q:
        assert q.execute("SELECT uid, node, decision, tenant FROM admission_decisions ORDER BY ts").rows == [
            (RAW["request"]["uid"], "r1", "allow", None),
            ("u-lab", "r1", "deny", "vision"),
        ]
