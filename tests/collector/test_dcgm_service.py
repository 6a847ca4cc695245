"""Source dcgm over a Service (collector/k8s/endpoints.py): the ready endpoints of the dcgm-exporter Service's
EndpointSlices, listed through the real kubernetes client from the stand-in API server, are scraped over real HTTP
from exporters on loopback addresses; each endpoint's node is its nodeName; the list follows the Service."""

import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes import client

from gpuledger.collector.k8s.endpoints import REFRESH_S, DiscoveredDcgmSource, endpoints, from_config
from gpuledger.config import CollectorConfig, Config
from gpuledger.errors import SourceError

from k8s_apiserver import RecordedApiServer

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"
SERVICE = "gpu-operator/nvidia-dcgm-exporter"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/gpu-operator/endpointslices"
T = 1_800_000_000.0
# One L4 GPU, the Hostname labels taken out: the node must then come from the endpoint, not the page.
PAGE = re.sub(rb',?Hostname="[^"]*"', b"", (FIX / "l4-aws-kops-gpu-operator-580.105.08.prom").read_bytes())
ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3")  # Linux answers on all of 127/8


class Exporter(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)


@pytest.fixture(scope="module")
def port():
    """One dcgm-exporter per loopback address, all on one port (a DaemonSet's pods share their Service's port)."""
    servers = [ThreadingHTTPServer((ADDRESSES[0], 0), Exporter)]
    p = servers[0].server_address[1]
    try:
        servers += [ThreadingHTTPServer((a, p), Exporter) for a in ADDRESSES[1:]]
    except OSError as e:
        pytest.skip(f"cannot listen on the loopback addresses {ADDRESSES} at port {p}: {e}")
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield p
    for s in servers:
        s.shutdown()
        s.server_close()


def endpoint(address, node, ready=True, pod=None):
    e = {"addresses": [address], "nodeName": node, "targetRef": {"kind": "Pod", "namespace": "gpu-operator"}}
    e["targetRef"]["name"] = pod or f"nvidia-dcgm-exporter-{node}"
    if ready is not None:  # the API allows `ready` absent: unknown, which consumers take as ready
        e["conditions"] = {"ready": ready, "serving": ready, "terminating": not ready}
    return e


