"""Node names that two machines claimed, as the warning lines an analytics run logs (the `node_claims` view,
sql/node_claims.sql, lists them for any window).

The lake cannot tell two machines' rows apart when they report under one node name, so every figure of that node
mixes the two. Reported, not refused: the rows are in the lake already, and an operator renames one collector.

Found in the pass over raw samples, from its 5-minute rows (gpu_5min with `_gpu_index`): the view's rule on rows
already in memory, so a run checks the hours it analysed at no second read of the samples (a query over the last day
of 10,000 GPUs' samples took 5.3 s, as long as the rest of an hourly run).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import polars as pl

BUCKET = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class NodeClaim:
    cluster: str
    node: str
    first_clash: dt.datetime
    last_clash: dt.datetime
    gpu_uuids: tuple[str, ...]

    def warning(self) -> str:
        return (
            f"node {self.node!r} of cluster {self.cluster!r} is claimed by two machines: GPUs "
            f"{', '.join(self.gpu_uuids)} report at the same GPU index from {self.first_clash:%Y-%m-%d %H:%M} to "
            f"{self.last_clash:%Y-%m-%d %H:%M} UTC; give each collector its own collector.node (its rows are merged "
            "into one node until then)"
        )


def clashes(five: pl.DataFrame) -> pl.DataFrame:
    """The 5-minute buckets where two physical GPUs reported at one index of one node (the view's rule: a row is
    its physical GPU's, a partition's its parent's; rows without an index left out; two sources of one machine
    report one UUID and are not a clash). A MIG instance or vNPU reports at its GPU's index, so it is no second GPU
    there; an AMD partition reports at an index of its own, so a GPU known by its partitions only (CPX) is checked
    too. `five`: gpu_5min rows with `_gpu_index`. One row per (cluster, node, bucket) with the GPUs seen, sorted."""
    gpu = pl.coalesce("parent_gpu_uuid", "gpu_uuid")
    return (
        five.filter(pl.col("_gpu_index").is_not_null())
        .group_by("cluster", "node", "_gpu_index", "bucket_start")
        .agg(gpu.min().alias("a"), gpu.max().alias("b"))
        .filter(pl.col("a") != pl.col("b"))
        .group_by("cluster", "node", "bucket_start")
        .agg(pl.concat_list("a", "b").explode().unique().sort().alias("gpu_uuids"))
        .sort("cluster", "node", "bucket_start")
    )


def claims(found: pl.DataFrame, cluster: str) -> list[NodeClaim]:
    """One claim per node of `cluster` over the clash rows of `clashes` (any number of days concatenated): its
    first and last clash and every GPU seen, by node name."""
    mine = found.filter(pl.col("cluster") == cluster)
    if mine.is_empty():
        return []
    per_node = (
        mine.group_by("node")
        .agg(
            pl.col("bucket_start").min().alias("first"),
            pl.col("bucket_start").max().alias("last"),
            pl.col("gpu_uuids").explode().unique().sort().alias("gpus"),
        )
        .sort("node")
    )
    return [
        NodeClaim(cluster, node, first, last + BUCKET, tuple(gpus)) for node, first, last, gpus in per_node.iter_rows()
    ]
