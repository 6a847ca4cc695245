"""Every lake table, defined once: columns, polars types, units, and how the table is partitioned.

`sql/<table>.sql` is generated from these (`python -m gpuledger.schema_sql --write`) for analysts.

Partitioning: `<table>/date=YYYY-MM-DD/part-<writer>-<seq>.parquet`. `date` is the UTC date of the table's
time column and lives only in the path, never inside the file, so the hive reader's value is the only one.
Everything else, `node` included, is inside the file: each writer (a node's collector, the simulator's node
task) names its files after itself, so writers never collide, and `gpuledger compact` merges a closed day's
files into one. The node is not in the path: `date=/node=` folders make a year of a 125-node fleet 45,625 files per
raw table, which DuckDB spends seconds opening before it answers (docs/design/5-finops.md); `compact` moves files
found in such folders into this layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import polars as pl

from gpuledger.classes import WORKLOAD_CLASSES

UTC_US = pl.Datetime("us", "UTC")
_CLASSES_DOC = ", ".join(WORKLOAD_CLASSES) + "; null in rows written before it"
PARTITION_COLUMNS = ("date",)
LABELS = pl.List(pl.Struct({"key": pl.String, "value": pl.String}))
GPU_HOURS_EXACT = pl.Decimal(18, 9)  # GPU-hours to the nano-GPU-hour: the FOCUS export's exact quantities


@dataclass(frozen=True)
class Column:
    name: str
    dtype: pl.DataType
    doc: str
    nullable: bool = True
    # Added after lakes were written: files from before lack it. Polars readers insert it as null already
    # (lake.scan_files, missing_columns="insert"); the SQL views add it as null too (schema_sql.render).
    late: bool = False


@dataclass(frozen=True)
class Table:
    name: str
    grain: str
    time_column: str
    columns: tuple[Column, ...]
    # Whether `gpuledger compact` merges a closed day's files. quota_events' file names are claims (a request's
    # decision is the file named after it, created if absent, so of two racing approvers one wins): a merge would
    # free the name.
    compact: bool = True
    # Class attributes, not fields: every table is partitioned the same way.
    path_columns = PARTITION_COLUMNS
    file_glob = "date=*/*.parquet"

    # Cached: the lake writer consults these for every partition it writes (thousands per analytics run).
    @cached_property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @cached_property
    def polars_schema(self) -> pl.Schema:
        """The schema of the rows as readers see them (partition columns included)."""
        return pl.Schema({c.name: c.dtype for c in self.columns})

    @cached_property
    def file_schema(self) -> pl.Schema:
        """The schema inside each Parquet file: everything but the partition columns."""
        return pl.Schema({c.name: c.dtype for c in self.columns if c.name not in self.path_columns})

    @cached_property
    def required(self) -> list[str]:
        return [c.name for c in self.columns if not c.nullable]


def _c(name: str, dtype: pl.DataType, doc: str, nullable: bool = True, late: bool = False) -> Column:
    return Column(name, dtype, doc, nullable, late)


_CLUSTER = _c("cluster", pl.String, "cluster name from config ('default' when unset)", False)
_NODE = _c("node", pl.String, "Kubernetes node / host name")
_DATE = _c("date", pl.Date, "UTC date of the time column (partition column)", False)

GPU_SAMPLES = Table(
    "gpu_samples",
    "one GPU (or MIG instance) per scrape",
    "ts",
    (
        _c("ts", UTC_US, "scrape time, UTC", False),
        _CLUSTER,
        _NODE,
        _c("gpu_uuid", pl.String, "GPU UUID (MIG instance UUID for a MIG row)", False),
        _c("gpu_index", pl.Int32, "NVML device index on the node"),
        _c("parent_gpu_uuid", pl.String, "physical device of a MIG instance or other partition (AMD CPX, vNPU)"),
        _c("mig_profile", pl.String, "partition profile: MIG 1g.10gb, AMD cpx.nps4, Ascend vnpu-2c; null if whole"),
        _c("model", pl.String, "product name, e.g. NVIDIA H100 80GB HBM3"),
        _c("pci_bus_id", pl.String, "PCI bus id, e.g. 00000000:53:00.0"),
        _c("driver_version", pl.String, "NVIDIA driver version"),
        _c(
            "util_gpu_pct",
            pl.Float32,
            "percent of time a kernel ran (NVML utilization.gpu / DCGM_FI_DEV_GPU_UTIL; "
            "a MIG instance: DCGM_FI_PROF_GR_ENGINE_ACTIVE x 100)",
        ),
        _c("util_mem_pct", pl.Float32, "percent of time device memory was read or written"),
        _c("sm_active_ratio", pl.Float32, "fraction of SM cycles with a warp resident (DCGM_FI_PROF_SM_ACTIVE)"),
        _c("tensor_active_ratio", pl.Float32, "fraction of cycles the tensor pipes were busy"),
        _c("mem_used_bytes", pl.Int64, "device memory used"),
        _c("mem_total_bytes", pl.Int64, "device memory total"),
        _c("mem_reserved_bytes", pl.Int64, "device memory reserved by the driver"),
        _c("power_w", pl.Float32, "board power draw (NVML reports mW)"),
        _c("power_limit_w", pl.Float32, "enforced power limit"),
        _c("energy_j", pl.Float64, "energy counter since driver load (NVML reports mJ)"),
        _c("temp_c", pl.Float32, "GPU temperature"),
        _c("sm_clock_mhz", pl.Int32, "SM clock"),
        _c("mem_clock_mhz", pl.Int32, "memory clock"),
        _c("throttle_reasons", pl.Int64, "NVML clocks event reasons bit mask"),
        _c("ecc_corrected_total", pl.Int64, "volatile corrected ECC errors"),
        _c("ecc_uncorrected_total", pl.Int64, "volatile uncorrected ECC errors"),
        _c("source", pl.String, "collector source: nvml, dcgm, amd, ascend, prometheus, sim", False),
        _c("pod", pl.String, "pod holding the GPU, when known"),
        _c("namespace", pl.String, "namespace of that pod"),
        _c("container", pl.String, "container of that pod"),
        _c("vendor", pl.String, "device vendor: nvidia, amd, huawei", late=True),
        _c(
            "partition_share",
            pl.Float64,
            "share of the parent device a partition row holds (MIG 1g = 1/7, AMD CPX on MI300X = 1/8, an Ascend "
            "vNPU its AI cores / the chip's); null for a whole device",
            late=True,
        ),
        _DATE,
    ),
)

GPU_PROCESSES = Table(
    "gpu_processes",
    "one process on one GPU per scrape",
    "ts",
    (
        _c("ts", UTC_US, "scrape time, UTC", False),
        _CLUSTER,
        _NODE,
        _c("gpu_uuid", pl.String, "GPU (or MIG instance) UUID", False),
        _c("pid", pl.Int64, "process id on the node", False),
        _c("process_name", pl.String, "executable name"),
        _c("used_mem_bytes", pl.Int64, "device memory used by the process"),
        _c("sm_util_pct", pl.Float32, "per-process SM utilization where supported"),
        _c("container", pl.String, "container id or name resolved from /proc/<pid>/cgroup"),
        _c("pod_uid", pl.String, "pod UID from /proc/<pid>/cgroup (joins jobs.job_id of source k8s)"),
        _c("pod", pl.String, "pod, when resolvable"),
        _c("namespace", pl.String, "namespace, when resolvable"),
        _c("source", pl.String, "collector source", False),
        _DATE,
    ),
)

# A job waits, runs, then ends in one of the final states. The order is the one a tie on updated_at resolves by (a
# job submitted and bound in the same instant is running): analytics/jobs.py `latest`.
JOB_OPEN_STATUSES = ("pending", "running")
JOB_FINAL_STATUSES = ("succeeded", "failed", "cancelled", "preempted")
JOB_STATUSES = JOB_OPEN_STATUSES + JOB_FINAL_STATUSES

JOBS = Table(
    "jobs",
    "one state of one workload (append-only; the `jobs` view keeps the latest per job_id)",
    "updated_at",
    (
        _c("updated_at", UTC_US, "when this state was observed, UTC", False),
        _CLUSTER,
        _c("job_id", pl.String, "stable workload id (pod UID, trace job id)", False),
        _c("tenant", pl.String, "tenant from config (namespace -> tenant)"),
        _c("namespace", pl.String, "Kubernetes namespace"),
        _c("pod", pl.String, "pod name"),
        _c("queue", pl.String, "scheduler queue (e.g. Kueue LocalQueue)"),
        _c("gpu_model", pl.String, "requested or granted GPU model"),
        _c("gpus", pl.Float64, "GPUs requested; fractional for shared GPUs (0.5 = half a GPU)"),
        _c(
            "gpu_sharing",
            pl.String,
            "exclusive, fraction, time-sliced, mig, partition (AMD, Ascend), unmapped (0 GPUs)",
        ),
        _c("mig_profile", pl.String, "requested partition profile (MIG 1g.10gb, AMD cpx.nps4, Ascend310P-2c), if any"),
        _c("submitted_at", UTC_US, "creation time, UTC"),
        _c("scheduled_at", UTC_US, "bound to a node, UTC"),
        _c("started_at", UTC_US, "first container started, UTC"),
        _c("finished_at", UTC_US, "ended, UTC"),
        _c("status", pl.String, ", ".join(JOB_STATUSES), False),
        _c("reason", pl.String, "why it ended or waits (OOMKilled, Evicted, Error, ...)"),
        _NODE,
        _c("gpu_uuids", pl.List(pl.String), "GPUs bound to it"),
        _c("owner_kind", pl.String, "top owner kind (Job, JobSet, RayJob, ...)"),
        _c("owner_name", pl.String, "top owner name"),
        _c("source", pl.String, "collector source (k8s, sim, import)", False),
        _c("workload_class", pl.String, _CLASSES_DOC, late=True),
        _DATE,
    ),
)

NODES = Table(
    "nodes",
    "one node as seen by one writer over one day (the `nodes` view keeps one row per node)",
    "last_seen",
    (
        _CLUSTER,
        _NODE,
        _c("gpu_model", pl.String, "GPU product name"),
        _c("gpu_count", pl.Int32, "physical GPUs"),
        _c("gpu_mem_bytes", pl.Int64, "memory of one GPU"),
        _c("labels", LABELS, "node labels as key/value pairs"),
        _c("first_seen", UTC_US, "first observation, UTC", False),
        _c("last_seen", UTC_US, "last observation, UTC", False),
        _c("source", pl.String, "collector source", False),
        _DATE,
    ),
)

POD_SHAPES = Table(
    "pod_shapes",
    "one pod shape (CPU, GPU share, GPUs, allowed models) of an imported workload and how many pods had it: the "
    "fragmentation metric's target workload M, CPU-only pods included",
    "last_seen",
    (
        _CLUSTER,
        _c("workload", pl.String, "the pod list it counts, e.g. alibaba-2023/default", False),
        _c("cpu_milli", pl.Int64, "CPU request, milli-cores", False),
        _c("gpu_milli", pl.Int64, "share of each GPU, milli-GPU (1000 = whole; 0 for a CPU-only pod)", False),
        _c("num_gpu", pl.Int64, "GPUs asked for (0 for a CPU-only pod)", False),
        _c("gpu_spec", pl.String, "allowed GPU models, '|'-separated; empty = any", False),
        _c("pods", pl.Int64, "pods of this shape in the workload", False),
        _c("first_seen", UTC_US, "start of the time the workload covers (the trace's origin), UTC", False),
        _c("last_seen", UTC_US, "end of the time the workload covers (the trace's last event), UTC", False),
        _c("source", pl.String, "collector source (import)", False),
        _DATE,
    ),
)

HEALTH_EVENTS = Table(
    "health_events",
    "one health event",
    "ts",
    (
        _c("ts", UTC_US, "when it happened or was seen, UTC", False),
        _CLUSTER,
        _NODE,
        _c("gpu_uuid", pl.String, "GPU concerned, null for a node-level event"),
        _c("kind", pl.String, "xid, ecc, lost, throttle, scrape_error, spool_corrupt, audit_unspooled", False),
        _c("code", pl.Int64, "Xid number or error code, when there is one"),
        _c("detail", pl.String, "human-readable detail"),
        _c("source", pl.String, "collector source", False),
        _DATE,
    ),
)

ADMISSION_DECISIONS = Table(
    "admission_decisions",
    "one admission webhook call",
    "ts",
    (
        _c("ts", UTC_US, "when the request was answered, UTC", False),
        _CLUSTER,
        _c("node", pl.String, "webhook replica that answered"),
        _c("uid", pl.String, "AdmissionReview request uid", False),
        _c("tenant", pl.String, "tenant resolved from the namespace"),
        _c("namespace", pl.String, "namespace of the object"),
        _c("kind", pl.String, "object kind (Pod, Job, ...)"),
        _c("name", pl.String, "object name"),
        _c("gpu_model", pl.String, "GPU model asked for"),
        _c("gpus", pl.Float64, "GPUs asked for"),
        _c("decision", pl.String, "allow, deny or warn", False),
        _c("policy", pl.String, "policy that decided"),
        _c("mode", pl.String, "enforce, warn or dry-run"),
        _c("reason", pl.String, "message returned to the user"),
        _c("policy_version", pl.String, "version of the decision table / policy"),
        _c("dry_run", pl.Boolean, "the request was a dryRun"),
        _c("latency_s", pl.Float64, "time to answer"),
        _c(
            "workload_class",
            pl.String,
            "the object's workload class (" + ", ".join(WORKLOAD_CLASSES) + "); null in rows written before it",
            late=True,
        ),
        _DATE,
    ),
)

RECLAIM_ACTIONS = Table(
    "reclaim_actions",
    "one warning or action of `gpuledger reclaim` on a job holding idle GPUs (append-only; a failed call is a row "
    "too, and is tried again at the next run)",
    "ts",
    (
        _c("ts", UTC_US, "when the call was made, UTC", False),
        _CLUSTER,
        _c("actor", pl.String, "who acted: the reclaimer's identity (GPULEDGER_ACTOR, else user@host)", False),
        _c("action", pl.String, "warn, deactivate (Kueue Workload), suspend (batch Job), delete (pod) or skip", False),
        _c("job_id", pl.String, "job id (the pod's UID)", False),
        _c("tenant", pl.String, "tenant of the job"),
        _c("namespace", pl.String, "Kubernetes namespace"),
        _c("pod", pl.String, "pod name"),
        _c("owner_kind", pl.String, "the object acted on when not the pod: Workload or Job"),
        _c("owner_name", pl.String, "its name"),
        _c("workload_class", pl.String, "the job's workload class (a job without one counts as other)"),
        _c("gpu_model", pl.String, "GPU model"),
        _c("gpus", pl.Float64, "GPUs (shares summed) the job holds"),
        _c("idle_since", UTC_US, "start of the unbroken run of fully idle windows, UTC"),
        _c("idle_s", pl.Float64, "seconds of fully idle windows in that run (the streak)"),
        _c("deadline", UTC_US, "warn: when the action may follow (ts + [reclaim] grace_s), UTC"),
        _c("reason", pl.String, "why: the rule that applied, or why nothing was done (skip)"),
        _c("api_call", pl.String, "the Kubernetes calls made, e.g. PATCH /apis/batch/v1/namespaces/a/jobs/b"),
        _c("result", pl.String, "ok, or the error (403 Forbidden, 404 gone, 409 Conflict, ...)", False),
        _c("gpu_hours_freed_per_day", pl.Float64, "GPU-hours a day the job holds and the action gives back"),
        _c("usd_per_day", pl.Float64, "those GPU-hours at the current rate card; null when the model is unpriced"),
        _DATE,
    ),
)

QUARANTINED_FILES = Table(
    "quarantined_files",
    "one lake file set aside: unreadable, failing its page checksums, or not of its table's schema",
    "ts",
    (
        _c("ts", UTC_US, "when it was set aside, UTC", False),
        _CLUSTER,
        _c("table_name", pl.String, "the table the file was in", False),
        _c("file", pl.String, "its key in the lake, relative to the lake's root", False),
        _c("set_aside_as", pl.String, "where it is now (under _quarantine/), to inspect or put back by hand", False),
        _c("reason", pl.String, "what is wrong with it", False),
        _c("size_bytes", pl.Int64, "its size"),
        _c("found_by", pl.String, "what found it: compact or analyze", False),
        _DATE,
    ),
)

GPU_FIELDS = Table(
    "gpu_fields",
    "one GPU field per scrape that has no column in gpu_samples (long format, so no metric is thrown away)",
    "ts",
    (
        _c("ts", UTC_US, "scrape time, UTC", False),
        _CLUSTER,
        _NODE,
        _c("gpu_uuid", pl.String, "GPU (or MIG instance) UUID", False),
        _c("field", pl.String, "source field name, e.g. DCGM_FI_DEV_PCIE_REPLAY_COUNTER", False),
        _c("value", pl.Float64, "value as the source reports it (unit in the field's documentation)"),
        _c("source", pl.String, "collector source", False),
        _DATE,
    ),
)

# A request's steps, written by `gpuledger quota request|approve|reject` (gpuledger/quota_requests.py). Partitioned by
# the request's time, not the step's: every step of a request lives in its day's folder, so its decision's file name
# (`part-<request_id>-decision.parquet`) is known before anyone writes it, and the first to create it wins.
QUOTA_EVENT_ACTIONS = ("request", "approve", "reject")

QUOTA_EVENTS = Table(
    "quota_events",
    "one step of one quota request: the request, then its approval or rejection (append-only, a file per step)",
    "requested_at",
    (
        _c("requested_at", UTC_US, "when the request was made, UTC (the same on every step of it)", False),
        _CLUSTER,
        _c("ts", UTC_US, "when this step was taken, UTC", False),
        _c("event_id", pl.String, "this step: <request_id>-request or <request_id>-decision", False),
        _c("request_id", pl.String, "the request it belongs to", False),
        _c("action", pl.String, ", ".join(QUOTA_EVENT_ACTIONS), False),
        # Not `by`: DuckDB's parser takes it for the keyword wherever it stands, and every query would quote it.
        _c("actor", pl.String, "who took the step: the requester (GPULEDGER_USER, else login) or decider", False),
        _c("tenant", pl.String, "the tenant whose quota it raises", False),
        _c("gpu_model", pl.String, "the GPU model, named as a quota key names it (H100: every model with that word)"),
        _c("gpus", pl.Float64, "GPUs added to the tenant's quota for that model while the grant is active", False),
        _c("valid_from", UTC_US, "the grant applies from this time, UTC", False),
        _c("valid_until", UTC_US, "to this time (exclusive), UTC", False),
        _c("reason", pl.String, "why: the requester's reason, or the approver's note"),
        _DATE,
    ),
    compact=False,
)

# Derived tables (written by analytics/, never by collectors).
GPU_HOURLY = Table(
    "gpu_hourly",
    "one GPU (or MIG instance) per UTC hour",
    "hour",
    (
        _c("hour", UTC_US, "start of the UTC hour", False),
        _CLUSTER,
        _NODE,
        _c("gpu_uuid", pl.String, "GPU (or MIG instance) UUID", False),
        _c("parent_gpu_uuid", pl.String, "physical GPU of a MIG instance, null otherwise"),
        _c("model", pl.String, "GPU product name"),
        _c("samples", pl.Int64, "samples in the hour", False),
        _c("allocated_ratio", pl.Float64, "fraction of samples with a pod on the GPU"),
        _c("busy_ratio", pl.Float64, "fraction of samples with util_gpu_pct > 0"),
        _c("util_gpu_pct_mean", pl.Float64, "mean utilization"),
        _c("sm_active_ratio_mean", pl.Float64, "mean SM activity (null where the source lacks it)"),
        _c("mem_used_bytes_max", pl.Int64, "peak memory used"),
        _c("power_w_mean", pl.Float64, "mean power draw"),
        _c("energy_wh", pl.Float64, "power_w_mean x hours covered by samples"),
        _c(
            "vendor",
            pl.String,
            "nvidia, amd or huawei: the samples' vendor, else the model's (gpuledger/vendors.py)",
            late=True,
        ),
        _c(
            "mig_profile",
            pl.String,
            "a partition row's profile as gpu_samples names it (MIG 1g.10gb, AMD cpx.nps4, Ascend vnpu-2c): the "
            "instance type the fragmentation inventory reads (gpuledger/partitions.py); null for a whole device",
            late=True,
        ),
        _DATE,
    ),
)

GPU_5MIN = Table(
    "gpu_5min",
    "one GPU (or MIG instance) per 5-minute bucket",
    "bucket_start",
    (_c("bucket_start", UTC_US, "start of the 5-minute bucket, UTC", False),)
    + tuple(
        _c("samples", pl.Int64, "samples in the bucket", False) if c.name == "samples" else c
        for c in GPU_HOURLY.columns
        if c.name != "hour"
    ),
)

JOB_HOURLY = Table(
    "job_hourly",
    "one job x UTC hour it held GPUs: allocated, busy and SM-active GPU-hours (sum them to any grouping)",
    "hour",
    (
        _c("hour", UTC_US, "start of the UTC hour", False),
        _CLUSTER,
        _NODE,
        _c("tenant", pl.String, "tenant"),
        _c("job_id", pl.String, "job id", False),
        _c("gpu_model", pl.String, "GPU model"),
        _c("allocated_gpu_hours", pl.Float64, "share x fraction of the hour held, summed over its GPUs"),
        _c("busy_gpu_hours", pl.Float64, "allocated x the GPU's duty cycle (mean util_gpu_pct / 100)"),
        _c("sm_active_gpu_hours", pl.Float64, "allocated x mean SM activity; null where not measured"),
        _c("mem_used_bytes_max", pl.Int64, "peak memory used on its GPUs"),
        _c("measured", pl.Boolean, "every GPU it held reported utilization that hour"),
        _c(
            "idle_gpu_hours",
            pl.Float64,
            "allocated GPU-hours wasted by the analytics.waste_* rule (idle in a long run)",
        ),
        _c("workload_class", pl.String, "the job's class: " + _CLASSES_DOC, late=True),
        _DATE,
    ),
)

JOB_5MIN = Table(
    "job_5min",
    "one job x 5-minute bucket it held GPUs: allocated, busy and SM-active GPU-hours",
    "bucket_start",
    (
        _c("bucket_start", UTC_US, "start of the 5-minute bucket, UTC", False),
        _CLUSTER,
        _NODE,
        _c("tenant", pl.String, "tenant"),
        _c("job_id", pl.String, "job id", False),
        _c("gpu_model", pl.String, "GPU model"),
        _c("allocated_gpu_hours", pl.Float64, "share x fraction of the bucket held, in GPU-hours"),
        _c("busy_gpu_hours", pl.Float64, "allocated x the GPU's duty cycle in the bucket"),
        _c("sm_active_gpu_hours", pl.Float64, "allocated x mean SM activity; null where not measured"),
        _DATE,
    ),
)

JOB_STATS = Table(
    "job_stats",
    "one job (its latest state) with its wait, run time and GPU-hours",
    "submitted_at",
    (
        _CLUSTER,
        _c("job_id", pl.String, "job id", False),
        _c("tenant", pl.String, "tenant"),
        _c("namespace", pl.String, "Kubernetes namespace"),
        _c("queue", pl.String, "scheduler queue"),
        _c("gpu_model", pl.String, "GPU model"),
        _c("gpus", pl.Float64, "GPUs requested (fractional for shares)"),
        _c(
            "gpu_sharing",
            pl.String,
            "exclusive, fraction, time-sliced, mig, partition (AMD, Ascend), unmapped (0 GPUs)",
        ),
        _c("status", pl.String, "latest status", False),
        _c("reason", pl.String, "why it ended or waits"),
        _NODE,
        _c("submitted_at", UTC_US, "creation time, UTC", False),
        _c("scheduled_at", UTC_US, "bound to a node, UTC"),
        _c("finished_at", UTC_US, "ended, UTC"),
        _c("size_bucket", pl.String, "<1, 1, 2, 3-4, 5-8, >8 GPUs"),
        _c("queue_s", pl.Float64, "scheduled_at - submitted_at (for a pending job: so far)"),
        _c("run_s", pl.Float64, "end - started_at (or scheduled_at); end = finished_at or the analysis time"),
        _c("held_s", pl.Float64, "end - scheduled_at: how long it held its GPUs"),
        _c("gpu_hours", pl.Float64, "gpus x held_s / 3600"),
        _c("expansion", pl.Float64, "(queue_s + run_s) / run_s"),
        _c("allocated_gpu_hours", pl.Float64, "GPU-hours held, from its allocations (shares x time)"),
        _c("busy_gpu_hours", pl.Float64, "of which a kernel ran (allocated x the GPU's duty cycle)"),
        _c("idle_gpu_hours", pl.Float64, "allocated but idle by the waste rule (analytics.waste_*)"),
        _c("efficiency", pl.Float64, "busy_gpu_hours / allocated_gpu_hours; null where not measured"),
        _c("cost_usd", pl.Float64, "its GPU time priced by the rate card (method analytics.cost_method)"),
        _c("workload_class", pl.String, "the job's class: " + _CLASSES_DOC, late=True),
        _DATE,
    ),
)

GPU_ALLOCATIONS = Table(
    "gpu_allocations",
    "one interval of one job holding one GPU (or a share of it)",
    "start",
    (
        _CLUSTER,
        _c("job_id", pl.String, "job id", False),
        _c("tenant", pl.String, "tenant"),
        _c("namespace", pl.String, "Kubernetes namespace"),
        _c("pod", pl.String, "pod name"),
        _NODE,
        _c("gpu_model", pl.String, "GPU model"),
        _c("gpu_uuid", pl.String, "GPU or MIG UUID; null when neither the job nor telemetry names it"),
        _c("share", pl.Float64, "share of that GPU held (1.0 whole, 0.5 half, 1/7 a 1g MIG slice)"),
        _c("start", UTC_US, "bound, UTC", False),
        _c("end", UTC_US, "released, UTC (the analysis time while still held)", False),
        _c("open", pl.Boolean, "still held at the analysis time"),
        _c("workload_class", pl.String, "the job's class: " + _CLASSES_DOC, late=True),
        _DATE,
    ),
)

COST_DAILY = Table(
    "cost_daily",
    "one tenant x GPU model x UTC day: GPU-hours and their cost; a null tenant is unshared idle capacity",
    "day_start",
    (
        _c("day_start", UTC_US, "start of the UTC day", False),
        _CLUSTER,
        _c("tenant", pl.String, "tenant; null for idle capacity nobody was charged for"),
        _c("gpu_model", pl.String, "GPU model"),
        _c("gpu_hours", pl.Float64, "GPU-hours charged (allocated, or max(allocated, used) with method max)"),
        _c("cost_usd", pl.Float64, "gpu_hours x the rate of that day; null when the model has no rate"),
        _c("idle_share_usd", pl.Float64, "idle capacity cost shared to this tenant (or the idle line itself)"),
        _c("energy_kwh", pl.Float64, "measured GPU energy, split by the shares held"),
        _c("energy_usd", pl.Float64, "energy_kwh x analytics.usd_per_kwh"),
        _c("method", pl.String, "request or max"),
        _DATE,
    ),
)

COST_ALLOCATION = Table(
    "cost_allocation",
    "one GPU x charge period x job holding it, plus the unallocated (idle) remainder of the GPU as a row with no job",
    "period_start",
    (
        _c("period_start", UTC_US, "charge period start: a UTC day, cut where the model's rate changes", False),
        _c("period_end", UTC_US, "charge period end (exclusive)", False),
        _CLUSTER,
        _c("gpu_uuid", pl.String, "the physical GPU (a MIG slice's parent); null when no GPU is known for the job"),
        _NODE,
        _c("gpu_model", pl.String, "GPU model"),
        _c("rate_model", pl.String, "the rate card entry that prices it; null when none matches"),
        _c("usd_per_gpu_hour", pl.Float64, "the rate in effect for the whole period; null when unpriced"),
        _c("origin_gpu_hours", pl.Float64, "the GPU's time in the period: hours reported + GPU-hours held unreported"),
        _c("gpu_hours", pl.Float64, "this row's GPU-hours (the job's charged time, or the idle remainder)"),
        _c("cost_usd", pl.Float64, "gpu_hours x usd_per_gpu_hour; null when unpriced"),
        _c(
            "charge_gpu_hours",
            GPU_HOURS_EXACT,
            "gpu_hours as an exact decimal; the idle row takes the rounding remainder, so a GPU's rows of a period "
            "sum exactly to origin_charge_gpu_hours",
        ),
        _c(
            "origin_charge_gpu_hours",
            GPU_HOURS_EXACT,
            "origin_gpu_hours as an exact decimal (at least the sum of the jobs'); null for a job on no known GPU",
        ),
        _c("job_id", pl.String, "job id; null for the idle remainder"),
        _c("tenant", pl.String, "tenant of the job"),
        _c("namespace", pl.String, "Kubernetes namespace"),
        _c("pod", pl.String, "pod name"),
        _c("slice_uuid", pl.String, "the MIG instance (or other sub-GPU id) the job held, when not the GPU itself"),
        _c("method", pl.String, "request or max (analytics.cost_method)"),
        _c(
            "vendor",
            pl.String,
            "nvidia, amd or huawei: the GPU model's (gpuledger/vendors.py); null if none",
            late=True,
        ),
        _DATE,
    ),
)

DECISIONS = Table(
    "decisions",
    "one tenant x GPU model (null = all models) at the last analysis: what the enforcer decides on",
    "computed_at",
    (
        _c("computed_at", UTC_US, "when the analytics computed it, UTC", False),
        _CLUSTER,
        _c("tenant", pl.String, "tenant", False),
        _c("gpu_model", pl.String, "GPU model; null for the tenant's all-models row"),
        _c("allocated_gpus", pl.Float64, "GPUs (shares) held now"),
        _c("quota_gpus", pl.Float64, "quota for this model (its own entry, else '*'); null = none"),
        _c("headroom_gpus", pl.Float64, "quota minus what the quota caps; null = no quota"),
        _c("budget_usd", pl.Float64, "monthly budget; null = none"),
        _c("spent_usd", pl.Float64, "cost plus idle share so far this month"),
        _c("budget_left_usd", pl.Float64, "budget_usd - spent_usd"),
        _c("budget_used_pct", pl.Float64, "100 x spent / budget"),
        _c("budget_gpu_h", pl.Float64, "monthly budget in GPU-hours; null = none"),
        _c("spent_gpu_h", pl.Float64, "GPU-hours charged so far this month (cost_daily.gpu_hours)"),
        _c("usage_decayed_gpu_h", pl.Float64, "GPU-hours decayed with the configured half-life"),
        _c("weight_share", pl.Float64, "tenant weight / all weights (S)"),
        _c("usage_share", pl.Float64, "tenant decayed usage / all decayed usage (U)"),
        _c("fairshare", pl.Float64, "2^(-U/S): 1 unused, 0.5 at its share, towards 0 above"),
        _c("idle_gpus_now", pl.Float64, "GPUs it holds that were idle through the last waste window"),
        _DATE,
    ),
)

IDLE_HOLDS = Table(
    "idle_holds",
    "one GPU (or share) an open job holds that is idle now: since when, at the last analysis",
    "computed_at",
    (
        _c("computed_at", UTC_US, "when the analytics computed it, UTC", False),
        _CLUSTER,
        _c("tenant", pl.String, "tenant of the job"),
        _c("gpu_model", pl.String, "GPU model"),
        _c("namespace", pl.String, "Kubernetes namespace"),
        _c("pod", pl.String, "pod name"),
        _c("job_id", pl.String, "job id", False),
        _NODE,
        _c("gpu_uuid", pl.String, "GPU or MIG UUID", False),
        _c("share", pl.Float64, "share of that GPU held (1.0 whole, 0.5 half, 1/7 a 1g MIG slice)"),
        _c("idle_since", UTC_US, "start of the unbroken run of idle hours up to the last complete hour, UTC", False),
        _c("idle_s", pl.Float64, "seconds idle from idle_since to the end of the last complete hour"),
        _c(
            "workload_class",
            pl.String,
            "the job's class (jobs.workload_class); null for a job of none, and in rows written before it",
            late=True,
        ),
        _DATE,
    ),
)

FRAGMENTATION = Table(
    "fragmentation",
    "one GPU model x UTC hour: free GPU capacity and how much of it the model's typical jobs cannot use",
    "ts",
    (
        _c("ts", UTC_US, "the hour (state at its start), UTC", False),
        _CLUSTER,
        _c("gpu_model", pl.String, "GPU model", False),
        _c("gpus", pl.Int64, "physical GPUs of the model that reported that hour (no telemetry: in the node list)"),
        _c("free_gpus", pl.Float64, "unallocated GPU capacity, in GPUs (shares summed)"),
        _c("fragmented_gpus", pl.Float64, "FGD fragmentation F(M) of that capacity for the model's workload, in GPUs"),
        _c("frag_rate", pl.Float64, "fragmented_gpus / free_gpus"),
        _c("stranded_1gpu", pl.Int64, "whole free GPUs no 1-GPU job can use (on a node with fewer free)"),
        _c("stranded_2gpu", pl.Int64, "whole free GPUs no 2-GPU job can use on one node"),
        _c("stranded_4gpu", pl.Int64, "whole free GPUs no 4-GPU job can use on one node"),
        _c("stranded_8gpu", pl.Int64, "whole free GPUs no 8-GPU job can use on one node"),
        _DATE,
    ),
)

QUEUE_DEPTH = Table(
    "queue_depth",
    "one GPU model x 5-minute tick with jobs waiting: how many jobs and GPUs were pending",
    "ts",
    (
        _c("ts", UTC_US, "the tick, UTC", False),
        _CLUSTER,
        _c("gpu_model", pl.String, "GPU model asked for"),
        _c("pending_jobs", pl.Int64, "jobs submitted and not yet bound at the tick"),
        _c("pending_gpus", pl.Float64, "GPUs those jobs ask for"),
        _DATE,
    ),
)

TENANTS = Table(
    "tenants",
    "one tenant as the config said at an analysis run (the `tenants` view keeps the latest run's)",
    "computed_at",
    (
        _c("computed_at", UTC_US, "the analysis run that recorded it, UTC", False),
        _CLUSTER,
        _c("tenant", pl.String, "tenant name", False),
        _c("namespaces", pl.List(pl.String), "its namespaces"),
        _c("weight", pl.Float64, "fair-share weight"),
        _c("budget_usd_per_month", pl.Float64, "monthly budget; null = none"),
        _c("budget_gpu_hours_per_month", pl.Float64, "monthly budget in GPU-hours charged; null = none"),
        _DATE,
    ),
)

FLEET_HOURLY = Table(
    "fleet_hourly",
    "one GPU model x UTC hour: GPUs in the fleet, held, busy, and the demand waiting for them",
    "hour",
    (
        _c("hour", UTC_US, "start of the UTC hour", False),
        _CLUSTER,
        _c("gpu_model", pl.String, "GPU model", False),
        _c("gpus", pl.Int64, "physical GPUs that reported in the hour (supply)", False),
        _c("allocated_gpus", pl.Float64, "GPUs held by a pod, averaged over the hour", False),
        _c("busy_gpus", pl.Float64, "GPUs with utilization > 0, averaged over the hour", False),
        _c("pending_gpus", pl.Float64, "GPUs waiting jobs ask for, mean over the hour's 5-minute ticks", False),
        _c("pending_gpus_max", pl.Float64, "the most GPUs waiting at one tick of the hour", False),
        _c("pending_jobs_max", pl.Int64, "the most jobs waiting at one tick of the hour", False),
        _c("demand_gpus", pl.Float64, "allocated_gpus + pending_gpus: what was asked for", False),
        _c("energy_kwh", pl.Float64, "energy of those GPUs in the hour", False),
        _c(
            "vendor",
            pl.String,
            "nvidia, amd or huawei (gpuledger/vendors.py); null for a model no rule names",
            late=True,
        ),
        _DATE,
    ),
)

DEMAND_FORECAST = Table(
    "demand_forecast",
    "one GPU model x UTC day: its demand (history), the backtest's prediction of it, the forecast ahead, or a "
    "candidate method's backtest score (analytics/forecast.py)",
    "day",
    (
        _c("day", UTC_US, "the UTC day (a candidate's row: the last day of history)", False),
        _CLUSTER,
        _c("gpu_model", pl.String, "GPU model", False),
        _c(
            "kind",
            pl.String,
            "history, backtest, forecast, candidate, or too_short (not enough history to forecast)",
            False,
        ),
        _c("demand_gpus", pl.Float64, "predicted mean GPUs asked for that day (backtest, forecast)"),
        _c("actual_gpus", pl.Float64, "measured mean GPUs asked for that day (history, backtest)"),
        _c("supply_gpus", pl.Float64, "mean GPUs the fleet had that day (history)"),
        _c("lo80_gpus", pl.Float64, "lower bound of the 80 % prediction interval (forecast)"),
        _c("hi80_gpus", pl.Float64, "upper bound of the 80 % prediction interval (forecast)"),
        _c("lo95_gpus", pl.Float64, "lower bound of the 95 % prediction interval (forecast)"),
        _c("hi95_gpus", pl.Float64, "upper bound of the 95 % prediction interval (forecast)"),
        _c("backtest_mase", pl.Float64, "the chosen method's mean absolute scaled error in the backtest, per model"),
        _c("backtest_wape_pct", pl.Float64, "the chosen method's weighted absolute percentage error, per model"),
        _c("backtest_mape_pct", pl.Float64, "the chosen method's mean absolute percentage error, per model"),
        _c("backtest_mae_gpus", pl.Float64, "the chosen method's mean absolute error, per model"),
        _c("baseline_mase", pl.Float64, "the seasonal naive baseline's MASE in the same backtest, per model"),
        _c("baseline_wape_pct", pl.Float64, "the seasonal naive baseline's WAPE, per model"),
        _c("baseline_mape_pct", pl.Float64, "the seasonal naive baseline's MAPE, per model"),
        _c("exceeds_supply_day", UTC_US, "first forecast day whose demand exceeds the last day's supply, per model"),
        _c("exceeds_supply_earliest_day", UTC_US, "first day the 80 % interval's upper bound exceeds it"),
        _c("exceeds_supply_latest_day", UTC_US, "first day the 80 % interval's lower bound exceeds it"),
        _c("candidate", pl.String, "a candidate method (candidate rows)"),
        _c("candidate_mase", pl.Float64, "its MASE in the backtest (candidate rows)"),
        _c("candidate_wape_pct", pl.Float64, "its WAPE in the backtest (candidate rows)"),
        _c("candidate_mape_pct", pl.Float64, "its MAPE in the backtest (candidate rows)"),
        _c("history_days", pl.Int64, "days of history the model was fitted on"),
        _c("method", pl.String, "the forecasting method the backtest chose, per model"),
        _c("computed_at", UTC_US, "when the analytics computed it", False),
        _DATE,
    ),
)

RAW_TABLES = (
    GPU_SAMPLES,
    GPU_PROCESSES,
    GPU_FIELDS,
    JOBS,
    NODES,
    POD_SHAPES,
    HEALTH_EVENTS,
    ADMISSION_DECISIONS,
    QUARANTINED_FILES,
    RECLAIM_ACTIONS,
    QUOTA_EVENTS,
)
DERIVED_TABLES = (
    GPU_HOURLY,
    FLEET_HOURLY,
    DEMAND_FORECAST,
    GPU_5MIN,
    JOB_HOURLY,
    JOB_5MIN,
    JOB_STATS,
    GPU_ALLOCATIONS,
    COST_DAILY,
    COST_ALLOCATION,
    DECISIONS,
    IDLE_HOLDS,
    FRAGMENTATION,
    QUEUE_DEPTH,
    TENANTS,
)
TABLES: dict[str, Table] = {t.name: t for t in (*RAW_TABLES, *DERIVED_TABLES)}


def table(name: str) -> Table:
    try:
        return TABLES[name]
    except KeyError:
        from gpuledger.errors import LakeError

        raise LakeError(f"unknown table {name!r}; tables are: {', '.join(TABLES)}") from None


def empty_frame(name: str) -> pl.DataFrame:
    return pl.DataFrame(schema=table(name).polars_schema)
