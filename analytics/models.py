"""The lake's GPU models, checked against the config's quota keys, for a process that only reads the lake.

`enforcer serve`, `enforcer check` and `up` call it before they rely on the quotas: a quota key that names no GPU
model of the lake would cap nothing, so it is a ConfigError there and then.
"""

from __future__ import annotations

from gpuledger.analytics import decisions
from gpuledger.config import Config
from gpuledger.store import LakeRef, open_store


def read_checked_models(lake: LakeRef, cfg: Config) -> list[str]:
    """`decisions.checked_models`, read as a reader must: as one read (an analytics run or a compaction may be
    replacing the files it reads), and without writing the analytics' day memos: these callers only read the lake."""
    store = open_store(lake)
    with store.reading():
        return decisions.checked_models(store, cfg, read_only=True)
