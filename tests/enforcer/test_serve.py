"""The webhook's service around the request path (enforcer/serve.py): its input checks, the namespace watch's
fallback, the decision table's refresh and the shutdown order. The served process is tests/enforcer/
test_cli_enforcer.py's."""

import dataclasses
import socket
import time

import pytest

from gpuledger import config
from gpuledger.enforcer import serve
from gpuledger.enforcer.store import AuditWriter
from gpuledger.errors import SpoolError, UsageError


def test_a_file_that_is_no_certificate_is_one_usage_error_naming_both(tmp_path):
    pem = tmp_path / "c.pem"
    pem.write_text("not a certificate")
    with pytest.raises(UsageError, match=f"--cert {pem} / --key {pem}: not a usable certificate and key"):
        serve.check_tls(str(pem), str(pem))


def test_the_replica_is_the_host_name_unless_given_and_must_name_files():
    assert serve.replica_name(None) == socket.gethostname().split(".")[0]
    assert serve.replica_name("r-2") == "r-2"
    with pytest.raises(UsageError, match="--replica 'bad/name' cannot be used in a lake path"):
        serve.replica_name("bad/name")


def test_no_tenant_label_means_no_watch_and_nothing_to_say():
    cfg = config.defaults()
    cfg = dataclasses.replace(cfg, enforcer=dataclasses.replace(cfg.enforcer, tenant_label=""))
    assert serve.watch_namespaces(cfg) == (None, None)


def test_without_a_cluster_the_watch_falls_back_to_the_config_and_says_why(tmp_path, monkeypatch):
    pytest.importorskip("kubernetes")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    namespaces, why = serve.watch_namespaces(config.defaults())
    assert namespaces is None
    assert why.startswith("k8s: no in-cluster service account and no usable kubeconfig")


def test_the_table_is_reloaded_every_refresh_s_and_stop_lets_go_of_everything(tmp_path, monkeypatch):
    loads = []
    monkeypatch.setattr(serve, "load_table", lambda lake, cluster: loads.append((lake, cluster)))
    cfg = config.defaults()
    cfg = dataclasses.replace(cfg, cluster="eu-1", enforcer=dataclasses.replace(cfg.enforcer, refresh_s=0.1))
    lake = tmp_path / "lake"
    service = serve.start(cfg, lake, "r1")
    try:
        with pytest.raises(SpoolError):  # the replica's spool is held while it serves
            AuditWriter(lake, "r1", "eu-1")
        time.sleep(0.55)
    finally:
        service.stop()
    n = len(loads)
    assert n >= 4 and set(loads) == {(lake, "eu-1")}  # once at the start, then about every 0.1 s
    time.sleep(0.3)
    assert len(loads) == n  # no reload after the stop
    AuditWriter(lake, "r1", "eu-1").close()  # the spool is let go: a successor takes it
    service.stop()  # a second stop does nothing


class _Step:
    def __init__(self, name: str, log: list) -> None:
        self.name, self.log, self.running = name, log, True

    def shutdown(self, wait: bool) -> None:
        self.log.append(self.name)
        self.running = False

    def stop(self) -> None:
        self.log.append(self.name)

    def close(self) -> None:
        self.log.append(self.name)


def test_stop_order_refresh_then_watch_then_the_audits_last_flush():
    """A refresh after the audit is closed would swap a table into a webhook that can no longer record; the audit
    goes last so that its flush has every decision the server answered."""
    log = []
    s = serve.Service(None, _Step("audit", log), _Step("refresh", log), _Step("watch", log))
    s.stop()
    s.stop()
    assert log == ["refresh", "watch", "audit"]
