"""exporter: the analytics' derived figures as Prometheus metrics (`gpuledger exporter`, and part of `gpuledger up`).

Three concepts, one module each, in the order data flows:

- `tables`: the lake -> `Tables`, a handful of small frames read off the analytics' latest tables (SQL through
  gpuledger.query, once per analytics commit, never per scrape).
- `figures`: `Tables` -> metric families (pure: frames in, prometheus_client families out), and the rule that keeps
  the health counters monotone across rebuilds.
- `server`: `Exporter`, a prometheus_client custom collector serving the latest snapshot of those families, rebuilt
  in the background when the analytics commit (the store's `state_version("analytics")`).

It lives in analytics/ because it is the analytics' own output face: the figures are the analytics' tables, read as
they wrote them (the budget, quota and fair-share columns of `decisions` from analytics/decisions.py, the waste
rule's idle hours of `job_hourly`), and the data flow in DESIGN.md draws `exporter (/metrics)` as an arrow out of
analytics/. As a core module (gpuledger/) it could not depend on any analytics code, and the core is the spine
every stage shares, which an HTTP endpoint of derived figures is not.
"""

from gpuledger.analytics.exporter.figures import Snapshot, build, series_bound
from gpuledger.analytics.exporter.server import Exporter, serve
from gpuledger.analytics.exporter.tables import Tables, read

__all__ = ["Exporter", "Snapshot", "Tables", "build", "read", "serve", "series_bound"]
