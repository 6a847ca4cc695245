"""One pass from a dcgm-exporter page to lake rows, for a central collector scraping thousands of pages a round.

`parse` then `RowBuilder.rows` cost about 1.2 ms for an 8-GPU x 40-field page, most of it in a dict per
gpu_fields row and a sample tuple per line (benchmarks/dcgm_fleet.py): 12 s a round at 10,000 endpoints. Here
each line of the page costs a few slices, two dict lookups and a `float()`, and the gpu_fields rows go straight
into columns. A label string is parsed once per target and kept for the next scrape (a node's label sets change
only when a pod comes or goes).

It accepts exactly the lines `exposition.parse_fast` reads on its fast path, and only pages whose every line is
one of them with no series twice; any other page returns None and the caller takes the reference path (`parse`
then `RowBuilder.rows`), which gives the same rows or the error naming the line. What it returns is the reference
path's rows: tests/collector/test_dcgm_columns.py checks both on every captured page.
"""

from __future__ import annotations

from functools import lru_cache

from gpuledger.collector.dcgm.exposition import _cache_labels, _good_name
from gpuledger.collector.dcgm.fields import (
    COLUMNS,
    FB_FREE,
    FP64_BLANK,
    GR_ENGINE_ACTIVE,
    INT32_BLANK,
    LABEL_FIELDS,
    LARGE,
    XID,
    XID_COUNT,
)
from gpuledger.collector.dcgm.rows import INT_COLUMNS, GpuKey, PageRows, RowBuilder, gpu_key

# What a field name does to the rows: (kind, gpu_samples column, factor, int column, blank threshold)
_SKIP, _COLUMN, _FREE, _GR, _XID, _XID_COUNT, _FIELD = range(7)
FIELD_COLUMNS = ("ts", "cluster", "node", "gpu_uuid", "field", "value", "source")


@lru_cache(maxsize=4096)  # names come from pages; bounded so a page of random names cannot grow it
def _dispatch(name: str) -> tuple[int, str | None, float, bool, float]:
    if name.endswith("_total"):  # as RowBuilder.rows: prometheus_client's counter suffix
        name = name[:-6]
    # A value at or above this is DCGM's "blank" (fields.is_blank): the int32 sentinel, or for the counters
    # that pass 2**31 the fp64 one (which also covers every int64 sentinel).
    blank = FP64_BLANK if name in LARGE else float(INT32_BLANK)
    if name in LABEL_FIELDS:
        return _SKIP, None, 1.0, False, blank
    col = COLUMNS.get(name)
    if col is not None:
        return _COLUMN, col[0], col[1], col[0] in INT_COLUMNS, blank
    kind = {FB_FREE: _FREE, GR_ENGINE_ACTIVE: _GR, XID: _XID, XID_COUNT: _XID_COUNT}.get(name, _FIELD)
    return kind, name, 1.0, False, blank


class FieldColumns:
    """gpu_fields rows of many pages, column by column (the constant columns are filled in by `columns`)."""

    def __init__(self) -> None:
        self.node: list = []
        self.gpu_uuid: list = []
        self.field: list = []
        self.value: list = []

    def __len__(self) -> int:
        return len(self.field)

    def columns(self, ts_us: int, cluster: str, source: str) -> dict[str, list]:
        n = len(self.field)
        return {
            "ts": [ts_us] * n,
            "cluster": [cluster] * n,
            "node": self.node,
            "gpu_uuid": self.gpu_uuid,
            "field": self.field,
            "value": self.value,
            "source": [source] * n,
        }


class PageReader:
    """Turns one target's pages into rows; keeps that target's label sets between scrapes and its Xid state."""

    def __init__(self, builder: RowBuilder, default_node: str | None):
        self.builder = builder
        self.default_node = default_node
        # label string -> (labels, label set, GpuKey); only those of the last page are kept
        self._labels: dict[str, tuple[dict, frozenset, GpuKey]] = {}
        self._names: set[str] = set()

    def _entry(self, s: str) -> tuple[dict, frozenset, GpuKey] | None:
        parsed = _cache_labels({}, s)
        if parsed is None:
            return None
        labels, key = parsed
        return labels, key, gpu_key(labels, self.default_node, self.builder.via_prometheus)

    def read(self, text: str, ts_us: int, fields: FieldColumns, events: list[dict]) -> list[dict] | None:
        """The page's gpu_samples rows; its gpu_fields rows go to `fields`, its events to `events`. None when the
        page is not one this path reads (see the module's docstring), or has no DCGM series: nothing is added then,
        and no state changes."""
        old, cache = self._labels, {}
        names = self._names
        seen: set = set()
        by_gpu: dict[str, dict] = {}
        f_node, f_uuid, f_field, f_value = [], [], [], []
        xids: list = []
        for line in text.split("\n"):
            if not line or line[0] == "#":
                continue
            b = line.rfind("}")
            if b <= 0:
                return None
            a = line.find("{")
            s = line[a + 1 : b]
            entry = cache.get(s)
            if entry is None:
                entry = old.get(s) or self._entry(s)
                if entry is None:
                    return None
                cache[s] = entry
            name = line[:a]
            tail = line[b + 1 :]
            if a <= 0 or "_" in tail or (name not in names and not _good_name(name, names)):
                return None
            try:
                v = float(tail)
            except ValueError:
                return None
            series = (name, entry[1])
            if series in seen:
                return None
            seen.add(series)
            kind, col, factor, is_int, blank = _dispatch(name)
            if kind == _SKIP:
                continue
            k = entry[2]
            row = by_gpu.get(k.gpu_uuid)
            if row is None:
                row = by_gpu[k.gpu_uuid] = self.builder._new_row(k, ts_us)
            elif row["pod"] is None and k.pod is not None:
                row.update(pod=k.pod, namespace=k.namespace, container=k.container)
            if v - v != 0 or v >= blank:  # NaN, +-Inf, DCGM's blank sentinels: null (fields.is_blank)
                v = None
            if kind == _FIELD:
                f_node.append(k.node)
                f_uuid.append(k.gpu_uuid)
                f_field.append(col)
                f_value.append(v)
            elif kind == _COLUMN:
                if v is not None:
                    row[col] = int(round(v * factor)) if is_int else v * factor
            elif kind == _FREE:
                row["_free"] = v
            elif kind == _GR:
                if k.parent_gpu_uuid is not None:
                    row["_gr_active"] = v
                f_node.append(k.node)
                f_uuid.append(k.gpu_uuid)
                f_field.append(col)
                f_value.append(v)
            else:  # Xid fields are rare: applied after the page is known good, in page order
                xids.append((kind, k, v, entry[0]))
        if not any(n.startswith(("DCGM_FI_", "DCGM_EXP_")) for n, _ in seen):
            return None  # no DCGM series: the reference path says so (usually at the first name it looks at)
        if len(names) > 4096:  # names of pages this path refused, or of many exporters' versions: start again
            names.clear()
        self._labels = cache
        page = PageRows()
        for kind, k, v, labels in xids:
            if kind == _XID:
                self.builder._xid(page, k, ts_us, v, labels)
            else:
                self.builder._xid_count(page, k, ts_us, v, labels)
        events += page.events
        fields.node += f_node
        fields.gpu_uuid += f_uuid
        fields.field += f_field
        fields.value += f_value
        return self.builder.finish(by_gpu)
