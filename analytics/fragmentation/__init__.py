"""fragmentation: GPU fragmentation as the FGD paper measures it, as pure functions over polars frames.

The definition is ../shared/FRAGMENTATION.md (Weng et al., "Beware of Fragmentation", USENIX ATC 2023, and its
artifact hkust-adsl/kubernetes-scheduler-simulator). Three concepts, one module each:

- `task_types`: the target workload M ("typical pods") built from a pod list.
- `metric`: F_n(M) per node, cluster totals, and the whole-GPU view (free GPUs no N-GPU job can use).
- `replay`: place a pod list one by one (BestFit or FGD), logging allocation and fragmentation after each pod,
  for what-ifs and to check the metric against the paper's published curves.

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
