"""One pass from a dcgm-exporter page to lake rows, for a central collector scraping thousands of pages a round.

`parse` then `RowBuilder.rows` cost about 1.2 ms for an 8-GPU x 40-field page, most of it in a dict per
gpu_fields row and a sample tuple per line (benchmarks/dcgm_fleet.py): 12 s a round at 10,000 endpoints. Here
each line of the page costs a few slices, two dict lookups and a `float()`, and the gpu_fields rows go straight
into columns. A label string is parsed once per target and kept for the next scrape (a node's label sets change
only when a pod comes or goes), unless the page got a plan (below).

A target's next page is usually its last one with new values: then `read` checks that every line up to its last
space is the last page's, reads only the values (a few C-level maps over the page) and replays how the last page
became rows (a plan kept per target): about 0.25 ms a page instead of 0.5-0.9 ms (benchmarks/RESULTS.md). Any
other page is read in full.

It accepts exactly the lines `exposition.parse_fast` reads on its fast path, and only pages whose every line is
one of them with no series twice; any other page returns None and the caller takes the reference path (`parse`
then `RowBuilder.rows`), which gives the same rows or the error naming the line. What it returns is the reference
path's rows: tests/collector/test_dcgm_columns.py checks both on every captured page.
"""

from __future__ import annotations

import dataclasses
from array import array
from itertools import repeat
from operator import itemgetter

from gpuledger.collector.dcgm.exposition import _METRIC_NAME, _cache_labels
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


_NAMES: dict[str, tuple[int, str | None, float, bool, float]] = {}  # name -> what it does; cleared past 4,096


def _describe(name: str) -> tuple[int, str | None, float, bool, float] | None:
    """What a sample of this name does to the rows, or None for a name parse_fast would not take on its fast path."""
    if not _METRIC_NAME.fullmatch(name):
        return None
    if len(_NAMES) >= 4096:  # names come from pages: bounded, so pages of random names cannot grow it
        _NAMES.clear()
    field = name[:-6] if name.endswith("_total") else name  # as RowBuilder.rows: prometheus_client's suffix
    # A value at or above this is DCGM's "blank" (fields.is_blank): the int32 sentinel, or for the counters
    # that pass 2**31 the fp64 one (which also covers every int64 sentinel).
    blank = FP64_BLANK if field in LARGE else float(INT32_BLANK)
    col = COLUMNS.get(field)
    if field in LABEL_FIELDS:
        d = (_SKIP, None, 1.0, False, blank)
    elif col is not None:
        d = (_COLUMN, col[0], col[1], col[0] in INT_COLUMNS, blank)
    else:
        kind = {FB_FREE: _FREE, GR_ENGINE_ACTIVE: _GR, XID: _XID, XID_COUNT: _XID_COUNT}.get(field, _FIELD)
        d = (kind, field, 1.0, False, blank)
    _NAMES[name] = d
    return d


_ANY, _SCALE, _INT = range(3)  # how a plan's op sets its row's key: always (None too), x * factor, int(round(...))
_HEAD, _VALUE = itemgetter(0), itemgetter(2)
# The keys every gpu_samples row starts with
_BASE = tuple(RowBuilder("")._new_row(GpuKey(*[None] * len(dataclasses.fields(GpuKey))), 0))


@dataclasses.dataclass
class _Plan:
    """How a page became rows, for the next page that differs only in its values."""

    # Every line up to its last space, as (count, hash of the tuple): 64 bits in place of the ~80 KB of the lines
    # themselves (the heads of 10,000 targets' pages held 900 MB); pages of other lines that hash alike, about one
    # in 2^64, would be read with this one's labels
    heads: tuple[int, int]
    fixed: list[tuple[int, str]]  # lines that split with no head (an empty line, "#"): must be these again
    samples: array  # the sample lines, in page order; a sample's j is its place here
    blanks: tuple[float, ...]  # the blank threshold of sample j
    low: float  # the lowest of them
    skips: list[int]  # j of label "fields" (the driver version), checked but not rows
    ops: list[tuple[int, str, int, int, float]]  # (row, key, j, how, factor) in page order
    xids: list[tuple[int, GpuKey, int, dict]]  # (kind, GPU, j, labels)
    field_j: array  # j of each gpu_fields row
    f_node: list
    f_uuid: list
    f_field: list
    uuids: list[str]  # the gpu_samples rows, in order
    templates: list[dict]  # each row's keys before any value


def _heads(heads: list[str]) -> tuple[int, int]:
    return len(heads), hash(tuple(heads))


