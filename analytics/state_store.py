"""Where the analytics keep their state between runs (watermarks, the incremental state, the jobs' newest rows, the
day memos, the partition manifests): the folder the lake's Store gives a run of "analytics" (Store.state: the
lake's own `_state/analytics/`, or an object-store lake's local copy, committed at the end of a run)."""

from __future__ import annotations

from pathlib import Path

from gpuledger.store import LakeRef, open_store

STATE = "analytics"


def state_dir(lake: LakeRef) -> Path:
    """The state folder a run reads and writes."""
    return open_store(lake).state_folder(STATE)
