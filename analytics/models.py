"""The lake's GPU models, checked against the config's quota keys, for a process that only reads the lake.

`enforcer serve`, `enforcer check` and `up` call it before they rely on the quotas: a quota key that names no GPU
model of the lake would cap nothing, so it is a ConfigError there and then.
"""

from __future__ import annotations

from gpuledger.analytics import decisions
from gpuledger.config import Config, check_quota_models
from gpuledger.store import LakeRef, open_store


def read_checked_models(lake: LakeRef, cfg: Config) -> list[str]:
    """`decisions.checked_models`, read as a reader must: as one read (an analytics run or a compaction may be
    replacing the files it reads), and without writing the analytics' day memos: these callers only read the lake."""
    store = open_store(lake)
    with store.reading():
        return decisions.checked_models(store, cfg, read_only=True)


def read_models_by_cluster(lake: LakeRef, cfg: Config) -> dict[str, list[str]]:
    """The GPU models of each cluster of the lake (`decisions.models_by_cluster`), read as `read_checked_models`
    reads, once every quota key names a model of the lake: what a cluster's Kueue flavors are made of."""
    store = open_store(lake)
    with store.reading():
        by_cluster = decisions.models_by_cluster(store, read_only=True)
    check_quota_models(cfg, {m for models in by_cluster.values() for m in models})
    return by_cluster
