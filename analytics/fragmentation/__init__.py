"""fragmentation: GPU fragmentation as the FGD paper measures it, as pure functions over polars frames.

The definition is ../shared/FRAGMENTATION.md (Weng et al., "Beware of Fragmentation", USENIX ATC 2023, and its
artifact hkust-adsl/kubernetes-scheduler-simulator). Three concepts, one module each:

- `task_types`: the target workload M ("typical pods") built from a pod list.
- `metric`: F_n(M) per node, cluster totals, and the whole-GPU view (free GPUs no N-GPU job can use).
- `replay`: place a pod list one by one (BestFit or FGD), logging allocation and fragmentation after each pod,
  for what-ifs and to check the metric against the paper's published curves.

Partitioned devices (MIG, AMD CPX/DPX..., Ascend vNPU) follow gpuledger/partitions.py: its frames (node state
`gpu_partitions`, the replay cluster's `gpu_layout`, `profile` on pods and task types) are optional, and a frame
without them gives exactly what it gave before. An ask of an instance type fits where free instances of that type
are; a partitioned GPU offers no whole GPU and no share; a whole GPU offers no instance.

Frames in, frames out; no IO. Units: CPU in milli-cores, GPU in milli-GPU (1000 = one whole GPU).
"""

from gpuledger.analytics.fragmentation.metric import cluster_fragmentation, node_fragmentation, stranded_whole_gpus
from gpuledger.analytics.fragmentation.replay import POLICIES, ReplayResult, arrival_bins, inflate_workload, replay
from gpuledger.analytics.fragmentation.task_types import typical_task_types

__all__ = [
    "POLICIES",
    "ReplayResult",
    "arrival_bins",
    "cluster_fragmentation",
    "inflate_workload",
    "node_fragmentation",
    "replay",
    "stranded_whole_gpus",
    "typical_task_types",
]
