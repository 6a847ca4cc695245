"""Source `dcgm` over a Kubernetes Service: scrape every ready endpoint of the dcgm-exporter Service, following it.

`collector.dcgm_service = "namespace/name"` (and `dcgm_port`, the port's name) replaces a fixed `dcgm_urls` list:
the Service's EndpointSlices (discovery.k8s.io/v1, label `kubernetes.io/service-name`) are listed again every
`REFRESH_S`, so an exporter on a GPU node added later is scraped within that time, and one on a node that went
is dropped. A periodic list rather than a watch: a Service of a few thousand endpoints is a few pages every 30 s,
the only permission it needs is `list` in that one namespace, and there is no stream to resume.

Each endpoint's node is its `nodeName` (a DaemonSet pod's address says nothing about the node); a target that stays
keeps its state (label sets, Xid state, backoff) across lists. A list that fails is a `scrape_error` health event
and the targets of the last good list go on being scraped; with no target at all the source fails as a whole
(SourceError: the runner backs off and says why).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gpuledger.collector.dcgm.columns import PageReader
from gpuledger.collector.dcgm.rows import RowBuilder
from gpuledger.collector.dcgm_source import DcgmSource, Target
from gpuledger.collector.source import Batch
from gpuledger.config import Config
from gpuledger.errors import SourceError

log = logging.getLogger(__name__)
SERVICE_LABEL = "kubernetes.io/service-name"  # set by the EndpointSlice controller on every slice of a Service
REFRESH_S = 30.0
PAGE = 500
REQUEST_TIMEOUT_S = 10.0
# Dual-stack Services have one slice per address family, holding the same pods: the first family wins.
FAMILY_ORDER = {"IPv4": 0, "IPv6": 1, "FQDN": 2}


@dataclass(frozen=True)
class Endpoint:
    url: str
    node: str  # the endpoint's nodeName, else its address


def endpoints(slices: list, service: str, port_name: str) -> list[Endpoint]:
    """The /metrics URL of every ready endpoint in a Service's EndpointSlices (kubernetes client V1EndpointSlice
    objects), sorted by URL. Raises SourceError naming the Service when a slice has no port of that name (`""`: a
    slice must have exactly one port)."""
    out: dict[str, Endpoint] = {}
    seen: set[tuple[str, str]] = set()  # the pods already taken, across address families
    for s in sorted(slices, key=lambda s: (FAMILY_ORDER.get(s.address_type, 3), s.metadata.name or "")):
        if not s.endpoints:
            continue
        port = _port(s, service, port_name)
        for e in s.endpoints:
            # The API: a nil `ready` is an unknown state, which consumers should take as ready.
            if e.conditions is not None and e.conditions.ready is False:
                continue
            ref = e.target_ref
            pod = (ref.namespace or "", ref.name or "") if ref is not None else None
            if pod is not None and pod in seen:
                continue
            address = e.addresses[0]  # the controller writes exactly one; no meaning is defined for others
            url = f"http://{_host(address, s.address_type)}:{port}/metrics"
            if url not in out:
                out[url] = Endpoint(url, e.node_name or address)
            if pod is not None:
                seen.add(pod)
    return [out[u] for u in sorted(out)]


def _port(s, service: str, port_name: str) -> int:
    ports = [p for p in s.ports or [] if p.port is not None]
    named = [p for p in ports if (p.name or "") == port_name] if port_name else ports
    if len(named) != 1:
        have = ", ".join(sorted(repr(p.name or "") for p in ports)) or "none"
        want = f"no port named {port_name!r}" if port_name else "more than one port (set collector.dcgm_port)"
        raise SourceError(f"dcgm: Service {service}: EndpointSlice {s.metadata.name} has {want} (ports: {have})")
    return named[0].port


def _host(address: str, family: str) -> str:
    if family == "IPv6" or (family != "FQDN" and _is_ipv6(address)):
        return f"[{address}]"
    return address


def _is_ipv6(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).version == 6
    except ValueError:
        return False


class ServiceEndpoints:
    """Lists the EndpointSlices of one Service through the kubernetes client, paging as the API asks."""

    def __init__(self, service: str, port_name: str, api_client=None):
        from kubernetes import client

        from gpuledger.kube_watch import load_api

        self.service = service
        self.namespace, _, self.name = service.partition("/")
        self.port_name = port_name
        self.api = client.DiscoveryV1Api(api_client if api_client is not None else load_api())

    def list(self) -> list[Endpoint]:
        """The Service's ready endpoints; SourceError with one line naming the Service and what went wrong."""
        from kubernetes.client.exceptions import ApiException

        slices, cont = [], None
        try:
            while True:
                page = self.api.list_namespaced_endpoint_slice(
                    self.namespace,
                    label_selector=f"{SERVICE_LABEL}={self.name}",
                    limit=PAGE,
                    _continue=cont,
                    _request_timeout=REQUEST_TIMEOUT_S,
                )
                slices += page.items or []
                cont = page.metadata._continue
                if not cont:
                    break
        except ApiException as e:
            hint = {403: " (the central collector's Role must allow list on endpointslices in that namespace)"}
            raise SourceError(
                f"dcgm: cannot list the EndpointSlices of Service {self.service}: {e.status} {e.reason}"
                f"{hint.get(e.status, '')}"
            ) from e
        except Exception as e:  # urllib3's connection and timeout errors: many types, one meaning here
            raise SourceError(f"dcgm: cannot list the EndpointSlices of Service {self.service}: {e}") from e
        return endpoints(slices, self.service, self.port_name)


