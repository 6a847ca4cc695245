"""Where a simulated fleet stands, kept in the lake (`_sim/<cluster>.json`), so that `gpuledger up` continues
the backfilled history live instead of starting a different simulation."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from gpuledger.atomic import write_bytes_atomic


@dataclass(frozen=True)
class SimState:
    seed: int
    epoch_s: float  # the fleet started empty here (a warm-up before the first written sample)
    nodes: int
    gpus_per_node: int
    models: tuple[str, ...]
    load: float
    written_until_s: float  # every row before this instant is in the lake (exclusive bound)


def path(lake: Path, cluster: str) -> Path:
    return Path(lake) / "_sim" / f"{cluster}.json"


def load(lake: Path, cluster: str) -> SimState | None:
    p = path(lake, cluster)
    if not p.exists():
        return None
    d = json.loads(p.read_text())
    d["models"] = tuple(d["models"])
    return SimState(**d)


def save(lake: Path, cluster: str, state: SimState) -> None:
    write_bytes_atomic(path(lake, cluster), json.dumps(asdict(state), indent=1).encode())
