"""The admission webhook: an ASGI app (starlette) served over TLS by uvicorn.

Routes: POST /validate and /mutate (AdmissionReview v1 in and out), GET /healthz (the process answers), /readyz
(ready once a decision table is loaded), /metrics (Prometheus: decisions by outcome, tenant and policy; latency;
the table's age). The hot path reads only memory: the decision table (loaded from the lake by `load_table`,
refreshed by apscheduler off the request path) and the recent admissions. Each decision is queued for the audit
writer, which appends them to the lake's admission_decisions in the background: the response never waits on disk.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from gpuledger.enforcer.decide import Outcome, Recent, Settings, Table, decide, table_state
from gpuledger.enforcer.review import MAX_BODY_BYTES, ReviewError, allow, parse
from gpuledger.enforcer.store import AuditWriter

if TYPE_CHECKING:  # the kubernetes client is optional: only a namespace watch needs it
    from gpuledger.enforcer.namespaces import NamespaceTenants

log = logging.getLogger(__name__)


class Webhook:
    def __init__(
        self,
        settings: Settings,
        table: Table | None = None,
        audit: AuditWriter | None = None,
        cluster: str = "default",
        clock=lambda: dt.datetime.now(dt.timezone.utc),
        namespaces: NamespaceTenants | None = None,
    ):
        self.settings, self.table, self.audit, self.cluster, self.clock = settings, table, audit, cluster, clock
        self.namespaces = namespaces  # tenants from namespace labels, kept by a watch (None: the config's map only)
        self.recent = Recent(settings.enforcer.burst_window_s)
        self._state: str | None = None  # missing, stale or fresh: the log says when it changes
        self._lock = threading.Lock()  # decisions of concurrent requests see each other's admissions
        r = self.registry = CollectorRegistry()
        self.decisions = Counter(
            "gpuledger_admission_decisions",
            "Admission decisions (dry runs excluded)",
            ["decision", "tenant", "policy"],
            registry=r,
        )
        self.latency = Histogram(
            "gpuledger_admission_latency_seconds",
            "Time to decide, request body to response",
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
            registry=r,
        )
        self.table_age = Gauge("gpuledger_decision_table_age_seconds", "Age of the decision table in use", registry=r)
        self.table_age.set_function(self._age)
        self.stale = Gauge(
            "gpuledger_decision_table_stale", "1 when the table is missing or older than the bound", registry=r
        )
        self.stale.set_function(lambda: 0.0 if self._state_now()[0] == "fresh" else 1.0)
        Gauge(
            "gpuledger_labelled_namespaces", "Namespaces whose tenant comes from their label (watched)", registry=r
        ).set_function(lambda: len(self.namespaces) if self.namespaces is not None else 0)
        Gauge(
            "gpuledger_namespace_watch_errors", "Failed namespace list/watch calls since start", registry=r
        ).set_function(lambda: self.namespaces.watcher.stats.errors if self.namespaces is not None else 0)
        self.bad_requests = Counter(
            "gpuledger_admission_bad_requests", "Bodies refused with a 4xx", ["status"], registry=r
        )
        self.audit_errors = Counter(
            "gpuledger_audit_errors", "Decisions the audit spool could not take (answered all the same)", registry=r
        )
        self.set_table(table)

    def _state_now(self) -> tuple[str, float | None]:
        return table_state(self.table, self.clock(), self.settings.enforcer.max_table_age_s)

    def _age(self) -> float:
        age = self._state_now()[1]
        return -1.0 if age is None else age

    def set_table(self, table: Table | None) -> None:
        """Swap in a (re)loaded table, and say in the log when it turns stale or fresh again (each reload checks:
        a lake the analytics stopped writing keeps giving the same, ageing table)."""
        self.table = table  # one reference swap: a request sees the old table or the new one, never a mix
        state, age = self._state_now()
        if state != "fresh" and state != self._state:
            what = "no decision table" if age is None else f"the decision table is {age / 60:.0f} min old"
            en = self.settings.enforcer
            log.warning(
                "enforcer: %s (limit %.0f min): GPU workloads are %s until the analytics write a fresh one",
                what,
                en.max_table_age_s / 60,
                "refused (failure_mode deny)" if en.failure_mode == "deny" else "admitted unchecked",
            )
        elif state == "fresh" and self._state in ("missing", "stale"):
            log.warning("enforcer: the decision table is fresh again (%.0f s old): policies apply", age)
        self._state = state

    async def review(self, request: Request, mutate: bool) -> Response:
        t0 = time.perf_counter()
        body = await _read_body(request)
        if body is None:
            self.bad_requests.labels("413").inc()
            return JSONResponse({"error": f"request body over the {MAX_BODY_BYTES:,}-byte limit"}, 413)
        try:
            r = parse(body)
        except ReviewError as e:
            self.bad_requests.labels(str(e.status)).inc()
            return JSONResponse({"error": str(e)}, e.status)
        try:
            with self._lock:  # decide only reads the recent admissions; what it admits is recorded before the next
                now = self.clock()
                o = decide(r, self.table, self.settings, self.recent, now, mutate, self.namespaces)
                self.recent.record(now.timestamp(), o)
        except Exception:  # a bug must not block the API server: admit, say so, count it, log it, audit it
            log.exception("enforcer: could not decide on %s %s/%s (uid %s)", r.kind, r.namespace, r.name, r.uid)
            self.bad_requests.labels("internal").inc()
            msg = "gpuledger could not check this workload (an internal error, logged): admitted unchecked"
            o = Outcome(allow(r.uid, [msg]), "warn", "internal-error", None, msg, None, None, 0.0)
        latency = time.perf_counter() - t0
        # /mutate is called for the same objects as /validate: it is counted and audited only when fair share did
        # something, so each workload is one decision.
        recorded = not mutate or o.policy is not None
        if not r.dry_run and recorded:
            self.decisions.labels(o.decision, o.tenant or "", o.policy or "").inc()
            self.latency.observe(latency)
        if self.audit is not None and recorded:
            self._audit(r, o, latency)
        return JSONResponse(o.response)

    def _audit(self, r, o, latency: float) -> None:
        """One audit row; a lake or spool that cannot take it is logged and counted, and the answer still goes
        out: a 500 here would be a webhook error, which failurePolicy Ignore turns into an admission."""
        try:
            self.audit.put(
                {
                    "ts": int(self.clock().timestamp() * 1e6),
                    "cluster": self.cluster,
                    "node": self.audit.replica,
                    "uid": r.uid,
                    "tenant": o.tenant,
                    "namespace": r.namespace,
                    "kind": r.kind,
                    "name": r.name,
                    "gpu_model": o.gpu_model,
                    "gpus": float(o.gpus),
                    "decision": o.decision,
                    "policy": o.policy,
                    "mode": o.mode,
                    "reason": o.reason or None,
                    "policy_version": self.settings.enforcer.policy_version,
                    "dry_run": r.dry_run,
                    "latency_s": latency,
                    "workload_class": o.workload_class,
                }
            )
        except Exception:
            log.exception(
                "enforcer: could not audit the decision on %s %s/%s (uid %s)", r.kind, r.namespace, r.name, r.uid
            )
            self.audit_errors.inc()


async def _read_body(request: Request) -> bytes | None:
    """The body, or None past the limit (read in chunks: a huge body is refused without holding it all)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(hook: Webhook, on_stop: Callable[[], None] | None = None) -> Starlette:
    """`on_stop` runs when the server shuts down gracefully (SIGTERM from the kubelet, or Ctrl-C): uvicorn
    re-raises SIGTERM once it has stopped, which kills the process before code after `uvicorn.run` could run."""

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        yield
        if on_stop is not None:
            on_stop()

    async def validate(request: Request) -> Response:
        return await hook.review(request, mutate=False)

    async def mutate(request: Request) -> Response:
        return await hook.review(request, mutate=True)

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(_: Request) -> Response:
        # With failure mode deny, a replica without a table must still be reachable: it is the one that refuses.
        # Otherwise the API server finds no endpoint, and failurePolicy Ignore admits everything unchecked.
        if hook.table is None and hook.settings.enforcer.failure_mode != "deny":
            return PlainTextResponse("no decision table loaded yet", 503)
        if hook.namespaces is not None and hook.namespaces.watcher.stats.lists == 0:
            return PlainTextResponse("namespace labels not listed yet", 503)
        return PlainTextResponse("ready")

    async def metrics(_: Request) -> Response:
        return Response(generate_latest(hook.registry), media_type=CONTENT_TYPE_LATEST)

    return Starlette(
        lifespan=lifespan,
        routes=[
            Route("/validate", validate, methods=["POST"]),
            Route("/mutate", mutate, methods=["POST"]),
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/metrics", metrics),
        ],
    )
