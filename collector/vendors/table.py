"""What a vendor is to the collector: a mapping, not a parser.

A `Vendor` says which gpu_samples column each of its metrics fills and by what factor (to bytes, W, J, %), which
labels name the device, its partition and the pod holding it, which metrics describe the node rather than a
device, and which labels index a metric within one device (a clock, a link): those stay part of the gpu_fields
row's name. Everything not listed as a column lands in gpu_fields, so a metric the table does not know is kept.
The two tables are in vendors/amd.py and vendors/ascend.py; docs/accelerators.md cites their sources.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Device:
    """One gpu_samples row's identity, read from one series' labels."""

    gpu_uuid: str
    parent_gpu_uuid: str | None  # the physical device of a partition (AMD CPX/DPX/QPX, Ascend vNPU)
    partition_share: float | None  # its share of the parent; null for a whole device
    mig_profile: str | None  # the partition's profile (cpx.nps4, vnpu-2c), as MIG rows name theirs
    gpu_index: int | None
    model: str | None
    pci_bus_id: str | None
    driver_version: str | None
    pod: str | None
    namespace: str | None
    container: str | None
    # A partition whose series name only its parent's index (Ascend vNPU: `id`, no vdie_id): the builder finds the
    # whole device of that index on the same node, and the row's gpu_uuid is "<parent's>/<gpu_uuid>"
    parent_index: int | None = None


@dataclass(frozen=True)
class Missing:
    """A series whose device has no identity: `device` names it (e.g. `gpu_id="3"`), `why` says what is missing."""

    device: str
    why: str


@dataclass(frozen=True)
class Vendor:
    source: str  # the source name (rows' `source` when scraped directly) and the word in its messages
    vendor: str  # gpu_samples.vendor
    # metric -> (column, factor to the column's unit, rank): when two metrics fill one column on one device, the
    # lower rank wins (AMD MI3xx reports gpu_package_power, MI2xx gpu_average_package_power)
    columns: Mapping[str, tuple[str, float, int]]
    node_metrics: frozenset[str]  # about the node, not a device (machine_npu_nums): no row, no error
    index_labels: tuple[str, ...]  # labels that tell apart one device's series of one metric: kept in the field name
    name_prefixes: tuple[str, ...]  # at least one series must start so, or the page is another exporter's
    strip_prefix: str  # an optional name prefix the exporter may be configured with (AMD `amd_`), removed first
    # labels -> Device, or Missing; the second argument says whether the labels came through a Prometheus server
    # (target labels added, colliding ones renamed exported_*)
    device: Callable[[Mapping[str, str], bool], Device | Missing]
    failed_value: float | None = None  # a value the exporter writes for a failed read: null, not a number


def first(labels: Mapping[str, str], *names: str) -> str | None:
    for n in names:
        v = labels.get(n)
        if v:
            return v
    return None


def target_node(labels: Mapping[str, str]) -> str | None:
    """The node of a series read through Prometheus that names none itself: a `node` label added by relabelling,
    else the host of the scrape target's `instance` (host:port)."""
    node = labels.get("node")
    if node:
        return node
    inst = labels.get("instance")
    if not inst:
        return None
    try:
        return urllib.parse.urlsplit("//" + inst).hostname or None
    except ValueError:
        return None
