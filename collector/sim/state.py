"""Where a simulated fleet stands, kept in the lake (`_sim/<cluster>.json`), so that `gpuledger up` continues
the backfilled history live instead of starting a different simulation."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from gpuledger import lake_url
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


def path(lake: Path | lake_url.S3Location, cluster: str) -> Path | lake_url.S3Location:
    return lake_url.parse(lake) / "_sim" / f"{cluster}.json"


def load(lake: Path | lake_url.S3Location, cluster: str) -> SimState | None:
    p = path(lake, cluster)
    if isinstance(p, lake_url.S3Location):
        data = lake_url.read_bytes(p)
    else:
        data = p.read_bytes() if p.exists() else None
    if data is None:
        return None
    d = json.loads(data)
    d["models"] = tuple(d["models"])
    return SimState(**d)


def save(lake: Path | lake_url.S3Location, cluster: str, state: SimState) -> None:
    p, data = path(lake, cluster), json.dumps(asdict(state), indent=1).encode()
    if isinstance(p, lake_url.S3Location):
        lake_url.write_bytes(p, data)  # one PUT replaces it whole; one fleet per cluster writes it
    else:
        write_bytes_atomic(p, data)