def slice_(name, eps, ports, service="nvidia-dcgm-exporter", family="IPv4", namespace="gpu-operator"):
    """An EndpointSlice as the API server sends it (discovery.k8s.io/v1)."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            },
        },
        "addressType": family,
        "endpoints": eps,
        "ports": [{"name": n, "port": p, "protocol": "TCP"} for n, p in ports],
    }


def cfg(**collector):
    return Config(cluster="eu-1", collector=CollectorConfig(interval_s=10, dcgm_service=SERVICE, **collector))


def nodes(batches):
    return sorted(n for b in batches if b.table == "gpu_samples" for n in b.columns["node"])


def test_the_ready_endpoints_are_scraped_named_by_their_node_and_followed(port):
    with RecordedApiServer() as api:
        api.endpointslices[("gpu-operator", "nvidia-dcgm-exporter-x1")] = slice_(
            "nvidia-dcgm-exporter-x1",
            [
                endpoint("127.0.0.1", "gpu-node-a"),
                endpoint("127.0.0.2", "gpu-node-b", ready=None),
                endpoint("127.0.0.3", "gpu-node-c", ready=False),  # terminating: not scraped
            ],
            [("gpu-metrics", port)],
        )
        # Another Service's slice in the namespace, and the same Service's name in another namespace: not ours.
        api.endpointslices[("gpu-operator", "other-x1")] = slice_(
            "other-x1", [endpoint("127.0.0.3", "gpu-node-c")], [("gpu-metrics", port)], service="other"
        )
        api.endpointslices[("lab", "nvidia-dcgm-exporter-y1")] = slice_(
            "nvidia-dcgm-exporter-y1", [endpoint("127.0.0.3", "gpu-node-c")], [("gpu-metrics", port)], namespace="lab"
        )
        src = from_config(cfg(dcgm_port="gpu-metrics"), api.api_client())
        try:
            assert nodes(src.collect(T)) == ["gpu-node-a", "gpu-node-b"]  # one L4 GPU each
            lists = [urlsplit(r) for r in api.requests if r.startswith(SLICES)]
            assert [(u.path, parse_qs(u.query)) for u in lists] == [
                (SLICES, {"labelSelector": ["kubernetes.io/service-name=nvidia-dcgm-exporter"], "limit": ["500"]})
            ]
            kept = src.src.targets[0]
            # b's node goes, c's exporter becomes ready: seen at the next list, REFRESH_S after the first.
            api.endpointslices[("gpu-operator", "nvidia-dcgm-exporter-x1")]["endpoints"] = [
                endpoint("127.0.0.1", "gpu-node-a"),
                endpoint("127.0.0.3", "gpu-node-c"),
            ]
            assert nodes(src.collect(T + 10)) == ["gpu-node-a", "gpu-node-b"] and src.lists == 1
            assert nodes(src.collect(T + REFRESH_S)) == ["gpu-node-a", "gpu-node-c"] and src.lists == 2
            assert src.src.targets[0] is kept  # a target that stays keeps its page state and backoff
        finally:
            src.close()


def test_a_failed_list_keeps_the_last_targets_and_says_so(port):
    with RecordedApiServer() as api:
        api.status[SLICES] = (403, "Forbidden", 'endpointslices.discovery.k8s.io is forbidden: User "x" cannot list')
        src = from_config(cfg(), api.api_client())
        try:
            # No target yet: the source fails as a whole (the runner backs off and writes the reason).
            with pytest.raises(SourceError) as e:
                list(src.collect(T))
            assert str(e.value) == (
                f"dcgm: cannot list the EndpointSlices of Service {SERVICE}: 403 Forbidden (the central collector's "
                "Role must allow list on endpointslices in that namespace)"
            )
            del api.status[SLICES]
            with pytest.raises(SourceError, match=f"^dcgm: Service {SERVICE} has no ready endpoint"):
                list(src.collect(T + 1))
            api.endpointslices[("gpu-operator", "s1")] = slice_(
                "s1", [endpoint("127.0.0.1", "gpu-node-a")], [("", port)]
            )
            assert nodes(src.collect(T + 2)) == ["gpu-node-a"]  # a slice with one port: dcgm_port may stay ""
            api.status[SLICES] = (500, "Internal Server Error", "etcdserver: request timed out")
            batches = list(src.collect(T + 2 + REFRESH_S))
            assert nodes(batches) == ["gpu-node-a"]
            events = [b.columns for b in batches if b.table == "health_events"]
            assert [(c["kind"], c["detail"]) for c in events] == [
                (
                    ["scrape_error"],
                    [
                        f"dcgm: cannot list the EndpointSlices of Service {SERVICE}: 500 Internal Server Error; "
                        "scraping the 1 endpoints of the last good list"
                    ],
                )
            ]
        finally:
            src.close()


def typed(*slices):
    api = client.ApiClient()
    return [api._ApiClient__deserialize(s, "V1EndpointSlice") for s in slices]


def test_dual_stack_ipv6_and_port_choice():
    pod = {"pod": "nvidia-dcgm-exporter-abcde"}
    v4 = slice_("s-v4", [endpoint("10.0.3.17", "gpu-node-a", **pod)], [("gpu-metrics", 9400), ("admin", 9401)])
    v6 = slice_("s-v6", [endpoint("fd00::11", "gpu-node-a", **pod)], [("gpu-metrics", 9400)], family="IPv6")
    only6 = slice_("s-v6b", [endpoint("fd00::12", "gpu-node-b")], [("gpu-metrics", 9400)], family="IPv6")
    got = endpoints(typed(only6, v6, v4), SERVICE, "gpu-metrics")
    # The pod in both families' slices once (IPv4 first); an IPv6 address in brackets.
    assert [(e.url, e.node) for e in got] == [
        ("http://10.0.3.17:9400/metrics", "gpu-node-a"),
        ("http://[fd00::12]:9400/metrics", "gpu-node-b"),
    ]
    with pytest.raises(SourceError) as e:
        endpoints(typed(v4), SERVICE, "")
    assert str(e.value) == (
        f"dcgm: Service {SERVICE}: EndpointSlice s-v4 has more than one port (set collector.dcgm_port) "
        "(ports: 'admin', 'gpu-metrics')"
    )
    with pytest.raises(SourceError, match=r"EndpointSlice s-v6 has no port named 'metrics' \(ports: 'gpu-metrics'\)"):
        endpoints(typed(v6), SERVICE, "metrics")
    assert endpoints(typed(slice_("empty", [], [])), SERVICE, "gpu-metrics") == []  # no pod yet: no port either


def test_collect_once_follows_the_service_from_the_kubeconfig(port, tmp_path):
    """The CLI end to end: `collector.dcgm_service` in the config, the cluster from $KUBECONFIG, rows in the lake."""
    (tmp_path / "gpuledger.toml").write_text(
        f'cluster = "eu-1"\n[collector]\nsources = ["dcgm"]\ndcgm_service = "{SERVICE}"\ndcgm_port = "gpu-metrics"\n'
    )
    with RecordedApiServer() as api:
        api.endpointslices[("gpu-operator", "s1")] = slice_(
            "s1", [endpoint("127.0.0.1", "gpu-node-a"), endpoint("127.0.0.2", "gpu-node-b")], [("gpu-metrics", port)]
        )
        r = subprocess.run(
            [Path(sys.executable).parent / "gpuledger", "collect", "--once", "--config", tmp_path / "gpuledger.toml"]
            + ["--lake", tmp_path / "lake"],
            env={"KUBECONFIG": str(api.kubeconfig(tmp_path / "kubeconfig")), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert r.returncode == 0, r.stderr
    import polars as pl

    got = pl.read_parquet(tmp_path / "lake" / "gpu_samples" / "**" / "*.parquet")
    assert sorted(got["node"]) == ["gpu-node-a", "gpu-node-b"] and set(got["cluster"]) == {"eu-1"}


def test_discovery_is_only_used_without_urls():
    from gpuledger.collector.dcgm_source import DcgmSource
    from gpuledger.collector.dcgm_source import from_config as dcgm_from_config

    src = dcgm_from_config(cfg(), Path("."), T, ("http://10.0.0.1:9400/metrics",))  # --url wins
    try:
        assert isinstance(src, DcgmSource) and [t.url for t in src.targets] == ["http://10.0.0.1:9400/metrics"]
    finally:
        src.close()
    assert DiscoveredDcgmSource.name == "dcgm"


MUST = "must be namespace/name of a Service (each a DNS label), or empty, got"


@pytest.mark.parametrize(
    "toml,problem",
    [
        ('dcgm_service = "nvidia-dcgm-exporter"', f"{MUST} 'nvidia-dcgm-exporter'"),
        ('dcgm_service = "GPU-Operator/x"', f"{MUST} 'GPU-Operator/x'"),
        ('dcgm_service = "a/b/c"', f"{MUST} 'a/b/c'"),
        ('dcgm_service = "a/b"\ndcgm_urls = ["http://10.0.0.1/metrics"]', "set dcgm_urls or dcgm_service, not both"),
    ],
)
def test_a_bad_service_is_one_line_naming_the_key(tmp_path, toml, problem):
    from gpuledger.config import load
    from gpuledger.errors import ConfigError

    (tmp_path / "c.toml").write_text(f"[collector]\n{toml}\n")
    with pytest.raises(ConfigError) as e:
        load(tmp_path / "c.toml")
    assert e.value.problems == [f"collector.dcgm_service: {problem}"]


def test_the_node_name_comes_from_the_environment_over_the_file(tmp_path):
    """GPULEDGER_NODE (a DaemonSet's spec.nodeName through the downward API) replaces collector.node."""
    from gpuledger.config import load

    (tmp_path / "c.toml").write_text('[collector]\nnode = "from-file"\n')
    assert load(tmp_path / "c.toml", {}).collector.node == "from-file"
    assert load(tmp_path / "c.toml", {"GPULEDGER_NODE": "gpu-node-7"}).collector.node == "gpu-node-7"
    assert load(None, {"GPULEDGER_NODE": "gpu-node-7"}).collector.node == "gpu-node-7"
