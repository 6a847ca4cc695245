"""Parsed exposition samples of one vendor's exporter -> lake rows, by the vendor's table (vendors/table.py).

One gpu_samples row per device or partition, its columns filled by the table's metrics and unit factors (when two
metrics fill one column the lower rank wins, and the other is kept in gpu_fields). Every other metric of a device
goes to gpu_fields, its index labels (a clock, a link) kept in the field's name as `name{label="value"}`, so a
metric the table does not know is never dropped. Metrics about the node (a GPU count) are neither. A series whose
device has no identity (no serial or UUID label) is skipped, with one scrape_error per device naming its first
line; the rest of the page is read as usual.

A partition that names only its parent's index (an Ascend vNPU) is attached to the whole device of that index
on the same node; without one on the page it is skipped the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpuledger.collector.dcgm.rows import INT_COLUMNS, PageRows
from gpuledger.collector.vendors.table import Device, Missing, Vendor, target_node

INTS = INT_COLUMNS | {"mem_total_bytes"}  # dcgm derives its total apart; here it is a metric like the others


@dataclass
class _Bad:
    """A device without identity: the first sample of it, for the scrape_error."""

    sample: int
    why: str
    device: str
    node: str | None


@dataclass
class _Page:
    rows: dict[str, dict] = field(default_factory=dict)
    ranks: dict[tuple[str, str], tuple] = field(default_factory=dict)  # (uuid, column) -> (rank, name, value)
    bad: dict[tuple[str | None, str], _Bad] = field(default_factory=dict)
    orphans: list = field(default_factory=list)  # (sample index, node, Device, name, labels, value) of partitions


class VendorRows:
    """Turns one vendor's pages (or one Prometheus instant of its series) into rows; keeps nothing between pages."""

    def __init__(self, vendor: Vendor, cluster: str, source: str | None = None, via_prometheus: bool = False):
        self.vendor = vendor
        self.cluster = cluster
        self.source = source or vendor.source
        self.via_prometheus = via_prometheus
        # A scraped target's label strings of its last page, for exposition.parse_fast(text, known)
        self.known: dict = {}

    def rows(
        self, samples: Iterable, ts_us: int, default_node: str | None = None, where=None
    ) -> tuple[PageRows, list[dict]]:
        """(rows, scrape_error events) of one page. `samples` are (name, labels, value, ...) in page order;
        `where(i)` words where sample i came from (its line of the page), for the scrape_error."""
        v = self.vendor
        out = PageRows()
        page = _Page()
        devices: dict[int, tuple[str | None, Device | Missing]] = {}  # id(labels) -> (node, its device)
        strip = v.strip_prefix
        for i, (name, labels, value, *_) in enumerate(samples):
            if strip and name.startswith(strip):
                name = name[len(strip) :]
            if name in v.node_metrics:
                continue
            d = devices.get(id(labels))
            if d is None:
                d = devices[id(labels)] = (self._node(labels, default_node), v.device(labels, self.via_prometheus))
            node, dev = d
            if isinstance(dev, Missing):
                page.bad.setdefault((node, dev.device), _Bad(i, dev.why, dev.device, node))
                continue
            if dev.parent_index is not None:
                page.orphans.append((i, node, dev, name, labels, value))
                continue
            self._sample(out, page, ts_us, node, dev, dev.gpu_uuid, name, labels, value)
        # Partitions named by their parent's index: the whole device of that index on the node
        chips = {(r["node"], r["gpu_index"]): u for u, r in page.rows.items() if r["parent_gpu_uuid"] is None}
        for i, node, dev, name, labels, value in page.orphans:
            parent = chips.get((node, dev.parent_index))
            if parent is None:
                why = f"no device with index {dev.parent_index} on the page to be its parent"
                bad = _Bad(i, why, f"{dev.gpu_uuid} of index {dev.parent_index}", node)
                page.bad.setdefault((node, dev.gpu_uuid), bad)
                continue
            self._sample(out, page, ts_us, node, dev, f"{parent}/{dev.gpu_uuid}", name, labels, value, parent)
        out.samples += list(page.rows.values())
        errors = [
            self._error(ts_us, b, where(b.sample) if where is not None else None)
            for b in sorted(page.bad.values(), key=lambda b: b.sample)
        ]
        return out, errors

    def _node(self, labels: Mapping[str, str], default_node: str | None) -> str | None:
        node = labels.get("hostname") or labels.get("Hostname")
        if node:
            return node
        if self.via_prometheus:
            return target_node(labels) or default_node
        return default_node

    def _sample(self, out, page, ts_us, node, dev: Device, uuid, name, labels, value, parent=None) -> None:
        row = page.rows.get(uuid)
        if row is None:
            row = page.rows[uuid] = self._new_row(ts_us, node, dev, uuid, parent)
        elif row["pod"] is None and dev.pod is not None:
            row.update(pod=dev.pod, namespace=dev.namespace, container=dev.container)
        col = self.vendor.columns.get(name)
        if col is not None and not self._index(labels):
            c, factor, rank = col
            held = page.ranks.get((uuid, c))
            if held is None or rank < held[0]:
                page.ranks[(uuid, c)] = (rank, name, value)
                if value != value or value in (float("inf"), float("-inf")) or value == self.vendor.failed_value:
                    row[c] = None
                else:
                    row[c] = int(round(value * factor)) if c in INTS else value * factor
                if held is None:
                    return
                name, value = held[1], held[2]  # the metric it displaced is kept, as the loser of a tie is
        out.fields.append(
            {
                "ts": ts_us,
                "cluster": self.cluster,
                "node": node,
                "gpu_uuid": uuid,
                "field": self._field_name(name, labels),
                "value": value if value == value else None,
                "source": self.source,
            }
        )

    def _index(self, labels: Mapping[str, str]) -> list[tuple[str, str]]:
        return [(k, labels[k]) for k in self.vendor.index_labels if labels.get(k)]

    def _field_name(self, name: str, labels: Mapping[str, str]) -> str:
        index = self._index(labels)
        if not index:
            return name
        return name + "{" + ",".join(f'{k}="{v}"' for k, v in index) + "}"

    def _new_row(self, ts_us: int, node: str | None, dev: Device, uuid: str, parent: str | None) -> dict:
        return {
            "ts": ts_us,
            "cluster": self.cluster,
            "node": node,
            "gpu_uuid": uuid,
            "gpu_index": dev.gpu_index,
            "parent_gpu_uuid": parent or dev.parent_gpu_uuid,
            "partition_share": dev.partition_share,
            "mig_profile": dev.mig_profile,
            "model": dev.model,
            "pci_bus_id": dev.pci_bus_id,
            "driver_version": dev.driver_version,
            "vendor": self.vendor.vendor,
            "source": self.source,
            "pod": dev.pod,
            "namespace": dev.namespace,
            "container": dev.container,
        }

    def _error(self, ts_us: int, b: _Bad, where: str | None) -> dict:
        at = f" ({where})" if where else ""
        return {
            "ts": ts_us,
            "cluster": self.cluster,
            "node": b.node,
            "gpu_uuid": None,
            "kind": "scrape_error",
            "code": None,
            "detail": f"{self.vendor.source}: device {b.device} skipped: {b.why}{at}",
            "source": self.source,
        }
