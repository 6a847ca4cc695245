"""The collector's own /metrics: scrape duration per source, errors by kind, rows written per table, spool depth
and age. One CollectorRegistry per collector (never the global one), exposed with prometheus-client."""

from __future__ import annotations

import time
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

from gpuledger.errors import LakeError
from gpuledger.store import Store

# Scrapes run from milliseconds (NVML) to seconds (1,000 remote endpoints).
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class _SpoolCollector:
    """Spool depth and the age of its oldest segment, read when /metrics is scraped (a custom collector)."""

    def __init__(self, spool_dir: Path, clock=time.time):
        self.spool_dir = Path(spool_dir)
        self.clock = clock

    def collect(self):
        segs = sorted(self.spool_dir.glob("seg-*.wal"))
        sizes, oldest = 0, None
        for p in segs:
            try:
                st = p.stat()
            except FileNotFoundError:  # flushed between glob and stat
                continue
            sizes += st.st_size
            oldest = st.st_mtime if oldest is None else min(oldest, st.st_mtime)
        yield GaugeMetricFamily(
            "gpuledger_spool_segments", "Spool segments not yet flushed to the lake", value=len(segs)
        )
        yield GaugeMetricFamily("gpuledger_spool_bytes", "Bytes in the spool not yet flushed", value=sizes)
        yield GaugeMetricFamily(
            "gpuledger_spool_oldest_age_seconds",
            "Age of the oldest unflushed spool segment",
            value=0.0 if oldest is None else max(0.0, self.clock() - oldest),
        )


class _QuarantineCollector:
    """Files the lake holds set aside (damaged or foreign, moved under _quarantine/ by compaction or the analytics),
    by table, listed when /metrics is scraped: a rise is a file to look at, and rows not counted until it is."""

    def __init__(self, store: Store):
        self.store = store

    def collect(self):
        family = GaugeMetricFamily(
            "gpuledger_quarantined_files",
            "Lake files set aside under _quarantine/ (see quarantined_files)",
            labels=["table"],
        )
        try:
            counts = self.store.set_aside_counts()
        except (LakeError, OSError):
            counts = {}  # the lake unreachable now: the flush's own errors say so; no figure rather than a wrong one
        for table, n in sorted(counts.items()):
            family.add_metric([table], n)
        yield family


class CollectorMetrics:
    def __init__(self, spool_dir: Path | None = None, store: Store | None = None):
        self.registry = CollectorRegistry(auto_describe=True)
        self.scrape_seconds = Histogram(
            "gpuledger_scrape_duration_seconds",
            "Time to scrape one source",
            ["source"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter(
            "gpuledger_scrape_errors", "Failed scrapes by source and kind", ["source", "kind"], registry=self.registry
        )
        self.rows = Counter(
            "gpuledger_rows_written", "Rows appended to the spool, by table", ["table"], registry=self.registry
        )
        self.flushes = Counter("gpuledger_flushes", "Spool flushes into the lake", registry=self.registry)
        self.pending_rows = Gauge(
            "gpuledger_spool_pending_rows",
            "Rows scraped but kept in memory because the spool cannot take them (a full disk)",
            registry=self.registry,
        )
        self.dropped_rows = Counter(
            "gpuledger_rows_dropped",
            "Rows dropped unspooled after waiting too long for a spool that could not take them, by table",
            ["table"],
            registry=self.registry,
        )
        self.skipped_runs = Counter(
            "gpuledger_skipped_runs",
            "Ticks of a scheduled job (scrape, flush, analytics...) skipped because its last run still went",
            ["job"],
            registry=self.registry,
        )
        if spool_dir is not None:
            self.registry.register(_SpoolCollector(spool_dir))
        if store is not None:
            self.registry.register(_QuarantineCollector(store))
