"""Node names that two machines claimed (sql/node_claims.sql), as the lines `gpuledger analyze` warns with.

The lake cannot tell two machines' rows apart when they report under one node name, so every figure of that node
mixes the two. Reported, not refused: the rows are in the lake already, and an operator renames one collector.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from gpuledger.lake import has_data
from gpuledger.query import Lake
from gpuledger.store import LakeRef


@dataclass(frozen=True)
class NodeClaim:
    cluster: str
    node: str
    first_clash: dt.datetime
    last_clash: dt.datetime
    gpu_uuids: tuple[str, ...]

    def warning(self) -> str:
        return (
            f"warning: node {self.node!r} of cluster {self.cluster!r} is claimed by two machines: GPUs "
            f"{', '.join(self.gpu_uuids)} report at the same GPU index from {self.first_clash:%Y-%m-%d %H:%M} to "
            f"{self.last_clash:%Y-%m-%d %H:%M} UTC; give each collector its own collector.node (its rows are merged "
            "into one node until then)"
        )


def recent_claims(lake: LakeRef, cluster: str, until: dt.datetime) -> list[NodeClaim]:
    """The node names of `cluster` that two machines claimed in the UTC day before `until` (and `until`'s own
    date), one per node with the first and last clash and every GPU seen, by node name."""
    if not has_data(lake, "gpu_samples"):
        return []
    with Lake(lake) as q:
        rows = q.execute(
            "SELECT node, min(first_clash), max(last_clash), list_sort(list_distinct(flatten(list(gpu_uuids)))) "
            "FROM node_claims WHERE cluster = $cluster AND date BETWEEN $lo AND $hi GROUP BY node ORDER BY node",
            {"cluster": cluster, "lo": (until - dt.timedelta(days=1)).date(), "hi": until.date()},
        ).rows
    return [NodeClaim(cluster, node, first, last, tuple(gpus)) for node, first, last, gpus in rows]
