"""Source `prometheus`: DCGM series read back through the Prometheus HTTP API, for clusters that already run
dcgm-exporter into Prometheus. Same tables as the dcgm source.

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
from gpuledger.config import Config
from gpuledger.errors import SourceError
from gpuledger.store import LakeRef

QUERY = '{__name__=~"DCGM_FI_.*|DCGM_EXP_.*"}'
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

    def collect(self, now_s: float) -> Iterator[Batch]:
        if self.last_s is None:
            data = self._api("/api/v1/query", {"query": QUERY, "time": f"{now_s:.3f}"})
            points = [(r["metric"], [r["value"]]) for r in data.get("result", [])]
        else:
            start = self.last_s + self.step_s
            if start > now_s:
                return
            start = max(start, now_s - self.step_s * MAX_POINTS)
            data = self._api(
                "/api/v1/query_range",
                {"query": QUERY, "start": f"{start:.3f}", "end": f"{now_s:.3f}", "step": f"{self.step_s:g}"},
            )
            points = [(r["metric"], r["values"]) for r in data.get("result", [])]
        by_ts: dict[float, list] = defaultdict(list)
        for metric, values in points:
            name = metric.get("__name__", "")
            labels = {k: v for k, v in metric.items() if k != "__name__"}
            for t, v in values:
                by_ts[float(t)].append((name, labels, _float(v)))
        samples, fields, events = [], [], []
        for t in sorted(by_ts):
            page = self.rows.rows(by_ts[t], int(round(t * 1e6)))
            samples += page.samples
            fields += page.fields
            events += page.events
        if by_ts:
            self.last_s = max(by_ts)
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
