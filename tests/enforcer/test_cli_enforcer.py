"""`gpuledger enforcer certs` and `gpuledger enforcer serve` as a user runs them: a real process over real TLS."""

import json
import shutil
import signal
import socket
import subprocess
import sys
import time

import httpx

from gpuledger.query import Lake

from conftest import REPO

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
        client.close()
    finally:
        p.send_signal(signal.SIGINT)
        try:
            err = p.communicate(timeout=30)[1]
        except subprocess.TimeoutExpired:
            p.kill()
            raise AssertionError("enforcer serve did not stop on Ctrl-C: " + p.communicate()[1]) from None
    assert "Traceback" not in err, err
    with Lake(lake) as q:
        assert q.execute("SELECT uid, node, decision FROM admission_decisions").rows == [
            (RAW["request"]["uid"], "r1", "allow")
        ]
