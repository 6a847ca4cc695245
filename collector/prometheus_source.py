"""Source `prometheus`: DCGM, AMD device-metrics-exporter and Ascend npu-exporter series read back through the
Prometheus HTTP API, for clusters that already scrape their exporters into Prometheus. Same tables as the dcgm,
amd and ascend sources, one query per vendor, each read by that vendor's row builder.

The first scrape is an instant query; later ones are range queries from the last timestamp read, so a
collector that was down for a while catches up instead of leaving a hole.
"""

from __future__ import annotations

import json
import math
import urllib.parse
from collections import defaultdict
from collections.abc import Iterator

from gpuledger.collector.dcgm.rows import RowBuilder
from gpuledger.collector.http_fetch import FetchError, get
from gpuledger.collector.source import Batch
from gpuledger.collector.vendors.amd import AMD
from gpuledger.collector.vendors.ascend import ASCEND
from gpuledger.collector.vendors.rows import VendorRows
from gpuledger.config import Config
from gpuledger.errors import SourceError
from gpuledger.store import LakeRef

QUERY = '{__name__=~"DCGM_FI_.*|DCGM_EXP_.*"}'
# AMD's names are generic (gpu_*, pcie_*, optionally amd_-prefixed): only series naming an AMD board serial, which
# every GPU series of the exporter has (a default label; SERIAL_NUMBER before 1.0), are taken as AMD's
_AMD_NAMES = '__name__=~"(amd_)?(gpu|pcie)_.+"'
AMD_QUERY = f'{{{_AMD_NAMES},serial_number!=""}} or {{{_AMD_NAMES},SERIAL_NUMBER!=""}}'
ASCEND_QUERY = '{__name__=~"npu_chip_info_.+|vnpu_pod_.+|container_npu_.+"}'
MAX_POINTS = 10_000  # Prometheus refuses range queries over 11,000 points per series


class PrometheusSource:
    name = "prometheus"

    def __init__(self, cfg: Config, url: str, step_s: float | None = None, timeout_s: float = 30.0):
        if not url:
            raise SourceError("prometheus: no URL (give --url http://prometheus:9090 or collector.prometheus_url)")
        self.url = url.rstrip("/")
        self.step_s = step_s or cfg.collector.interval_s
        self.timeout_s = timeout_s
        self.rows = RowBuilder(cfg.cluster, source="prometheus", via_prometheus=True)
        self.vendors = [
            (query, VendorRows(v, cfg.cluster, source="prometheus", via_prometheus=True))
            for query, v in ((AMD_QUERY, AMD), (ASCEND_QUERY, ASCEND))
        ]
        self.last_s: float | None = None

    def _api(self, path: str, params: dict) -> dict:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            r = get(url, self.timeout_s, accept="application/json")
        except FetchError as e:
            raise SourceError(f"prometheus: {e}") from e
        try:
            doc = json.loads(r.body)
        except ValueError as e:
            raise SourceError(f"prometheus: {url}: not JSON ({r.content_type or 'no content type'})") from e
        if doc.get("status") != "success":
            raise SourceError(f"prometheus: {url}: {doc.get('errorType', 'error')}: {doc.get('error', doc)}")
        return doc["data"]

    def _points(self, query: str, now_s: float) -> dict[float, list]:
        """The query's samples by timestamp: at now_s (the first scrape), else every step since the last read."""
        if self.last_s is None:
            data = self._api("/api/v1/query", {"query": query, "time": f"{now_s:.3f}"})
            points = [(r["metric"], [r["value"]]) for r in data.get("result", [])]
        else:
            start = max(self.last_s + self.step_s, now_s - self.step_s * MAX_POINTS)
            data = self._api(
                "/api/v1/query_range",
                {"query": query, "start": f"{start:.3f}", "end": f"{now_s:.3f}", "step": f"{self.step_s:g}"},
            )
            points = [(r["metric"], r["values"]) for r in data.get("result", [])]
        by_ts: dict[float, list] = defaultdict(list)
        for metric, values in points:
            name = metric.get("__name__", "")
            labels = {k: v for k, v in metric.items() if k != "__name__"}
            for t, v in values:
                by_ts[float(t)].append((name, labels, _float(v)))
        return by_ts

    def collect(self, now_s: float) -> Iterator[Batch]:
        if self.last_s is not None and self.last_s + self.step_s > now_s:
            return
        samples, fields, events = [], [], []
        seen: list[float] = []
        by_ts = self._points(QUERY, now_s)
        for t in sorted(by_ts):
            page = self.rows.rows(by_ts[t], int(round(t * 1e6)))
            samples += page.samples
            fields += page.fields
            events += page.events
        seen += by_ts
        for query, rows in self.vendors:
            by_ts = self._points(query, now_s)
            for t in sorted(by_ts):
                page, errors = rows.rows(by_ts[t], int(round(t * 1e6)))
                samples += page.samples
                fields += page.fields
                # A series without a device name is said once per query, not at every step of a range
                events += [e for e in errors if e["detail"] not in {x["detail"] for x in events}]
            seen += by_ts
        if seen:
            self.last_s = max(seen)
        elif self.last_s is None:
            self.last_s = now_s
        for table, rows in (("gpu_samples", samples), ("gpu_fields", fields), ("health_events", events)):
            if rows:
                yield Batch.from_rows(table, rows)

    def close(self) -> None:
        pass


def _float(v: str) -> float:
    try:
        return float(v)  # Prometheus writes NaN, +Inf, -Inf as strings float() accepts
    except ValueError:
        return math.nan


def from_config(cfg: Config, lake: LakeRef, now_s: float, urls: tuple[str, ...]) -> PrometheusSource:
    """Entry point `prometheus` (collector/source.py SourceFactory): the --url server, else the config's."""
    if len(urls) > 1:
        raise SourceError("prometheus: give one --url (the Prometheus server)")
    return PrometheusSource(cfg, urls[0] if urls else cfg.collector.prometheus_url)
