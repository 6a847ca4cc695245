"""Source `dcgm`: scrape dcgm-exporter `/metrics` pages over HTTP (one node, or a central collector scraping many).

Each target is fetched and parsed independently, in a thread pool: a target that hangs, refuses, answers 500,
sends the wrong content type or a malformed page becomes a `scrape_error` health event naming the target and,
for a bad page, the line and reason; the other targets' rows are written as usual. A failing target is retried
with exponential backoff.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gpuledger.collector.dcgm.exposition import ExpositionError, parse
from gpuledger.collector.dcgm.rows import PageRows, RowBuilder
from gpuledger.collector.http_fetch import FetchError, get
from gpuledger.collector.source import Batch
from gpuledger.config import Config
from gpuledger.errors import SourceError

log = logging.getLogger(__name__)
CONTENT_TYPES = ("text/plain", "application/openmetrics-text")
MAX_BACKOFF_S = 300.0


@dataclass
class Target:
    url: str
    node: str  # default node for series without a Hostname label: the target's host
    failures: int = 0
    retry_at: float = 0.0


class DcgmSource:
    name = "dcgm"

    def __init__(self, cfg: Config, urls: list[str] | tuple[str, ...], timeout_s: float = 5.0, workers: int = 32):
        if not urls:
            raise SourceError("dcgm: no URL (give --url http://node:9400/metrics or collector.dcgm_urls)")
        self.cluster = cfg.cluster
        self.interval_s = cfg.collector.interval_s
        self.timeout_s = timeout_s
        self.targets = [Target(u, urllib.parse.urlparse(u).hostname or "unknown") for u in urls]
        self.builders = {t.url: RowBuilder(cfg.cluster) for t in self.targets}  # Xid state is per target
        self.pool = ThreadPoolExecutor(max(1, min(workers, len(self.targets))), thread_name_prefix="dcgm")

    def scrape_one(self, target: Target, ts_us: int) -> PageRows:
        """Fetch, check and parse one page; raises SourceError with the target and the reason."""
        try:
            r = get(target.url, self.timeout_s, accept="text/plain;version=0.0.4")
        except FetchError as e:
            raise SourceError(str(e)) from e
        ctype = r.content_type.split(";")[0].strip().lower()
        if ctype not in CONTENT_TYPES:
            raise SourceError(f"{target.url}: wrong content type {r.content_type or '(none)'!r}, expected text/plain")
        try:
            samples = parse(r.body.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise SourceError(f"{target.url}: page is not UTF-8 (byte {e.start})") from e
        except ExpositionError as e:
            raise SourceError(f"{target.url}: {e}") from e
        if not any(s[0].startswith(("DCGM_FI_", "DCGM_EXP_")) for s in samples):
            # A 200 without one DCGM series is another exporter's page, or an empty one: a wrong URL, not an idle
            # node (every other series would be taken for a GPU's field).
            raise SourceError(f"{target.url}: no DCGM metrics on the page ({len(samples)} samples, none DCGM_FI_*)")
        return self.builders[target.url].rows(samples, ts_us, default_node=target.node)

    def collect(self, now_s: float) -> Iterator[Batch]:
        ts_us = int(now_s * 1e6)
        due = [t for t in self.targets if now_s >= t.retry_at]
        futures = [(t, self.pool.submit(self.scrape_one, t, ts_us)) for t in due]
        samples, fields, events = [], [], []
        for t, f in futures:
            try:
                page = f.result()
            except SourceError as e:
                t.failures += 1
                t.retry_at = now_s + (
                    min(self.interval_s * 2 ** (t.failures - 1), MAX_BACKOFF_S) if t.failures > 1 else 0.0
                )
                log.warning("dcgm: %s", e)
                events.append(
                    {
                        "ts": ts_us,
                        "cluster": self.cluster,
                        "node": t.node,
                        "gpu_uuid": None,
                        "kind": "scrape_error",
                        "code": None,
                        "detail": str(e),
                        "source": self.name,
                    }
                )
                continue
            t.failures, t.retry_at = 0, 0.0
            samples += page.samples
            fields += page.fields
            events += page.events
        for table, rows in (("gpu_samples", samples), ("gpu_fields", fields), ("health_events", events)):
            if rows:
                yield Batch.from_rows(table, rows)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def from_config(cfg: Config, lake: Path, now_s: float, urls: tuple[str, ...]) -> DcgmSource:
    """Entry point `dcgm` (collector/source.py SourceFactory): the --url pages, else the config's dcgm_urls."""
    return DcgmSource(cfg, urls or cfg.collector.dcgm_urls)
