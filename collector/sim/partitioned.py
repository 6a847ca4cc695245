"""Partitioned nodes of the simulated fleet: which nodes run a static layout, how their instances are named and
spelled, and which jobs ask for them.

The config (`[simulator] partitions`, checked by gpuledger.config.sim_partition_problem) names a layout per model;
`partitioned_node_share` of that model's nodes (the last ones, at least one) run every GPU in it, as an operator
labels a node for mig-parted, sets an AMD node's compute mode or cuts a chip's vNPUs. The scheduler
(gpuledger/placement.py) places partition asks on their instances by gpuledger/partitions.py's rules.

What the lake then holds is what the real sources write (docs/accelerators.md):
- gpu_samples: the parent row of each GPU, and a row per instance with `parent_gpu_uuid`, `mig_profile` as the
  vendor's source spells it (MIG `1g.10gb` as NVML/DCGM, AMD `cpx.nps4` as the device metrics exporter, Ascend
  `vnpu-5c` as the npu-exporter's builder) and `partition_share` (partitions.instance_share); the instance's uuid as
  those sources name it: `MIG-<uuid>`, `<serial>/p<partition>`, `<chip>/vnpu<id>`;
- jobs: a partition ask as the Kubernetes source records it (collector/k8s/pods.py through vendors.read_resource):
  `mig_profile` the resource's profile (`1g.10gb` from nvidia.com/mig-1g.10gb, `cpx.nps4` from amd.com/cpx_nps4,
  `Ascend910-5c` from huawei.com/Ascend910-5c), `gpu_sharing` `mig` on NVIDIA and `partition` otherwise, `gpus` the
  instances x one instance's share, `gpu_uuids` the instances'.

Which jobs ask partitions (`ask`): on a model with partitioned nodes, a share of its small jobs, the ones
partitions are for: every job that would ask a fraction of a GPU, and the one-GPU notebooks, services and
evaluations. A fraction asks the smallest instance type holding it (on `all-balanced`, a quarter GPU takes a 2g,
2/7), or, where none does, as many of the largest type as come nearest to it (a half GPU on `all-1g.10gb` is four
1g, on CPX four partitions); a notebook asks one instance of the smallest type (a person's session on a slice), a
one-GPU service or evaluation one of the largest (a small model served or scored on a slice). Per instance type,
the chance that a small job mapped to it asks it (`Workload._convert_p`) is set so that the asks offer the type's
part of the partitioned GPUs the fleet's load; where the small jobs cannot (they bring ~8 % of the GPU-hours as
partitions: beyond that share of a model's GPUs), every one of them asks and the type runs below the fleet's load.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gpuledger.collector.sim import noise
from gpuledger.collector.sim.catalog import CATALOG
from gpuledger.config import sim_partition_problem
from gpuledger.partitions import AMD_PROFILE, instance_share, parse_instance, parse_layout

# The memory mode an AMD compute mode runs with where the layout does not say: CPX with NPS4 (a memory partition
# per pair of XCDs; the AMD GPU Operator's example resource is amd.com/cpx_nps4), the others with NPS1.
AMD_DEFAULT_NPS = {"cpx": "nps4"}
# The one-GPU jobs that ask one instance instead: a notebook the smallest type (a person's session), a service or an
# evaluation the largest (a small model served or scored on a slice, as MIG's inference use is).
ONE_INSTANCE = ("notebook", "inference", "evaluation")
CONVERT_STREAM = 40  # noise stream of the draw that makes a small job a partition ask (keyed by the job's number)


@dataclass(frozen=True)
class SimLayout:
    """One model's layout on its partitioned nodes (every GPU of such a node holds it)."""

    model_key: str
    text: str  # as configured
    types: tuple[str, ...]  # one GPU's instances, canonical (partitions.parse_layout), in slot order
    family: str  # mig, amd, vnpu
    sample_profiles: tuple[str, ...]  # per slot: gpu_samples.mig_profile as the vendor's source writes it
    shares: tuple[float, ...]  # per slot: the share of the GPU it holds (partitions.instance_share)
    job_profiles: tuple[tuple[str, str], ...]  # (type, jobs.mig_profile as the k8s source records it)

    @property
    def share_of(self) -> dict[str, float]:
        return dict(zip(self.types, self.shares, strict=True))

    def job_profile(self, t: str) -> str:
        return dict(self.job_profiles)[t]


