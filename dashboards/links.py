"""Where a cluster, node, GPU or job has its own page, and the links to it that tables and lists show.

URLs (dashboards/pages/fleet.py draws them): /fleet, /fleet/cluster/<cluster>, /fleet/node/<cluster>/<node>,
/fleet/gpu/<gpu_uuid>, /fleet/job/<cluster>/<job_id>. Every id is one path segment, percent-encoded with no safe
character: a node name with a space or a slash, or an old-style MIG UUID (MIG-GPU-<uuid>/<gi>/<ci>), stays one
segment. Each link carries the page's filters (its range, tenant, model, cluster), so a click keeps the view.

A table cell links by `ui.table(..., links={"node": links.to_node(f)})`: a function of the row giving the href
(None: no link), drawn as a markdown link whose text is escaped, never HTML.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from urllib.parse import quote, unquote

from gpuledger.dashboards.filters import Filters

ROOT = "/fleet"
MAX_ID = 256  # longer than any node name (DNS label: 63), GPU UUID (40) or pod UID (36): a hostile URL, not looked up
# Markdown's special characters: each is shown as itself (backslash-escaped), so a node named `[x](javascript:..)`
# reads as that text and is no link of its own.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~])")


def _seg(value: str) -> str:
    return quote(str(value), safe="")


def _search(f: Filters | None) -> str:
    return f.search() if f is not None else ""


def fleet_href(f: Filters | None = None) -> str:
    return ROOT + _search(f)


def cluster_href(cluster: str, f: Filters | None = None) -> str:
    return f"{ROOT}/cluster/{_seg(cluster)}{_search(f)}"


def node_href(cluster: str, node: str, f: Filters | None = None) -> str:
    return f"{ROOT}/node/{_seg(cluster)}/{_seg(node)}{_search(f)}"


def gpu_href(gpu_uuid: str, f: Filters | None = None) -> str:
    return f"{ROOT}/gpu/{_seg(gpu_uuid)}{_search(f)}"


def job_href(cluster: str, job_id: str, f: Filters | None = None) -> str:
    return f"{ROOT}/job/{_seg(cluster)}/{_seg(job_id)}{_search(f)}"


def split(rest: str) -> list[str] | None:
    """The ids of a path after /fleet/, decoded; None when one is not an id we would look up (too long, or holding
    a control character such as %00: no node, GPU, cluster or job id has one, and DuckDB refuses a NUL)."""
    parts = [unquote(p) for p in rest.strip("/").split("/")] if rest.strip("/") else []
    if any(len(p) > MAX_ID or any(ord(c) < 32 or ord(c) == 127 for c in p) for p in parts):
        return None
    return parts


def shown(value: str, limit: int = 80) -> str:
    """An id from a URL as a page may quote it: repr (quotes and control characters visible), cut to `limit`."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def markdown(text, href: str | None) -> str | None:
    """A table cell: `text` as a markdown link to `href` (or as plain escaped text without one)."""
    if text is None:
        return None
    escaped = _MD_SPECIAL.sub(r"\\\1", str(text))
    # The href's characters are all URL-safe (quote above) but for the query's own; a ')' is encoded by urlencode.
    return f"[{escaped}]({href})" if href else escaped


def to_cluster(f: Filters | None, col: str = "cluster") -> Callable[[dict], str | None]:
    return lambda r: cluster_href(r[col], f) if r.get(col) is not None else None


def to_node(f: Filters | None, col: str = "node", cluster_col: str = "cluster") -> Callable[[dict], str | None]:
    return lambda r: node_href(r[cluster_col], r[col], f) if r.get(col) is not None else None


def to_gpu(f: Filters | None, col: str = "gpu_uuid") -> Callable[[dict], str | None]:
    return lambda r: gpu_href(r[col], f) if r.get(col) is not None else None


def to_job(f: Filters | None, col: str = "job_id", cluster_col: str = "cluster") -> Callable[[dict], str | None]:
    return lambda r: job_href(r[cluster_col], r[col], f) if r.get(col) is not None else None


def days_of(f: Filters, start: dt.datetime, end: dt.datetime) -> Filters:
    """`f` over the UTC days from `start` to `end` (a job's hold): its GPU's page opens on the time the job had it."""
    from dataclasses import replace

    last = end - dt.timedelta(microseconds=1) if end > start else end  # an end at midnight is the day before's
    return replace(f, start=start.date(), end=max(last.date(), start.date()))