class _PlanMaker:
    """Notes what the full read does with each line (a few appends a line, on the page read in full)."""

    def __init__(self) -> None:
        self.fixed: list[tuple[int, str]] = []
        self.samples: list[int] = []
        self.blanks: list[float] = []
        self.skips: list[int] = []
        self.ops: list = []
        self.xids: list = []
        self.field_j: list[int] = []
        self.rows: dict[int, int] = {}  # id of a row -> its place
        self.ok = True

    def sample(self, i: int, tail: str, blank: float, skip: bool) -> int:
        """Line i, a sample; `tail` is what follows its last "}". Returns the sample's place j."""
        # The replay splits a line at its last space: only "name{labels} value" splits where the full read does
        if tail[:1] != " " or " " in tail[1:]:
            self.ok = False
        j = len(self.samples)
        self.samples.append(i)
        self.blanks.append(blank)
        if skip:
            self.skips.append(j)
        return j

    def slot(self, row: dict) -> int:
        return self.rows.setdefault(id(row), len(self.rows))

    def done(self, lines: list[str], by_gpu: dict, f_node: list, f_uuid: list, f_field: list) -> _Plan | None:
        if not self.ok:
            return None
        skips = set(self.skips)
        kept = [b for j, b in enumerate(self.blanks) if j not in skips]
        return _Plan(
            heads=_heads(list(map(_HEAD, map(str.rpartition, lines, repeat(" ", len(lines)))))),
            fixed=self.fixed,
            samples=array("I", self.samples),
            blanks=tuple(self.blanks),
            low=min(kept, default=INT32_BLANK),
            skips=self.skips,
            ops=self.ops,
            xids=self.xids,
            field_j=array("I", self.field_j),
            f_node=list(f_node),
            f_uuid=list(f_uuid),
            f_field=list(f_field),
            uuids=list(by_gpu),
            templates=[{k: row[k] for k in _BASE} for row in by_gpu.values()],
        )


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
        self._plan: _Plan | None = None  # how the last page read became rows: its next page, same but for values

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
        if self._plan is not None:
            got = self._replay(text, ts_us, fields, events)
            if got is not None:
                return got
        return self._read(text, ts_us, fields, events)

    def _read(self, text: str, ts_us: int, fields: FieldColumns, events: list[dict]) -> list[dict] | None:
        """`read` line by line; keeps a plan of the page for `_replay`."""
        old, kept = self._labels, {}
        names = _NAMES
        # label string -> [labels, label set, GpuKey, its row in this page (made at its first sample), the names
        # of its samples (shared by label strings that spell one label set apart)]
        page: dict[str, list] = {}
        series: dict[frozenset, list[str]] = {}
        by_gpu: dict[str, dict] = {}
        f_node, f_uuid, f_field, f_value = [], [], [], []
        xids: list = []
        lines = text.split("\n")
        plan = _PlanMaker()
        for i, line in enumerate(lines):
            if not line or line[0] == "#":
                if " " not in line:  # "" or "#": a later line without a space would split the same way
                    plan.fixed.append((i, line))
                continue
            # The first "{" and the last "}", as parse_fast takes them (partition: 30% under find and slices)
            name, _, rest = line.partition("{")
            s, brace2, tail = rest.rpartition("}")
            if not brace2:
                return None
            pe = page.get(s)
            if pe is None:
                entry = old.get(s) or self._entry(s)
                if entry is None:
                    return None
                kept[s] = entry
                pe = page[s] = [*entry, None, series.setdefault(entry[1], [])]
            if "_" in tail:
                return None
            d = names.get(name) or _describe(name)  # None for a bad name, the empty one included
            if d is None:
                return None
            try:
                v = float(tail)
            except ValueError:
                return None
            pe[4].append(name)  # a series twice is found after the loop: cheaper than a set lookup per line
            kind, col, factor, is_int, blank = d
            j = plan.sample(i, tail, blank, kind == _SKIP)
            if kind == _SKIP:
                continue
            k = pe[2]
            row = pe[3]
            if row is None:
                row = by_gpu.get(k.gpu_uuid)
                if row is None:
                    row = by_gpu[k.gpu_uuid] = self.builder._new_row(k, ts_us)
                elif row["pod"] is None and k.pod is not None:
                    # RowBuilder.rows checks this at every sample; k is the same for every sample of the label
                    # string, so its first sample decides
                    row.update(pod=k.pod, namespace=k.namespace, container=k.container)
                pe[3] = row
            r = plan.slot(row)
            if v - v != 0 or v >= blank:  # NaN, +-Inf, DCGM's blank sentinels: null (fields.is_blank)
                v = None
            if kind == _FIELD:
                f_node.append(k.node)
                f_uuid.append(k.gpu_uuid)
                f_field.append(col)
                f_value.append(v)
                plan.field_j.append(j)
            elif kind == _COLUMN:
                if v is not None:
                    row[col] = int(round(v * factor)) if is_int else v * factor
                plan.ops.append((r, col, j, _INT if is_int else _SCALE, factor))
            elif kind == _FREE:
                row["_free"] = v
                plan.ops.append((r, "_free", j, _ANY, 1.0))
            elif kind == _GR:
                if k.parent_gpu_uuid is not None:
                    row["_gr_active"] = v
                    plan.ops.append((r, "_gr_active", j, _ANY, 1.0))
                f_node.append(k.node)
                f_uuid.append(k.gpu_uuid)
                f_field.append(col)
                f_value.append(v)
                plan.field_j.append(j)
            else:  # Xid fields are rare: applied after the page is known good, in page order
                xids.append((kind, k, v, pe[0]))
                plan.xids.append((kind, k, j, pe[0]))
        if any(len(set(ns)) != len(ns) for ns in series.values()):
            return None  # the reference path names the line of the duplicate series
        if not any(n.startswith(("DCGM_FI_", "DCGM_EXP_")) for ns in series.values() for n in ns):
            return None  # no DCGM series: the reference path says so (usually at the first name it looks at)
        self._plan = plan.done(lines, by_gpu, f_node, f_uuid, f_field)
        # With a plan the parsed label sets are needed again only when the page's lines change (a pod comes or
        # goes): parsing its 8 label strings again then costs less than keeping them (~25 KB a target)
        self._labels = kept if self._plan is None else {}
        self._apply_xids(xids, ts_us, events)
        fields.node += f_node
        fields.gpu_uuid += f_uuid
        fields.field += f_field
        fields.value += f_value
        return self.builder.finish(by_gpu)

    def _apply_xids(self, xids: list, ts_us: int, events: list[dict]) -> None:
        rows = PageRows()
        for kind, k, v, labels in xids:
            if kind == _XID:
                self.builder._xid(rows, k, ts_us, v, labels)
            else:
                self.builder._xid_count(rows, k, ts_us, v, labels)
        events += rows.events

    def _replay(self, text: str, ts_us: int, fields: FieldColumns, events: list[dict]) -> list[dict] | None:
        """The page's rows by the last page's plan, when every line but the values is the last page's (the usual
        scrape: a node's label sets change only when a pod comes or goes); None, with nothing added, otherwise."""
        plan = self._plan
        lines = text.split("\n")
        parts = list(map(str.rpartition, lines, repeat(" ", len(lines))))
        if _heads(list(map(_HEAD, parts))) != plan.heads:
            return None
        for i, line in plan.fixed:
            if lines[i] != line:
                return None
        values = list(map(_VALUE, map(parts.__getitem__, plan.samples)))
        # What the full read's tail checks refuse: a "}" would move its last brace, and float() reads "1_0"
        joined = "".join(values)
        if "_" in joined or "}" in joined:
            return None
        try:
            v = list(map(float, values))
        except ValueError:
            return None
        if plan.skips:  # the driver-version "field" is a label: its value is only checked, never a row
            for j in plan.skips:
                v[j] = 0.0
        total = sum(v)
        if total - total != 0 or max(v) >= plan.low:
            # NaN, an infinity, or a value at a blank threshold somewhere: null where the full read's test says so
            thresholds = plan.blanks
            for j, x in enumerate(v):
                if x - x != 0 or x >= thresholds[j]:
                    v[j] = None
        rows = [t.copy() for t in plan.templates]
        for row in rows:
            row["ts"] = ts_us
        for r, col, j, how, factor in plan.ops:
            x = v[j]
            if how == _ANY:
                rows[r][col] = x
            elif x is not None:
                rows[r][col] = int(round(x * factor)) if how == _INT else x * factor
        if plan.xids:
            self._apply_xids([(kind, k, v[j], labels) for kind, k, j, labels in plan.xids], ts_us, events)
        fields.node += plan.f_node
        fields.gpu_uuid += plan.f_uuid
        fields.field += plan.f_field
        fields.value += map(v.__getitem__, plan.field_j)
        return self.builder.finish(dict(zip(plan.uuids, rows, strict=True)))