class DiscoveredDcgmSource:
    """Source `dcgm` whose targets are a Service's ready endpoints, listed again every `refresh_s`."""

    name = "dcgm"

    def __init__(
        self,
        cfg: Config,
        lister: Callable[[], list[Endpoint]],
        service: str,
        refresh_s: float = REFRESH_S,
        make_source: Callable[[Config, list[str]], DcgmSource] = DcgmSource,
    ):
        self.cfg = cfg
        self.lister = lister
        self.service = service
        self.refresh_s = refresh_s
        self.make_source = make_source
        self.src: DcgmSource | None = None  # made by the first list with an endpoint (DcgmSource needs one)
        self.next_list_s = 0.0
        self.lists = 0

    def collect(self, now_s: float) -> Iterator[Batch]:
        if now_s >= self.next_list_s or not self._targets():
            self.next_list_s = now_s + self.refresh_s
            try:
                found = self.lister()
                self.lists += 1
            except SourceError as e:
                if not self._targets():
                    raise
                detail = f"{e}; scraping the {len(self._targets())} endpoints of the last good list"
                log.warning("%s", detail)
                yield Batch.from_rows("health_events", [self._event(now_s, detail)])
            else:
                self._update(found)
        if not self._targets():
            raise SourceError(
                f"dcgm: Service {self.service} has no ready endpoint (is dcgm-exporter running on the GPU nodes?)"
            )
        yield from self.src.collect(now_s)  # type: ignore[union-attr]

    def _targets(self) -> list[Target]:
        return self.src.targets if self.src is not None else []

    def _update(self, found: list[Endpoint]) -> None:
        old: dict[str, Target] = {}
        if self.src is None:
            if not found:
                return
            self.src = self.make_source(self.cfg, [e.url for e in found])  # its targets are named by URL: ours below
        else:
            old = {t.url: t for t in self.src.targets}
        new = [old.get(e.url) or self._target(e) for e in found]
        added, gone = {e.url for e in found} - set(old), set(old) - {e.url for e in found}
        if added or gone:
            log.info("dcgm: Service %s: %d endpoints (%d new, %d gone)", self.service, len(new), len(added), len(gone))
            self.src._first = 0  # the round-robin start pointed into the old list
        self.src.targets = new

    def _target(self, e: Endpoint) -> Target:
        return Target(e.url, e.node, PageReader(RowBuilder(self.cfg.cluster), e.node))

    def _event(self, now_s: float, detail: str) -> dict:
        return {
            "ts": int(now_s * 1e6),
            "cluster": self.cfg.cluster,
            "node": None,
            "gpu_uuid": None,
            "kind": "scrape_error",
            "code": None,
            "detail": detail,
            "source": self.name,
        }

    def close(self) -> None:
        if self.src is not None:
            self.src.close()


def from_config(cfg: Config, api_client=None) -> DiscoveredDcgmSource:
    """Source dcgm over `collector.dcgm_service`, in-cluster or from the kubeconfig (collector/dcgm_source.py)."""
    service = cfg.collector.dcgm_service
    try:
        lister = ServiceEndpoints(service, cfg.collector.dcgm_port, api_client)
    except ImportError as e:
        need = "pip install 'gpuledger[k8s]'"
        raise SourceError(f"dcgm: collector.dcgm_service needs the kubernetes client: {need} ({e})") from e
    return DiscoveredDcgmSource(cfg, lister.list, service)
