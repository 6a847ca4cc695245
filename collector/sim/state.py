"""Where a simulated fleet stands, kept in the lake (`_sim/<cluster>.json`), so that `gpuledger up` continues
the backfilled history live instead of starting a different simulation."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

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
    open_store(lake).put(key(cluster), json.dumps(asdict(state), indent=1).encode())
