"""The webhook as a running service: what `gpuledger enforcer serve` starts, in one function.

`serve` checks its inputs (the certificate and key, the replica's name), watches the namespaces' tenant labels when
it can, starts the audit writer and the decision table's refresh, serves over TLS and, on the way out, stops them
in the one safe order: the refresh first (it must not swap a table in after the audit is closed), the watch, then
the audit writer, whose last flush puts every decision of this replica into the lake.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuledger.config import Config
from gpuledger.enforcer.decide import Settings
from gpuledger.enforcer.server import Webhook
from gpuledger.enforcer.store import AuditWriter, load_table
from gpuledger.errors import GpuledgerError, LakeError, UsageError
from gpuledger.lake import check_name
from gpuledger.store import LakeRef

if TYPE_CHECKING:
    from apscheduler.schedulers.background import BackgroundScheduler

    from gpuledger.enforcer.namespaces import NamespaceTenants


def check_tls(cert: str, key: str) -> None:
    """UsageError naming both files when they are not a certificate and its private key (PEM)."""
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as e:
        raise UsageError(f"--cert {cert} / --key {key}: not a usable certificate and key: {e}") from None


def replica_name(replica: str | None) -> str:
    """The replica's name in the audit: the one given, else the host's short name. It names the replica's spool
    folder and lake files, so one that cannot is a UsageError naming --replica."""
    name = replica or socket.gethostname().split(".")[0]
    try:
        check_name("--replica", name)
    except LakeError as e:
        raise UsageError(str(e)) from None
    return name


def watch_namespaces(cfg: Config) -> tuple[NamespaceTenants | None, str | None]:
    """(a NamespaceTenants watching the tenant label, None) when the config names a label and a cluster answers;
    (None, why not) when there is no cluster or no kubernetes client: the config's namespace map still applies, so
    the webhook serves on it rather than refusing to start. (None, None) when no label is configured."""
    if not cfg.enforcer.tenant_label:
        return None, None
    try:
        from gpuledger.enforcer.namespaces import NamespaceTenants
        from gpuledger.kube_watch import load_api

        return NamespaceTenants(load_api(), cfg.enforcer.tenant_label), None
    except ImportError:
        return None, "the kubernetes client is not installed: pip install 'gpuledger[k8s]'"
    except GpuledgerError as e:  # no cluster to watch (a local run)
        return None, str(e)


@dataclass
class Service:
    """The webhook and what runs beside it: the audit writer, the decision table's refresh, the namespace watch."""

    hook: Webhook
    audit: AuditWriter
    scheduler: BackgroundScheduler
    namespaces: NamespaceTenants | None

    def stop(self) -> None:
        """Stop in order: the refresh, the watch, then the audit writer (its last flush). A second call does
        nothing."""
        if not self.scheduler.running:
            return
        self.scheduler.shutdown(wait=False)
        if self.namespaces is not None:
            self.namespaces.stop()
        self.audit.close()


def start(cfg: Config, lake: LakeRef, replica: str, namespaces: NamespaceTenants | None = None) -> Service:
    """The webhook over this cluster's rows of the lake's decision table (one lake may hold several clusters),
    reloaded every enforcer.refresh_s off the request path, with its audit writer and the namespace watch started."""
    from apscheduler.schedulers.background import BackgroundScheduler

    audit = AuditWriter(lake, replica, cfg.cluster)
    hook = Webhook(Settings.of(cfg), load_table(lake, cfg.cluster), audit, cluster=cfg.cluster, namespaces=namespaces)
    sched = BackgroundScheduler(timezone="UTC")
    sched.add_job(
        lambda: hook.set_table(load_table(lake, cfg.cluster)),
        "interval",
        seconds=cfg.enforcer.refresh_s,
        id="decision-table",
        coalesce=True,
        max_instances=1,
    )
    audit.start()
    sched.start()
    if namespaces is not None:
        namespaces.start()
    return Service(hook, audit, sched, namespaces)


def serve(
    cfg: Config,
    lake: LakeRef,
    cert: str,
    key: str,
    host: str,
    port: int,
    replica: str | None = None,
    say: Callable[[str], None] = print,
) -> None:
    """Serve POST /validate and /mutate over TLS until SIGTERM or Ctrl-C; `say` gets the lines for the operator."""
    import uvicorn

    from gpuledger.enforcer.connections import server_config
    from gpuledger.enforcer.server import create_app

    check_tls(cert, key)
    replica = replica_name(replica)
    namespaces, why = watch_namespaces(cfg)
    if why is not None:
        say(f"enforcer: namespace labels are not watched ({why}); tenants come from the config only")
    service = start(cfg, lake, replica, namespaces)
    say(f"enforcer on https://{host}:{port} (validate, mutate) over {lake}")
    try:
        # uvicorn re-raises SIGTERM once it has stopped, so the app's shutdown runs `stop`; `finally` covers a
        # server that never started (a port in use).
        uvicorn.Server(server_config(create_app(service.hook, on_stop=service.stop), host, port, cert, key)).run()
    finally:
        service.stop()
