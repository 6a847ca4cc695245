"""Where a simulated fleet stands, kept in the lake (`_sim/<cluster>.json`), so that `gpuledger up` continues
the backfilled history live instead of starting a different simulation."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from gpuledger.store import LakeRef, open_store


@dataclass(frozen=True)
class SimState:
    seed: int
    epoch_s: float  # the fleet started empty here (a warm-up before the first written sample)
    nodes: int
    gpus_per_node: int
    models: tuple[str, ...]
    load: float
    written_until_s: float  # every row before this instant is in the lake (exclusive bound)
    # model -> layout of its partitioned nodes, and their share (collector/sim/partitioned.py); a fleet without
    # partitions writes neither, so its state file is what it was before they existed
    partitions: dict[str, str] = field(default_factory=dict)
    partitioned_node_share: float = 0.0

    def shape(self) -> tuple:
        """What makes the fleet: two states of one shape are one fleet, continued."""
        share = self.partitioned_node_share if self.partitions else None
        parts = tuple(sorted(self.partitions.items()))
        return (self.seed, self.nodes, self.gpus_per_node, tuple(self.models), self.load, parts, share)


def key(cluster: str) -> str:
    return f"_sim/{cluster}.json"


def load(lake: LakeRef, cluster: str) -> SimState | None:
    data = open_store(lake).get(key(cluster))
    if data is None:
        return None
    d = json.loads(data)
    d["models"] = tuple(d["models"])
    return SimState(**d)


def save(lake: LakeRef, cluster: str, state: SimState) -> None:
    # Replaced whole (Store.put): one fleet per cluster writes it.
    d = asdict(state)
    if not state.partitions:
        del d["partitions"], d["partitioned_node_share"]
    open_store(lake).put(key(cluster), json.dumps(d, indent=1).encode())