def sim_layout(model_key: str, text: str) -> SimLayout:
    """The layout `text` of catalog model `model_key`; ValueError naming the model when it is not one it holds."""
    problem = sim_partition_problem(model_key, text)
    if problem is not None:
        raise ValueError(f"simulator.partitions.{model_key}: {problem}")
    name = CATALOG[model_key].name
    types = parse_layout(text, name)
    family = parse_instance(types[0]).family
    shares = tuple(instance_share(t, name) for t in types)
    if family == "amd":
        m = AMD_PROFILE.match(text.strip().lower())
        mode = types[0]
        spelled = f"{mode}.{(m and m.group(2)) or AMD_DEFAULT_NPS.get(mode, 'nps1')}"
        samples, jobs = (spelled,) * len(types), ((mode, spelled),)
    elif family == "vnpu":
        samples = types
        # huawei.com/Ascend910-<n>c: the device plugin names a 910 series chip's vNPUs by the series
        jobs = tuple((t, f"Ascend910-{parse_instance(t).size}c") for t in dict.fromkeys(types))
    else:
        samples, jobs = types, tuple((t, t) for t in dict.fromkeys(types))
    return SimLayout(model_key, text, types, family, samples, shares, jobs)


def sim_layouts(partitions: Mapping[str, str], models: Sequence[str]) -> dict[str, SimLayout]:
    """The layouts of the fleet's models (a model the fleet does not field has no nodes to partition)."""
    return {k: sim_layout(k, v) for k, v in sorted(partitions.items()) if k in models}


def partitioned_count(model_nodes: int, share: float) -> int:
    """How many of a model's nodes are partitioned: the share of them, rounded half up, at least one."""
    return min(model_nodes, max(1, math.floor(share * model_nodes + 0.5))) if model_nodes else 0


def child_uuids(vendor: str, parent: str, seed: int, cluster: str, node: int, gpu: int, slots: int) -> tuple[str, ...]:
    """The instances' uuids as the vendor's source names them: NVML a MIG device `MIG-<uuid>` (its own uuid), the
    AMD exporter `<serial>/p<partition id>`, the npu-exporter's builder `<chip>/vnpu<v_dev_id>` (a node-unique id)."""
    if vendor == "amd":
        return tuple(f"{parent}/p{s}" for s in range(slots))
    if vendor == "huawei":
        return tuple(f"{parent}/vnpu{100 + gpu * 16 + s}" for s in range(slots))
    salt = int.from_bytes(cluster.encode()[:8].ljust(8, b"\0"), "little")
    out = []
    for s in range(slots):
        a = noise.mix(np.asarray([seed, node * 64 + gpu, salt, 16 + s], dtype=np.uint64))
        out.append("MIG-" + str(uuid.UUID(int=(int(a[0] ^ a[2]) << 64) | int(a[1] ^ a[3]), version=4)))
    return tuple(out)


def ask(layout: SimLayout, cls: str, size: float, most: Mapping[str, int]) -> tuple[str, int] | None:
    """The instance type and count a job of class `cls` asking `size` GPUs takes on `layout` (see the module's
    docstring), or None for a job partitions are not for. `most`: instances of each type on one node (a cap)."""
    if not (size < 1 or (size == 1 and cls in ONE_INSTANCE)):
        return None
    share = layout.share_of
    kinds = sorted(share, key=lambda t: (share[t], t))  # smallest first
    if size == 1:
        return (kinds[0] if cls == "notebook" else kinds[-1]), 1
    fit = [t for t in kinds if share[t] >= size - 1e-9]
    if fit:
        return fit[0], 1
    t = kinds[-1]
    return t, min(most[t], max(1, round(size / share[t])))


def per_node(layout: SimLayout, gpus_per_node: int) -> dict[str, int]:
    """Instances of each type on one partitioned node."""
    return {t: c * gpus_per_node for t, c in Counter(layout.types).items()}
