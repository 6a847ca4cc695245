"""Fragmentation over time: at each hour, each GPU model's free capacity and how much of it the target workload M
cannot use (FGD, analytics/fragmentation), plus the whole-GPU view (free GPUs no N-GPU job can use).

Which GPUs exist at an hour (the inventory): from telemetry when the cluster has it (a node's physical GPUs are
those that reported in that hour, gpu_hourly); else from the `nodes` table, every GPU of a node at every hour
from its first to its last observation (an imported trace has a node list and no telemetry). A GPU's free share
is 1 minus the shares of the allocations holding it at the hour's start (a MIG slice's share counts on its
parent GPU).

Partitioned devices (gpuledger/partitions.py): a physical GPU with partition rows in gpu_hourly at an hour (MIG
instances, AMD CPX/DPX... partitions, Ascend vNPUs: rows whose parent_gpu_uuid names it) is partitioned at that hour,
its layout the partitions that reported. Its node state's `gpu_partitions` entry lists the instance types
(`instance_type` of each row's mig_profile, sorted, joined by ",") of the partitions no allocation holds at the hour
start ("" when none is free); a whole GPU's entry is null. A partition whose profile is not known (rows written
before gpu_hourly had mig_profile) offers no instance; a GPU none of whose partitions has a known profile is read
as a whole GPU, as before. A GPU with partition rows and no row of its own (the AMD exporter reports a CPX GPU as
its eight partitions only) is in the inventory by its partitions. Its free milli is the GPU's as above; and an
allocation naming the physical device itself leaves no instance of a GPU it fills free. A partitioned GPU is never
a whole free GPU: the stranded_* counts are of whole devices only.

The workload M: the cluster's imported pod shapes when the lake has them (`pod_shapes`: a trace's whole pod list,
CPU requests and CPU-only pods included, which is how FGD builds M), with a node's CPU from its `cpu_milli` label;
else each model's own jobs (their GPU requests as FGD task types; jobs carry no CPU request, so CPU never blocks),
per model because a job that asked for an H100 cannot run on an L4 node. A job with a partition profile
(jobs.mig_profile: nvidia.com/mig-1g.10gb, amd.com/cpx_nps4, huawei.com/Ascend910-2c) is a task of its instance type
(`profile`) asking that many instances, each of one instance's share (job_pods). The CPU the bound pods requested is
not known (jobs carry none), so a node's free CPU is its whole CPU.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from gpuledger.analytics.fleet import UNKNOWN_MODEL
from gpuledger.analytics.fragmentation import node_fragmentation, typical_task_types
from gpuledger.analytics.gpu_hourly import physical
from gpuledger.partitions import instance_share, instance_type, parse_instance
from gpuledger.vendors import read_resource

SIZES = (1, 2, 4, 8)
NO_CPU_LIMIT = 10**9  # a node whose CPU is unknown: CPU never blocks a task there
STATE = {"hour": pl.Datetime("us", "UTC"), "model": pl.String, "cpu_free_milli": pl.Int64}
STATE |= {"gpu_free_milli": pl.List(pl.Int64), "n": pl.Int64}  # n: identical nodes one row stands for
# telemetry_state's: STATE and each GPU's free instance types (null: a whole GPU), gpuledger/partitions.py's frame
PARTITIONED_STATE = STATE | {"gpu_partitions": pl.List(pl.String)}
SHAPE_KEY = ("cpu_milli", "gpu_milli", "num_gpu", "gpu_spec")
# The device plugin's resource name a jobs.mig_profile comes from (collector/k8s/pods.py), per vendor family: the
# unit share the k8s source priced the job's `gpus` with is read back by the same rule.
_PLUGIN_NAMES = {"mig": "nvidia.com/mig-{}", "amd": "amd.com/{}", "vnpu": "huawei.com/{}"}


def unit_share(profile: str, model: str | None = None) -> float | None:
    """The share of its device one instance of a partition profile holds: the device's own figure where the job's
    model says it (gpuledger.partitions.instance_share: `Ascend910-5c` on a 910B3 5/20, `cpx` on an MI300A 1/6),
    else the device plugin's resource name read by gpuledger.vendors.read_resource, as the k8s source priced a job
    whose model it did not know (`1g.10gb` 1/7, `cpx.nps4` 1/8, `Ascend910-2c` 2/32); None when neither knows.
    A model-less 910B job priced 5/32 and read back against 5/20 still makes one instance (0.625 rounds to 1); a
    910B fleet maps its templates in `[[accelerators]]` (docs/accelerators.md) so the two agree for any count."""
    inst = parse_instance(profile)
    if inst is None:
        return None
    own = instance_share(profile, model) if model else None
    if own is not None:
        return own
    r = read_resource(_PLUGIN_NAMES[inst.family].format(profile.replace(".", "_") if inst.family == "amd" else profile))
    if r is not None and r.profile is not None:
        return r.share
    return instance_share(profile, model)


def instance_types(profiles: pl.Expr) -> pl.Expr:
    """instance_type of a String column, evaluated once per distinct value (a year of rows has a handful)."""

    def types(s: pl.Series) -> pl.Series:
        table = {p: instance_type(p) for p in s.unique().drop_nulls().to_list()}
        return s.replace_strict(table, default=None, return_dtype=pl.String)

    return profiles.map_batches(types, return_dtype=pl.String, is_elementwise=True)


def job_pods(jobs: pl.DataFrame) -> pl.DataFrame:
    """One FGD pod per job request (a `pods` column, if any, counts the jobs each row stands for): cpu_milli 0,
    gpu_milli, num_gpu, gpu_spec "" and `profile`.

    A share of one GPU is (1 GPU, share x 1000 milli); k GPUs are (k, 1000), a fractional k rounded up. A partition
    ask (`mig_profile` with an instance type, gpuledger/partitions.py) is (instances, one instance's share x 1000)
    with `profile` its instance type: instances = gpus / unit_share rounded, at least 1 (the k8s source sums units
    x share into `gpus`). Else `profile` is "" (and so is a partition ask whose share no rule knows: read as today).
    """
    weight = [pl.col("pods")] if "pods" in jobs.columns else []
    asks = partition_asks(jobs.filter(pl.col("gpus") > 0))
    zero_cpu = pl.lit(0, pl.Int64).alias("cpu_milli")
    return asks.select(*weight, zero_cpu, *ask_shape(), pl.lit("").alias("gpu_spec"), "profile")


def ask_shape(clip: bool = False) -> tuple[pl.Expr, pl.Expr]:
    """gpu_milli and num_gpu of partition_asks' rows: a partition ask's instance share and instances, a share of one
    GPU's thousandths and 1, else 1000 and the GPUs rounded up. `clip`: at least 1 milli, as a replay's pods need."""
    part, share = pl.col("profile") != "", pl.col("gpus") < 1
    milli = pl.when(part).then(pl.col("instance_milli")).when(share).then((pl.col("gpus") * 1000).round())
    milli = milli.otherwise(1000)
    gpus = pl.when(part).then(pl.col("instances")).when(share).then(1).otherwise(pl.col("gpus").ceil())
    return (
        (milli.clip(1, 1000) if clip else milli).cast(pl.Int64).alias("gpu_milli"),
        gpus.cast(pl.Int64).alias("num_gpu"),
    )


def partition_asks(jobs: pl.DataFrame) -> pl.DataFrame:
    """The jobs (gpus, and mig_profile, gpu_model where they have them) with what a partition ask takes: `profile`
    (its instance type, "" for no partition ask or one whose share no rule knows), `instances` (gpus / unit_share
    rounded, at least 1) and `instance_milli` (one instance's share x 1000, rounded); null but for partition asks."""
    for c in ("mig_profile", "gpu_model"):
        if c not in jobs.columns:
            jobs = jobs.with_columns(pl.lit(None, pl.String).alias(c))
    asks = jobs.select("mig_profile", "gpu_model").unique().drop_nulls("mig_profile")
    shares = [unit_share(p, m) if instance_type(p) else None for p, m in asks.iter_rows()]
    asks = asks.with_columns(
        instance_types(pl.col("mig_profile")).alias("_type"), pl.Series("_share", shares, dtype=pl.Float64)
    ).filter(pl.col("_type").is_not_null() & pl.col("_share").is_not_null())
    part = pl.col("_type").is_not_null()
    return (
        jobs.join(asks, on=["mig_profile", "gpu_model"], how="left", nulls_equal=True, maintain_order="left")
        .with_columns(
            pl.col("_type").fill_null("").alias("profile"),
            pl.when(part)
            .then((pl.col("gpus") / pl.col("_share")).round().clip(lower_bound=1))
            .cast(pl.Int64)
            .alias("instances"),
            pl.when(part).then((pl.col("_share") * 1000).round()).cast(pl.Int64).alias("instance_milli"),
        )
        .drop("_type", "_share")
    )


def task_types_of(jobs: pl.DataFrame) -> pl.DataFrame:
    """FGD task types from job requests (job_pods: whole GPUs, a share of one, or instances of a partition type)."""
    return typical_task_types(job_pods(jobs))


def task_types_of_shapes(shapes: pl.DataFrame) -> pl.DataFrame:
    """FGD task types from pod_shapes rows (counts summed over the workloads imported): one row per pod, then the
    artifact's typical pods."""
    counts = shapes.group_by(SHAPE_KEY).agg(pl.col("pods").sum())
    return typical_task_types(counts.select(pl.col(SHAPE_KEY).repeat_by(pl.col("pods"))).explode(SHAPE_KEY))


def latest_nodes(nodes: pl.LazyFrame, cluster: str) -> pl.DataFrame:
    """One row per node of the cluster, as the `nodes` view has it: the latest model, count and labels; the first
    and last time seen."""
    last = pl.col("last_seen")
    return (
        nodes.filter(pl.col("cluster") == cluster)
        .group_by("node")
        .agg(
            pl.col("gpu_model").sort_by(last).last(),
            pl.col("gpu_count").sort_by(last).last(),
            pl.col("labels").sort_by(last).last(),
            pl.col("first_seen").min(),
            last.max(),
        )
        .sort("node")
        .collect()
    )


def _held(allocs: pl.DataFrame, keys: tuple[str, ...]) -> pl.DataFrame:
    """Share held per (hour, *keys) at each hour start an allocation covers (start <= hour < end)."""
    first_h = pl.col("start").dt.truncate("1h")
    first_h = pl.when(first_h < pl.col("start")).then(first_h + pl.duration(hours=1)).otherwise(first_h)
    return (
        allocs.filter(pl.col("end") > pl.col("start"))
        .with_columns(pl.datetime_ranges(first_h, pl.col("end") - pl.duration(microseconds=1), "1h").alias("hour"))
        .explode("hour")
        .drop_nulls("hour")
        .group_by("hour", *keys)
        .agg(pl.col("share").sum().alias("held"))
    )


FREE = (1000 - (pl.col("held").fill_null(0) * 1000).round()).clip(0, 1000).cast(pl.Int64)


def telemetry_state(
    hourly: pl.LazyFrame,
    allocs: pl.DataFrame,
    start: dt.datetime,
    end: dt.datetime,
    parents: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Node state per (hour, node) from the GPUs that reported (gpu_hourly) and the allocations holding them, with
    `gpu_partitions` (PARTITIONED_STATE; see the module's docstring).

    parents: (gpu_uuid, parent_gpu_uuid) of the partitions, when the caller keeps them (else read from hourly);
    the window's partition rows add theirs."""
    window = hourly.filter((pl.col("hour") >= start) & (pl.col("hour") < end))
    profile = pl.col("mig_profile") if "mig_profile" in window.collect_schema().names() else pl.lit(None, pl.String)
    rows = window.select("hour", "node", "gpu_uuid", "parent_gpu_uuid", "model", profile.alias("mig_profile")).collect()
    kids = rows.filter(pl.col("parent_gpu_uuid").is_not_null())
    # One row per physical GPU, as fleet_hourly counts them: a GPU known by its partitions only (an AMD GPU in CPX
    # mode has no row of its own) is in the inventory too.
    inv = physical(rows.lazy()).select("hour", "node", "gpu_uuid", pl.col("model").fill_null(UNKNOWN_MODEL)).collect()
    if inv.is_empty():
        return pl.DataFrame(schema=PARTITIONED_STATE)
    if parents is None:
        parents = (
            hourly.filter(pl.col("parent_gpu_uuid").is_not_null())
            .select("gpu_uuid", "parent_gpu_uuid")
            .unique()
            .collect()
        )
    parents = pl.concat([parents.select("gpu_uuid", "parent_gpu_uuid"), kids.select("gpu_uuid", "parent_gpu_uuid")])
    parents = parents.unique("gpu_uuid", keep="first", maintain_order=True)
    a = (
        allocs.join(parents, on="gpu_uuid", how="left")
        .with_columns(pl.coalesce("parent_gpu_uuid", "gpu_uuid").alias("gpu_uuid"))
        .filter(pl.col("gpu_uuid").is_not_null())
    )
    # The free instances of each partitioned GPU: its partition rows of known type that no allocation holds.
    typed = kids.with_columns(instance_types(pl.col("mig_profile")).alias("type")).drop_nulls("type")
    held_kids = _held(allocs.filter(pl.col("gpu_uuid").is_in(typed["gpu_uuid"].unique().implode())), ("gpu_uuid",))
    free_types = (
        typed.join(held_kids, on=["hour", "gpu_uuid"], how="left")
        .group_by("hour", pl.col("parent_gpu_uuid").alias("gpu_uuid"))
        .agg(pl.col("type").filter(pl.col("held").fill_null(0) <= 0).sort().str.join(",").alias("partitions"))
    )
    per_gpu = (
        inv.join(_held(a, ("gpu_uuid",)), on=["hour", "gpu_uuid"], how="left")
        .with_columns(FREE.alias("free"))
        .join(free_types, on=["hour", "gpu_uuid"], how="left")
        # the physical device itself held whole (an allocation naming it, not a partition): no instance is free
        .with_columns(
            pl.when(pl.col("partitions").is_not_null() & (pl.col("free") == 0))
            .then(pl.lit(""))
            .otherwise("partitions")
            .alias("partitions")
        )
    )
    return (
        per_gpu.sort("hour", "node", "gpu_uuid")
        .group_by("hour", "node", maintain_order=True)
        .agg(pl.col("model").first(), pl.col("free").alias("gpu_free_milli"), pl.col("partitions"))
        .select(
            "hour",
            "model",
            pl.lit(NO_CPU_LIMIT).alias("cpu_free_milli"),  # telemetry says nothing of CPU
            "gpu_free_milli",
            pl.lit(1).alias("n"),
            pl.col("partitions").alias("gpu_partitions"),
        )
        .cast(PARTITIONED_STATE)
    )


def nodes_state(nodes: pl.DataFrame, allocs: pl.DataFrame, start: dt.datetime, end: dt.datetime) -> pl.DataFrame:
    """Node state per hour from the node list (for a cluster without telemetry): every GPU of a node exists at
    each hour start from its first to its last observation; allocations name their node.

    The nodes no allocation touches at an hour are all free, so they are one row per (hour, model, GPUs, CPU)
    standing for n nodes: a trace of 1,213 nodes over 3,585 hours is then ~100 thousand rows, not 4 million.
    """
    cpu = pl.col("labels").list.eval(pl.element().filter(pl.element().struct.field("key") == "cpu_milli"))
    h0 = pl.max_horizontal("first_seen", pl.lit(start).dt.cast_time_unit("us"))
    h0 = pl.when(h0.dt.truncate("1h") < h0).then(h0.dt.truncate("1h") + pl.duration(hours=1)).otherwise(h0)
    h1 = pl.min_horizontal("last_seen", pl.lit(end).dt.cast_time_unit("us") - pl.duration(microseconds=1))
    inv = (
        nodes.filter((pl.col("gpu_count") > 0) & pl.col("gpu_model").is_not_null())
        .select(
            "node",
            pl.col("gpu_model").alias("model"),
            pl.col("gpu_count").cast(pl.Int64).alias("gpus"),
            cpu.list.first().struct.field("value").cast(pl.Int64, strict=False).fill_null(NO_CPU_LIMIT).alias("cpu"),
            h0.alias("h0"),
            h1.alias("h1"),
        )
        .filter(pl.col("h0") <= pl.col("h1"))
    )
    if inv.is_empty():
        return pl.DataFrame(schema=STATE)
    group = ("model", "gpus", "cpu", "h0", "h1")
    inv = inv.with_columns(pl.struct(group).rank("dense").alias("gid"))
    hours = pl.datetime_ranges("h0", "h1", "1h").alias("hour")
    groups = inv.group_by("gid", *group).agg(pl.len().alias("n")).with_columns(hours).explode("hour")
    held = _held(allocs.filter(pl.col("gpu_uuid").is_not_null()), ("node", "gpu_uuid")).join(inv, on="node")
    touched = (
        held.filter(pl.col("hour").is_between("h0", "h1"))
        .with_columns(FREE.alias("free"))
        .sort("hour", "node", "gpu_uuid")
        .group_by("hour", "node", maintain_order=True)
        .agg(pl.col("gid", "model", "gpus", "cpu").first(), pl.col("free"))
        .with_columns(  # the GPUs no allocation holds are whole
            pl.concat_list("free", pl.lit(1000).repeat_by(pl.col("gpus") - pl.col("free").list.len())).alias("free")
        )
    )
    untouched = (
        groups.join(touched.group_by("hour", "gid").agg(pl.len().alias("k")), on=["hour", "gid"], how="left")
        .with_columns((pl.col("n") - pl.col("k").fill_null(0)).alias("n"))
        .filter(pl.col("n") > 0)
        .with_columns(pl.lit(1000).repeat_by(pl.col("gpus")).alias("free"))
    )
    cols = ("hour", "model", pl.col("cpu").alias("cpu_free_milli"), pl.col("free").alias("gpu_free_milli"))
    return pl.concat(
        [touched.select(*cols, pl.lit(1).alias("n")).cast(STATE), untouched.select(*cols, "n").cast(STATE)]
    ).sort("hour", "model")


def fragmentation_series(
    hourly: pl.LazyFrame | None,
    allocs: pl.DataFrame,
    jobs: pl.DataFrame,
    start: dt.datetime,
    end: dt.datetime,
    cluster: str = "default",
    nodes: pl.DataFrame | None = None,
    shapes: pl.DataFrame | None = None,
    parents: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per (hour, gpu_model) in [start, end): gpus, free_gpus, fragmented_gpus, frag_rate, stranded_*.

    hourly: gpu_hourly rows (the inventory from telemetry), or None with `nodes` (latest_nodes: the inventory of a
    cluster without telemetry; allocs then need a node column). shapes: pod_shapes rows, the workload M, else
    each model's jobs. Vectorised over hours, and the FGD metric runs once per distinct node state, not per node.
    """
    if nodes is None:
        state = telemetry_state(hourly, allocs, start, end, parents)
    else:
        state = nodes_state(nodes, allocs, start, end)
    if state.is_empty():
        return pl.DataFrame()
    free = pl.col("gpu_free_milli")
    if "gpu_partitions" not in state.columns:  # a node list says nothing of partitions: every GPU is whole
        state = state.with_columns(pl.lit(None, pl.String).repeat_by(free.list.len()).alias("gpu_partitions"))
    offered = pl.col("gpu_partitions")
    # A whole free GPU: a partitioned one offers none (gpuledger/partitions.py's rule 2), however free its milli.
    whole = free.list.eval(pl.element() == 1000).cast(pl.List(pl.Int64))
    whole = (whole * offered.list.eval(pl.element().is_null()).cast(pl.List(pl.Int64))).list.sum()
    state = state.with_columns(
        (
            pl.col("model")
            + "/"
            + pl.col("cpu_free_milli").cast(pl.String)
            + "/"
            + free.cast(pl.List(pl.String)).list.join(",")
            + "/"
            + offered.list.eval(pl.element().fill_null("*")).list.join(";")  # "*" a whole GPU, "" none free
        ).alias("key"),
        whole.cast(pl.Int64).alias("whole"),
    )
    distinct = state.unique("key", maintain_order=True).select(
        pl.col("key").alias("node"), "model", "cpu_free_milli", "gpu_free_milli", "gpu_partitions"
    )
    if shapes is not None and shapes.height:
        tt = task_types_of_shapes(shapes)
        parts = [(distinct, tt)]
    else:
        parts = [
            (d, task_types_of(jobs.filter(pl.col("gpu_model") == model)))
            for (model,), d in distinct.partition_by("model", as_dict=True).items()
        ]
    frags = [
        node_fragmentation(d, tt).select(pl.col("node").alias("key"), "frag_milli") for d, tt in parts if tt.height
    ]
    frag = pl.concat(frags) if frags else pl.DataFrame(schema={"key": pl.String, "frag_milli": pl.Float64})
    w, n = pl.col("whole"), pl.col("n")
    out = (
        state.join(frag, on="key", how="left")
        .group_by("hour", "model")
        .agg(
            (free.list.len() * n).sum().cast(pl.Int64).alias("gpus"),
            ((free.list.sum() * n).sum() / 1000).alias("free_gpus"),
            pl.when(pl.col("frag_milli").is_not_null().all())
            .then((pl.col("frag_milli") * n).sum() / 1000)
            .alias("fragmented_gpus"),
            *[
                pl.when(w < size).then(w * n).otherwise(0).sum().cast(pl.Int64).alias(f"stranded_{size}gpu")
                for size in SIZES
            ],
        )
        .with_columns(
            pl.when(pl.col("free_gpus") > 0).then(pl.col("fragmented_gpus") / pl.col("free_gpus")).alias("frag_rate"),
            pl.lit(cluster).alias("cluster"),
        )
        .select(
            pl.col("hour").alias("ts"),
            "cluster",
            pl.col("model").alias("gpu_model"),
            "gpus",
            "free_gpus",
            pl.col("fragmented_gpus").cast(pl.Float64),
            "frag_rate",
            *[f"stranded_{size}gpu" for size in SIZES],
        )
        .sort("ts", "gpu_model")
    )
    return out
