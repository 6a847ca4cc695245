"""Config: each key declared once -> tomllib -> validate once, collecting every problem with its key -> a frozen object.

A key is a field of a frozen dataclass: one class per TOML table ([collector], [enforcer], ...) and one per row of
[[tenants]], [[rates]] and [[classes]]. Its type is the annotation; `key(...)` puts its default in the field and its
bounds (gt/ge/lt/le), choices, item check (a URL, a label key, a registered source...), unit and one-line doc in the
field's metadata (gpuledger/config_keys.py). One generic walker, `config_keys.Walker`, reads the declarations to
check and convert each table; the enforcer's settings hold the EnforcerConfig itself (enforcer/decide.py); the
README's table is generated from them (`python -m gpuledger.config_doc --write`) and a test fails when it differs.
A new key is one declaration plus that regenerated table. Rules that tie keys together (platform_tenant, auth_user
with auth_password_env, a source listed twice, no source or no model, tenants' namespaces, duplicate rates) are
explicit checks after the walk.

Why field metadata and one walker rather than pydantic v2 or msgspec: the errors stay exactly ours, `file: key:
problem` with every problem at once and our paths (`tenants[0] (vision).quota.H100`); msgspec stops at the first
error, and pydantic collects them but in its own wording and locations, each of which we would translate back.
The objects the rest of the code builds and reads (`Tenant(...)`, `CollectorConfig(node=...)`) stay plain frozen
dataclasses, and there is no new dependency.

No other module reads the environment or config files: the CLI calls `load()` once and hands the result down.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import ipaddress
import os
import re
import socket
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from gpuledger.classes import WORKLOAD_CLASSES
from gpuledger.config_keys import Check, Walker, allowed, declared, key, must, section, sections, toml_key
from gpuledger.errors import ConfigError
from gpuledger.partitions import parse_instance, parse_layout
from gpuledger.store import Store, is_url
from gpuledger.store import problem as store_location_problem
from gpuledger.vendors import VENDORS, Resource

# Sources register a factory under a name in this entry-point group, the built-ins too (pyproject.toml), so a
# third-party package adds one with no edit here. The core reads the names only; collector/sources.py loads them.
SOURCE_GROUP = "gpuledger.sources"
SIM_MODELS = ("H100", "H200", "A100", "L40S", "L4", "T4", "MI300X", "Ascend910B")  # collector/sim/catalog.py
# The simulated models' names (collector/sim/catalog.py GpuSpec.name; a test keeps the two equal): a layout is
# checked against the model's vendor figures (MIG memory class, AMD XCDs, Ascend AI cores), which its name says.
SIM_MODEL_NAMES = {
    "H100": "NVIDIA H100 80GB HBM3",
    "H200": "NVIDIA H200",
    "A100": "NVIDIA A100-SXM4-80GB",
    "L40S": "NVIDIA L40S",
    "L4": "NVIDIA L4",
    "T4": "Tesla T4",
    "MI300X": "AMD Instinct MI300X OAM",
    "Ascend910B": "910B3-Ascend-V1",
}
# How each simulated model partitions (gpuledger/partitions.py families); the L40S, L4 and T4 have no MIG.
SIM_PARTITIONING = {"H100": "mig", "H200": "mig", "A100": "mig", "MI300X": "amd", "Ascend910B": "vnpu"}
_FAMILY_WORDS = {"mig": "MIG profiles", "amd": "AMD compute modes", "vnpu": "Ascend vNPUs"}
ENFORCER_MODES = ("enforce", "warn", "dry-run")
# A namespace's tenant when the config's [[tenants]] namespaces do not name it (collector and enforcer alike).
TENANT_LABEL = "gpuledger.io/tenant"


def source_names() -> tuple[str, ...]:
    """The registered source names, sorted (read from installed metadata, ~13 ms: call it when needed)."""
    return tuple(sorted(entry_points(group=SOURCE_GROUP).names))


# --- item checks ---------------------------------------------------------------------------------------------


_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _label_key(v: str) -> bool:
    """A Kubernetes label key: [DNS-subdomain prefix (<= 253) "/"] name (<= 63, alphanumerics, '-', '_', '.')."""
    prefix, slash, name = v.rpartition("/")
    ok_prefix = not slash or (
        0 < len(prefix) <= 253
        and _DNS_SUBDOMAIN.fullmatch(prefix) is not None
        and all(len(part) <= 63 for part in prefix.split("."))
    )
    return ok_prefix and _LABEL_NAME.fullmatch(name) is not None


def _url(v: str) -> bool:
    return v.startswith(("http://", "https://"))


def _source(v: str) -> str | None:
    registered = source_names()
    return None if v in registered else f"unknown source {v!r} (registered: {', '.join(registered)})"


NOT_EMPTY = Check("not empty", must(lambda v: v.strip() != "", "must not be empty"))


def _network(v: str) -> str | None:
    try:
        ipaddress.ip_network(v.strip(), strict=False)
    except ValueError:
        return f"expected an IP address or CIDR range (10.0.0.0/8, ::1), got {v!r}"
    return None


NETWORK = Check("an IP address or CIDR range", _network)
# An HTTP field name (RFC 9110 section 5.1: a token)
HEADER = Check(
    "an HTTP header name",
    must(lambda v: re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", v) is not None, "expected an HTTP header name"),
)
URL = Check("an http(s) URL", lambda v: None if _url(v) else f"expected an http(s) URL, got {v!r}")
URL_OR_EMPTY = Check("an http(s) URL or empty", lambda v: None if v == "" or _url(v) else URL.problem(v))
LABEL_KEY = Check(
    "a Kubernetes label key or empty",
    must(lambda v: v == "" or _label_key(v), "must be a Kubernetes label key (prefix/name) or empty"),
)
SOURCE = Check("a registered source name", _source)
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
SERVICE = Check(
    "namespace/name of a Service, or empty",
    must(
        lambda v: v == "" or (v.count("/") == 1 and all(_DNS_LABEL.fullmatch(part) for part in v.split("/"))),
        "must be namespace/name of a Service (each a DNS label), or empty",
    ),
)
SIM_MODEL = Check(
    f"from {', '.join(SIM_MODELS)}",
    lambda v: None if v in SIM_MODELS else f"unknown simulated model {v!r} (known: {', '.join(SIM_MODELS)})",
)
# --- the keys ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tenant:
    name: str = key(doc="the tenant's name", check=NOT_EMPTY)
    namespaces: tuple[str, ...] = key((), "its namespaces; a namespace belongs to one tenant only", check=NOT_EMPTY)
    weight: float = key(1.0, "fair-share weight", gt=0)
    # GPU model -> max concurrent GPUs; "*" = any model
    quota: dict[str, int | float] = key(
        factory=dict, doc='max concurrent GPUs per GPU model (named as for rates); "*" = any model', unit="GPUs", ge=0
    )
    budget_usd_per_month: float | None = key(
        None,
        "monthly budget in dollars charged",
        unit="USD",
        gt=0,
        why="must be > 0 (leave it out for no budget)",
        toml="budget.usd_per_month",
        shown="none",
    )
    # GPU-hours charged (cost_daily.gpu_hours) per calendar month
    budget_gpu_hours_per_month: float | None = key(
        None,
        "monthly budget in GPU-hours charged; either budget, or both, may be set",
        unit="GPU-h",
        gt=0,
        why="must be > 0 (leave it out for no budget)",
        toml="budget.gpu_hours_per_month",
        shown="none",
    )


@dataclass(frozen=True)
class Rate:
    gpu_model: str = key(doc="the NVML name, or words of it (`H100` prices NVIDIA H100 80GB HBM3)", check=NOT_EMPTY)
    usd_per_gpu_hour: float = key(doc="price of one GPU-hour", unit="USD", ge=0)
    # UTC; a TOML date means its midnight UTC, a TOML offset datetime that instant
    effective_from: dt.datetime = key(doc="the price holds from this date (midnight UTC) or instant on")

    def __post_init__(self) -> None:
        if not isinstance(self.effective_from, dt.datetime):  # a date: its midnight, UTC
            object.__setattr__(
                self, "effective_from", dt.datetime.combine(self.effective_from, dt.time(), dt.timezone.utc)
            )


@dataclass(frozen=True)
class ClassRule:
    """One [[classes]] row: pods it selects get its class (docs/workload-classes.md). The first row that selects a
    pod wins; a pod's own `gpuledger.io/class` label outranks every row."""

    # `class` in TOML; a Python keyword, hence the field's name
    workload_class: str = key(doc="the class its pods get", choices=WORKLOAD_CLASSES, toml="class")
    namespaces: tuple[str, ...] = key((), "it selects pods in these namespaces (any of them)", check=NOT_EMPTY)
    labels: dict[str, str] = key(
        factory=dict, doc="it selects pods carrying all these labels with these values", check=NOT_EMPTY
    )

    def selects(self, namespace: str | None, labels: Mapping[str, str]) -> bool:
        """Whether a pod in `namespace` with `labels` is this rule's: every selector given must hold."""
        if self.namespaces and namespace not in self.namespaces:
            return False
        return all(labels.get(k) == v for k, v in self.labels.items())


@dataclass(frozen=True)
class AcceleratorResource:
    """One [[accelerators]] row: an extended resource name the device plugins' built-in names (gpuledger/vendors.py)
    do not cover, or cover wrongly for this fleet, read as a GPU ask (docs/accelerators.md)."""

    resource: str = key(doc="the extended resource name, e.g. `huawei.com/Ascend910-10c`", check=NOT_EMPTY)
    vendor: str = key(doc="who makes the device", choices=VENDORS)
    share: float = key(1.0, "the share of one physical device a unit holds (1: a whole device)", gt=0, le=1)
    gpu_model: str = key("", "the model a unit is, named as for rates (empty: the node's)", shown="none")
    profile: str = key("", "the partition template it is, as jobs.mig_profile shows (empty: a whole device)")

    def read(self) -> Resource:
        return Resource(self.vendor, self.share, self.profile or None, self.gpu_model or None)


@dataclass(frozen=True)
class ClassPolicy:
    """What the policies allow one workload class ([class_policy.<class>]; docs/workload-classes.md). A table sets
    only the keys it names: the others keep that class's built-in defaults (DEFAULT_CLASS_POLICIES)."""

    idle_below_pct: float = key(
        1.0,
        "a window whose GPU utilization is below this is idle (1: fully idle, NVML's integer percent reads 0)",
        unit="%",
        gt=0,
        le=100,
    )
    idle_after_h: float = key(
        2.0,
        "consecutive idle windows adding up to this make an idle hold (any activity starts the count again)",
        unit="h",
        gt=0,
        shown="notebook 1, others 2",
    )
    reclaim: bool = key(
        True,
        "`gpuledger reclaim` may act on its idle holds (warn, then suspend, deactivate or delete)",
        shown="inference and other: false",
    )
    priority_class: str = key(
        "",
        "the PriorityClass the webhook's /mutate sets on its workloads, before the fair-share tiers",
        check=NOT_EMPTY,
        shown="none (fair share decides)",
    )
    may_exceed_quota: bool = key(
        False, "its workloads are admitted over the tenant's quota, with a warning (quota is still counted)"
    )


LAKE = Check(
    "a directory or s3://bucket/prefix",
    lambda v: NOT_EMPTY.problem(v) or store_location_problem(v),
)
LOCAL = Check(
    "a local directory",
    must(lambda v: not is_url(v), "must be a local directory (the spool is on this machine's disk)"),
)


@dataclass(frozen=True)
class LakeConfig:
    # a Path, or the text s3://bucket/prefix (gpuledger.store.open_store reads either)
    path: Path = key(
        Path("gpuledger-data"),
        "lake directory (relative to the config file) or s3://bucket/prefix",
        check=LAKE,
        relative_to_file=True,
    )


@dataclass(frozen=True)
class CollectorConfig:
    # Floors: a round costs ~0.66 ms of CPU (docs/scale.md), so 0.01 s holds a collector under 7 % of a core; at
    # 0.001 s it spun a core and wrote 868 files in 15 s. Each flush writes a file per table and day.
    interval_s: float = key(10.0, "seconds between scrapes", unit="s", ge=0.01, why="must be at least 0.01 (the floor)")
    flush_interval_s: float = key(
        30.0, "seconds between spool -> Parquet flushes", unit="s", ge=0.1, why="must be at least 0.1 (the floor)"
    )
    process_interval_s: float = key(
        60.0,
        "seconds between per-process (attribution) samples",
        unit="s",
        ge=0.01,
        why="must be at least 0.01 (the floor)",
    )
    sources: tuple[str, ...] = key(("sim",), "sources this node collects from", check=SOURCE)
    # GPULEDGER_NODE: a DaemonSet's pod names its node through the downward API (spec.nodeName); its host name is
    # the pod's.
    node: str = key("", "this collector's id (lake file names, spool folder)", shown="host name", env="GPULEDGER_NODE")
    spool_dir: Path | None = key(
        None,
        "where the write-ahead log lives; on local disk for an s3:// lake too",
        shown="outside the lake: `$XDG_STATE_HOME` (else `~/.local/state`)`/gpuledger/spool/local/<lake path>/<node>`; "
        "for an s3:// lake `.../spool/s3/<bucket>/<prefix>/<node>`",
        check=LOCAL,
    )
    dcgm_urls: tuple[str, ...] = key((), "dcgm-exporter /metrics pages for source dcgm (`--url` overrides)", check=URL)
    dcgm_service: str = key(
        "",
        "or a dcgm-exporter Service: source dcgm scrapes its ready endpoints, listed again every 30 s",
        check=SERVICE,
        shown="none",
    )
    dcgm_port: str = key("", "the port of dcgm_service's endpoints to scrape, by name", shown="its only port")
    dcgm_workers: int = key(
        0,
        "processes a round of source dcgm is split across (a core each); 0: one per 3,000 exporters, at most the cores",
        ge=0,
        why="must be 0 (one per 3,000 exporters) or a number of processes",
    )
    amd_urls: tuple[str, ...] = key(
        (), "AMD device-metrics-exporter /metrics pages for source amd (`--url` overrides)", check=URL
    )
    ascend_urls: tuple[str, ...] = key(
        (), "Huawei Ascend npu-exporter /metrics pages for source ascend (`--url` overrides)", check=URL
    )
    prometheus_url: str = key(
        "",
        "Prometheus server holding DCGM, AMD or Ascend exporter series, for source prometheus (`--url` overrides)",
        check=URL_OR_EMPTY,
    )
    metrics_port: int = key(
        0,
        "serve the collector's own /metrics here (scrape time, errors, rows, spool depth and age); 0 = off",
        ge=0,
        le=65535,
        why="must be a TCP port (0 = off)",
    )

    @property
    def writer(self) -> str:
        return self.node or socket.gethostname().split(".")[0]


@dataclass(frozen=True)
class SimConfig:
    nodes: int = key(12, "simulated nodes", ge=1, le=100_000)
    gpus_per_node: int = key(8, "GPUs per simulated node", ge=1, le=16)
    models: tuple[str, ...] = key(("H100", "A100", "L40S"), "GPU models of the simulated fleet", check=SIM_MODEL)
    seed: int = key(42, "random seed of the simulation", ge=0, le=2**32 - 1)
    backfill_days: float = key(
        7.0, "recent days `up` backfills into an empty lake, every backfill_step_s", unit="d", ge=0
    )
    backfill_step_s: float = key(30.0, "sample step of the recent days (as the live collector samples)", unit="s", ge=1)
    # Older history before it, coarser: 28 days give the demand forecast its four weeks (MIN_DAYS) for ~80 %
    # more samples than the 7 fine days alone (576 a GPU-day at 150 s against 2,880 at 30 s). 150 s, not 300:
    # two samples in every 5-minute bucket, which is what gpu_5min needs to measure the time (and energy) covered.
    history_days: float = key(
        28.0, "days of coarser history before them (the demand forecast needs 28)", unit="d", ge=0, le=3650
    )
    history_step_s: float = key(
        150.0,
        "sample step of the history: two a 5-minute bucket, so gpu_5min measures time and energy",
        unit="s",
        ge=1,
        le=86400,
    )
    load: float = key(
        0.5, "offered load: GPU-hours jobs hold (start-up included) over the fleet's GPU-hours, over a week", gt=0, le=2
    )  # collector/sim/workload.py; see README on 0.7
    # collector/sim/partitioned.py: a share of each named model's nodes run every GPU in this layout, and a share of
    # that model's small jobs ask its instances (docs/workload-classes.md, "Partitioned nodes").
    partitions: dict[str, str] = key(
        factory=dict,
        doc='model -> the layout its partitioned nodes run ({H100 = "all-balanced", MI300X = "cpx", Ascend910B = '
        '"vnpu-5c*4"}; partitions.parse_layout)',
        shown="none",
    )
    partitioned_node_share: float = key(
        0.1,
        "share of each model in `partitions` whose nodes are partitioned (at least one node; small jobs fill ~8 %)",
        gt=0,
        le=1,
    )


def sim_partition_problem(model: str, layout: str) -> str | None:
    """What is wrong with `layout` for simulated model `model`, or None: a model the simulator fields, one that
    partitions, and a layout of its vendor's kind that its device can hold (partitions.parse_layout)."""
    if model not in SIM_MODEL_NAMES:
        return f"unknown simulated model {model!r} (known: {', '.join(SIM_MODELS)})"
    family = SIM_PARTITIONING.get(model)
    if family is None:
        takes = ", ".join(m for m in SIM_MODELS if m in SIM_PARTITIONING)
        return f"{model} has no partitions (the simulator partitions {takes})"
    try:
        types = parse_layout(layout, SIM_MODEL_NAMES[model])
    except ValueError as e:
        return str(e)
    got = parse_instance(types[0]).family
    if got != family:
        return f"{layout!r} is a layout of {_FAMILY_WORDS[got]}; {model} takes {_FAMILY_WORDS[family]}"
    return None


@dataclass(frozen=True)
class AnalyticsConfig:
    cost_method: str = key(
        "request", "request: allocated time; max: max(allocated, used) as in OpenCost", choices=("request", "max")
    )
    idle_policy: str = key(
        "proportional",
        "who carries idle capacity's cost: nobody, tenants in proportion to their cost, or platform_tenant",
        choices=("none", "proportional", "platform"),
    )
    platform_tenant: str = key("", 'the tenant carrying idle cost with idle_policy = "platform"', shown="none")
    usd_per_kwh: float = key(0.0, "energy price; 0 = no energy cost line", unit="USD/kWh", ge=0)
    waste_threshold_pct: float = key(
        5.0, "an allocated GPU-hour below this mean utilization is idle...", unit="%", ge=0, le=100
    )
    waste_window_h: int = key(1, "...and is waste inside a run of at least this many idle hours", unit="h", gt=0)
    fairshare_half_life_h: float = key(
        168.0, "decay of past usage in the fair-share factor (Slurm's PriorityDecayHalfLife: 7 days)", unit="h", gt=0
    )
    # A node's clock a few minutes ahead is skew; samples further ahead are set aside with a warning, not charged.
    max_clock_skew_s: float = key(
        300.0, "samples timed further ahead of a run's end than this are set aside with a warning", unit="s", ge=0
    )
    # Dask: the workers need the lake at the same path (a shared filesystem) and gpuledger[dask] installed.
    scheduler: str = key(
        "", "a Dask scheduler (tcp://HOST:8786) whose workers run the pass over raw samples", shown="none: in-process"
    )
    # An object-store lake has no flock: one run at a time holds a lease object, renewed every third of this.
    lease_s: float = key(
        120.0,
        "on an s3:// lake, how long a run's lease lasts unrenewed (a killed run blocks the next this long)",
        unit="s",
        ge=1,
    )


@dataclass(frozen=True)
class FinopsConfig:
    provider_name: str = key(
        "gpuledger", "FOCUS ServiceProviderName and InvoiceIssuerName: who runs the GPU service", check=NOT_EMPTY
    )
    host_provider_name: str = key(
        "", "FOCUS HostProviderName: who hosts the GPUs (a cloud, or your own)", shown="the provider_name"
    )


@dataclass(frozen=True)
class DashboardConfig:
    host: str = key(
        "127.0.0.1", "where `gpuledger dashboard` (and `up`) listen; 0.0.0.0 serves other machines", check=NOT_EMPTY
    )
    port: int = key(8050, "its port", ge=1, le=65535, why="must be a TCP port (1-65535)")
    auth_user: str = key(
        "", "HTTP basic auth on every page and callback when set (with auth_password_env)", shown="off"
    )
    auth_password_env: str = key(
        "", "name of the environment variable holding the password (never the password)", shown="off"
    )
    trusted_proxies: tuple[str, ...] = key(
        (),
        "addresses or CIDR ranges of the sign-in proxy (oauth2-proxy and similar) whose user and group headers are "
        "believed; the same headers from any other address are ignored and logged. Empty: no proxy sign-in",
        check=NETWORK,
        shown="none",
    )
    user_header: str = key("X-Forwarded-User", "the trusted proxy's header naming the signed-in user", check=HEADER)
    groups_header: str = key(
        "X-Forwarded-Groups", "the trusted proxy's header listing the user's groups, comma-separated", check=HEADER
    )
    groups_separator: str = key(
        ",", "what separates groups in that header (oauth2-proxy: a comma; authentik: |)", check=NOT_EMPTY
    )
    admin_groups: tuple[str, ...] = key((), "groups whose members see every tenant", check=NOT_EMPTY, shown="none")
    tenant_groups: dict[str, tuple[str, ...]] = key(
        factory=dict,
        doc='group -> the tenants its members see ([dashboard.tenant_groups] "team-vision" = ["vision"]); a user '
        "in no mapped group sees no tenant",
        check=NOT_EMPTY,
        shown="none",
    )
    refresh_s: float = key(
        300.0,
        "how often an open page redraws itself from the latest analytics (0: never); a page with controls of its "
        "own (capacity, with the what-if) is redrawn only when asked",
        unit="s",
        ge=0,
    )


@dataclass(frozen=True)
class ExporterConfig:
    host: str = key(
        "127.0.0.1",
        "where `gpuledger exporter` (and `up`) serve /metrics; 0.0.0.0 lets a Prometheus on another machine scrape",
        check=NOT_EMPTY,
    )
    port: int = key(9108, "its port", ge=1, le=65535, why="must be a TCP port (1-65535)")
    # A check is a stat of the state folder (an S3 HEAD): cheap; a rebuild reads the analytics' tables (seconds on a
    # year of 1,000 GPUs, benchmarks/exporter.py), and happens only when they committed since.
    refresh_s: float = key(
        30.0,
        "how often it checks whether the analytics committed, and if so rebuilds its figures (never per scrape)",
        unit="s",
        ge=1,
        why="must be at least 1 (the floor: each check asks the lake)",
    )


_MODE = "what a breach of the {} policy does: deny (enforce), admit with a warning (warn) or only record it (dry-run)"


@dataclass(frozen=True)
class EnforcerConfig:
    quota_mode: str = key("enforce", _MODE.format("quota"), choices=ENFORCER_MODES)
    budget_mode: str = key("warn", _MODE.format("budget"), choices=ENFORCER_MODES)
    idle_hog_mode: str = key("warn", _MODE.format("idle-hog"), choices=ENFORCER_MODES)
    fair_share_mode: str = key(
        "enforce",
        "fair share and class priority: /mutate sets the priority class (enforce), says it (warn) or only records it "
        "(dry-run)",
        choices=ENFORCER_MODES,
    )
    budget_warn_pct: float = key(
        80.0, "warn when a tenant has spent this share of a monthly budget", unit="%", gt=0, le=100
    )
    idle_max_gpus: float = key(4.0, "a tenant holding more allocated-but-idle GPUs than this...", unit="GPUs", ge=0)
    idle_min_h: float = key(
        2.0,
        "...each idle for at least this long, is gated (idle-hog); for a job of no known class: a class's own time is "
        "its class_policy idle_after_h",
        unit="h",
        ge=0,
    )
    tenant_label: str = key(
        TENANT_LABEL,
        "a namespace's tenant when no tenants[].namespaces names it (watched); empty = the config's map only",
        check=LABEL_KEY,
    )
    failure_mode: str = key(
        "allow",
        "what a missing or stale decision table does: allow (with a warning) or deny",
        choices=("allow", "deny"),
    )
    max_table_age_s: float = key(900.0, "a decision table older than this is stale", unit="s", gt=0)
    refresh_s: float = key(
        60.0,
        "how often the decision table is reloaded from the lake",
        unit="s",
        ge=1,
        why="must be at least 1 (the floor: each reload reads the lake)",
    )
    burst_window_s: float = key(
        30.0, "admissions this long ago or less count against quotas on top of the table", unit="s", ge=0
    )
    policy_version: str = key("v1", "the version recorded with each decision")


@dataclass(frozen=True)
class ReclaimConfig:
    """`gpuledger reclaim` and its run under `up` (docs/reclaim.md): which idle GPUs it takes back, and when."""

    mode: str = key(
        "report",
        "under `up`: report (a dry run each interval, logged; no API call) or apply (warn, then act)",
        choices=("report", "apply"),
    )
    interval_s: float = key(300.0, "how often `up` runs it", unit="s", ge=30, why="must be at least 30 (a window)")
    window_s: float = key(
        30.0,
        "idle time counts in whole windows of this length, each fully idle or not (Run:ai's 30 s)",
        unit="s",
        gt=0,
        le=3600,
    )
    max_gap_s: float = key(
        120.0,
        "samples further apart than this leave the time between them unobserved, which ends an idle run",
        unit="s",
        gt=0,
    )
    grace_s: float = key(
        1800.0, "from the warning (an Event and a deadline annotation on the pod) to the action", unit="s", ge=0
    )
    exempt_tenants: tuple[str, ...] = key((), "tenants it never acts on (reported as skipped)", check=NOT_EMPTY)


@dataclass(frozen=True)
class Config:
    cluster: str = key("default", "cluster name written into every row", check=NOT_EMPTY)
    lake: LakeConfig = section(LakeConfig, "where the lake is")
    collector: CollectorConfig = section(CollectorConfig, "what each node's collector scrapes")
    simulator: SimConfig = section(SimConfig, 'the simulated fleet (source "sim"; what `up` backfills)')
    analytics: AnalyticsConfig = section(
        AnalyticsConfig, "how cost, idle share-back, waste and fair share are computed"
    )
    finops: FinopsConfig = section(FinopsConfig, "the provider names in the FOCUS export")
    tenants: tuple[Tenant, ...] = field(
        default=(),
        metadata={
            "rows": "who owns which namespaces, their share, quota and monthly budgets",
            "shown": "five simulated tenants",
        },
    )
    rates: tuple[Rate, ...] = field(
        default=(),
        metadata={
            "rows": "the rate card: price per GPU-hour per model from a date on",
            "shown": "list prices per model",
        },
    )
    classes: tuple[ClassRule, ...] = field(
        default=(),
        metadata={
            "rows": "workload class rules: pods a namespace or label selector picks get a class (first match wins)",
            "shown": "none (the owner chain decides)",
        },
    )
    accelerators: tuple[AcceleratorResource, ...] = field(
        default=(),
        metadata={
            "rows": "extended resource names read as GPU asks beyond the device plugins' built-in ones",
            "shown": "none (nvidia.com, amd.com and huawei.com names are built in)",
        },
    )
    class_policy: dict[str, ClassPolicy] = field(
        default_factory=lambda: dict(DEFAULT_CLASS_POLICIES),
        metadata={
            "tables": "per workload class: idle rule, reclaim, priority class, quota exemption",
            "shown": "notebook idle after 1 h; inference and other never reclaimed",
        },
    )
    source_file: str = "<built-in defaults>"
    # Not a key: `load` reads it from the variable dashboard.auth_password_env names (empty when unset), and
    # `dashboard_auth` refuses an empty one. Out of repr, so a logged config never shows it.
    dashboard_password: str = field(default="", repr=False)
    dashboard: DashboardConfig = section(DashboardConfig, "where the dashboards listen, and their login")
    enforcer: EnforcerConfig = section(EnforcerConfig, "the admission webhook's policies")
    exporter: ExporterConfig = section(ExporterConfig, "where the Prometheus exporter of derived figures serves")
    reclaim: ReclaimConfig = section(ReclaimConfig, "giving back GPUs idle past their class's limit")

    def tenant_of_namespace(self) -> dict[str, str]:
        return {ns: t.name for t in self.tenants for ns in t.namespaces}

    def accelerator_resources(self) -> dict[str, Resource]:
        """The [[accelerators]] rows by resource name, as `gpuledger.vendors.read_resource` takes them."""
        return {a.resource: a.read() for a in self.accelerators}


# Built-in defaults describe the simulated fleet, so `gpuledger up` works with no config file at all.
# Budgets are sized against what each tenant is charged in a month of that fleet (idle shared in proportion):
# about vision 28k, nlp 36k, recsys 18k, research 10k USD of the fleet's 108k. So vision, nlp and recsys end a month
# at 60-75 % of theirs, and research overruns its 8k around the 24th (the warning at 80 % comes ~5 days before),
# which the budget pages and the budget policy exist to show (tests/collector/test_default_budgets.py).
DEFAULT_TENANTS = (
    Tenant("vision", ("vision-train", "vision-dev"), 3.0, {"NVIDIA H100 80GB HBM3": 40, "*": 64}, 40_000.0),
    Tenant("nlp", ("nlp",), 4.0, {"*": 96}, 50_000.0),
    Tenant("recsys", ("recsys", "recsys-batch"), 2.0, {"*": 48}, 30_000.0),
    Tenant("research", ("research",), 1.0, {"*": 32}, 8_000.0),
    Tenant("platform", ("platform", "notebooks"), 1.0, {"*": 16}, None),
)
DEFAULT_RATES = (
    Rate("NVIDIA H100 80GB HBM3", 2.49, dt.date(2026, 1, 1)),
    Rate("NVIDIA H200", 3.29, dt.date(2026, 1, 1)),
    Rate("NVIDIA A100-SXM4-80GB", 1.29, dt.date(2026, 1, 1)),
    Rate("NVIDIA L40S", 0.89, dt.date(2026, 1, 1)),
    Rate("NVIDIA L4", 0.44, dt.date(2026, 1, 1)),
    Rate("Tesla T4", 0.29, dt.date(2026, 1, 1)),
    # The README's mixed-fleet example prices (examples, not quotes), under the names the AMD and Ascend exporters
    # write (the simulator's, collector/sim/catalog.py), so a simulated mixed fleet is priced out of the box
    Rate("AMD Instinct MI300X OAM", 1.99, dt.date(2026, 1, 1)),
    Rate("910B3-Ascend-V1", 1.20, dt.date(2026, 1, 1)),
)


# Notebooks are parked interactively (an hour idle is a person gone); training has quiet phases (checkpoints, data
# loading, evaluation between epochs), hence two; inference idles at night by design and is never reclaimed by
# default; `other` is cluster add-ons and cron jobs, reported but never touched.
DEFAULT_CLASS_POLICIES = {
    "training": ClassPolicy(idle_after_h=2.0),
    "inference": ClassPolicy(idle_after_h=2.0, reclaim=False),
    "notebook": ClassPolicy(idle_after_h=1.0),
    "evaluation": ClassPolicy(idle_after_h=2.0),
    "other": ClassPolicy(idle_after_h=2.0, reclaim=False),
}
assert set(DEFAULT_CLASS_POLICIES) == set(WORKLOAD_CLASSES)


def defaults() -> Config:
    return Config(tenants=DEFAULT_TENANTS, rates=DEFAULT_RATES)


def match_model(model: str | None, keys: Iterable[str]) -> str | None:
    """The config key that names the GPU model `model`: the rate card's and the quotas' one rule.

    The key equal to the model's name, else the longest key whose words appear together, in order, among the
    name's words (`H100` and `NVIDIA-H100-80GB-HBM3` name "NVIDIA H100 80GB HBM3"; `H10` names nothing); None
    when no key does. Words are runs of letters, digits and dots, case aside."""
    if model is None:
        return None
    keys = list(keys)
    if model in keys:
        return model
    words = f" {re.sub(r'[^a-z0-9.]+', ' ', model.lower())} "
    hits = [k for k in keys if (w := re.sub(r"[^a-z0-9.]+", " ", k.lower()).strip()) and f" {w} " in words]
    return max(hits, key=len) if hits else None


def check_quota_models(cfg: Config, known: Iterable[str]) -> None:
    """Every tenant's quota key must name a GPU model of the lake (`known`), by `match_model`'s rule: a key that
    names none would cap nothing. ConfigError, one line per such key naming it and the known models.

    With no model known yet (an empty lake) nothing can be checked. The built-in tenants are not checked: they
    describe the built-in simulated fleet, and a real fleet without H100s should not fail on them."""
    known = sorted(set(known))
    if not known or cfg.tenants is DEFAULT_TENANTS:
        return
    problems = []
    for i, t in enumerate(cfg.tenants):
        for name in t.quota:
            if name != "*" and not any(match_model(m, [name]) for m in known):
                problems.append(
                    f"tenants[{i}] ({t.name}).quota.{name}: names no GPU model in the lake (known: {', '.join(known)})"
                )
    if problems:
        raise ConfigError(cfg.source_file, problems)


def parse(doc: dict, source_file: str, base_dir: Path | None = None) -> Config:
    c = Walker(base_dir)
    top = c.table(doc, "", allowed(Config))
    values: dict[str, Any] = {"tenants": DEFAULT_TENANTS, "rates": DEFAULT_RATES}
    values |= c.values(top, "", Config)
    for name, cls, _ in sections(Config):
        if name in top:
            values[name] = cls(**c.values(c.table(top[name], name, allowed(cls)), name, cls))
    if "tenants" in top:
        values["tenants"] = _tenants(c, top["tenants"])
    if "rates" in top:
        values["rates"] = _rates(c, top["rates"])
    if "classes" in top:
        values["classes"] = _classes(c, top["classes"])
    if "class_policy" in top:
        values["class_policy"] = _class_policy(c, top["class_policy"])
    if "accelerators" in top:
        values["accelerators"] = _accelerators(c, top["accelerators"])
    cfg = Config(source_file=source_file, **values)

    # Rules between keys.
    sources = top.get("collector", {}).get("sources") if isinstance(top.get("collector"), dict) else None
    if isinstance(sources, list):
        dup = sorted({str(s) for s in sources if sources.count(s) > 1})
        if dup:
            c.bad("collector.sources", f"listed twice: {', '.join(dup)}")
    if sources == []:  # collect would scrape nothing and say it had
        c.bad("collector.sources", f"must list at least one source (registered: {', '.join(source_names())})")
    if cfg.collector.dcgm_urls and cfg.collector.dcgm_service:
        c.bad("collector.dcgm_service", "set dcgm_urls or dcgm_service, not both")
    if not cfg.simulator.models:
        c.bad("simulator.models", "must list at least one model")
    for model, layout in cfg.simulator.partitions.items():
        if (problem := sim_partition_problem(model, layout)) is not None:
            c.bad(f"simulator.partitions.{model}", problem)
    an = cfg.analytics
    if an.idle_policy == "platform" and not an.platform_tenant:
        c.bad("analytics.platform_tenant", "needed when idle_policy is platform (the tenant carrying idle cost)")
    if an.platform_tenant and cfg.tenants and an.platform_tenant not in {t.name for t in cfg.tenants}:
        c.bad("analytics.platform_tenant", f"no tenant named {an.platform_tenant!r}")
    if bool(cfg.dashboard.auth_user) != bool(cfg.dashboard.auth_password_env):
        c.bad("dashboard.auth_user", "set both auth_user and auth_password_env, or neither")
    names = {t.name for t in cfg.tenants}
    for group, mapped in cfg.dashboard.tenant_groups.items():
        unknown = sorted(set(mapped) - names)
        if unknown:  # a typo would show that group nothing, silently
            c.bad(f"dashboard.tenant_groups.{group}", f"no tenant named {', '.join(map(repr, unknown))}")
    if (cfg.dashboard.tenant_groups or cfg.dashboard.admin_groups) and not cfg.dashboard.trusted_proxies:
        c.bad(
            "dashboard.tenant_groups",
            "groups come from a sign-in proxy's headers: set dashboard.trusted_proxies to its address",
        )
    if c.problems:
        raise ConfigError(source_file, c.problems)
    return cfg


def _tenants(c: Walker, raw: Any) -> tuple[Tenant, ...]:
    if not isinstance(raw, list):
        c.bad("tenants", "expected an array of tables ([[tenants]])")
        return ()
    out: list[Tenant] = []
    owner: dict[str, str] = {}
    for i, doc in enumerate(raw):
        t = c.table(doc, f"tenants[{i}]", allowed(Tenant))
        name = c.values(t, f"tenants[{i}]", Tenant, only=("name",)).get("name")
        where = f"tenants[{i}] ({name})" if name else f"tenants[{i}]"  # its keys' paths name it
        values = c.values(t, where, Tenant, only=[f.name for f in dataclasses.fields(Tenant) if f.name != "name"])
        for j, ns in enumerate(values.get("namespaces", ())):
            if ns in owner:
                c.bad(f"{where}.namespaces[{j}]", f"namespace {ns!r} already belongs to tenant {owner[ns]!r}")
            else:
                owner[ns] = name or "?"
        if name:  # kept with its bad values at their defaults, so the duplicate and platform_tenant checks see it
            out.append(Tenant(name, **values))
    names = [t.name for t in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        c.bad("tenants", f"duplicate tenant name(s): {', '.join(dup)}")
    return tuple(out)


def _rates(c: Walker, raw: Any) -> tuple[Rate, ...]:
    if not isinstance(raw, list):
        c.bad("rates", "expected an array of tables ([[rates]])")
        return ()
    out: list[tuple[int, Rate]] = []  # with its place in the file: a bad row before it is left out
    for i, doc in enumerate(raw):
        n = len(c.problems)
        values = c.values(c.table(doc, f"rates[{i}]", allowed(Rate)), f"rates[{i}]", Rate)
        if len(c.problems) == n:
            out.append((i, Rate(**values)))
    seen: dict[tuple[str, dt.datetime], int] = {}
    for i, r in out:
        k = (r.gpu_model, r.effective_from)
        if k in seen:
            c.bad("rates", f"two prices for {r.gpu_model} from {r.effective_from} (rates[{seen[k]}] and rates[{i}])")
        seen[k] = i
    return tuple(r for _, r in out)


def _classes(c: Walker, raw: Any) -> tuple[ClassRule, ...]:
    if not isinstance(raw, list):
        c.bad("classes", "expected an array of tables ([[classes]])")
        return ()
    out: list[ClassRule] = []
    for i, doc in enumerate(raw):
        n = len(c.problems)
        where = f"classes[{i}]"
        values = c.values(c.table(doc, where, allowed(ClassRule)), where, ClassRule)
        labels = doc.get("labels") if isinstance(doc, dict) else None
        for k in labels if isinstance(labels, dict) else ():
            if not _label_key(k):
                c.bad(f"{where}.labels", f"{k!r} is not a Kubernetes label key (prefix/name)")
        if isinstance(doc, dict) and not doc.get("namespaces") and not doc.get("labels"):
            # A rule with no selector would give every pod its class: the owner chain would never speak.
            c.bad(where, "needs namespaces or labels (a rule without a selector would match every pod)")
        if len(c.problems) == n:
            out.append(ClassRule(**values))
    return tuple(out)


def _accelerators(c: Walker, raw: Any) -> tuple[AcceleratorResource, ...]:
    if not isinstance(raw, list):
        c.bad("accelerators", "expected an array of tables ([[accelerators]])")
        return ()
    out: list[AcceleratorResource] = []
    for i, doc in enumerate(raw):
        n = len(c.problems)
        where = f"accelerators[{i}]"
        values = c.values(c.table(doc, where, allowed(AcceleratorResource)), where, AcceleratorResource)
        name = values.get("resource", "")
        if name and "/" not in name:  # cpu, memory: not an extended resource, the row would never match
            c.bad(f"{where}.resource", f"{name!r} is not an extended resource name (domain/name)")
        if name in {a.resource for a in out}:
            c.bad(f"{where}.resource", f"{name!r} is mapped twice")
        if len(c.problems) == n:
            out.append(AcceleratorResource(**values))
    return tuple(out)


def _class_policy(c: Walker, raw: Any) -> dict[str, ClassPolicy]:
    out = dict(DEFAULT_CLASS_POLICIES)
    if not isinstance(raw, dict):
        c.bad("class_policy", "expected a table of tables ([class_policy.notebook])")
        return out
    for name, doc in raw.items():
        where = f"class_policy.{name}"
        if name not in WORKLOAD_CLASSES:
            c.bad(where, f"unknown workload class {name!r} (known: {', '.join(WORKLOAD_CLASSES)})")
            continue
        # Only the keys given: the rest keep this class's defaults, not the dataclass's.
        out[name] = replace(out[name], **c.values(c.table(doc, where, allowed(ClassPolicy)), where, ClassPolicy))
    return out


def load(path: str | Path | None, environ: Mapping[str, str] | None = None) -> Config:
    """Load and validate a config file; `None` gives the built-in defaults. Keys declared with an `env` variable
    take its value when it is set in `environ` (default: this process's environment)."""
    return _from_environment(_load(path), os.environ if environ is None else environ)


def _from_environment(cfg: Config, environ: Mapping[str, str]) -> Config:
    """The values of the keys declared with `env=` whose variable is set, checked as the file's would be, and the
    dashboard's password from the variable dashboard.auth_password_env names."""
    if cfg.dashboard.auth_password_env:
        cfg = replace(cfg, dashboard_password=environ.get(cfg.dashboard.auth_password_env, ""))
    c = Walker()
    for name, cls, _ in sections(Config):
        given = {toml_key(f, k): environ[k.env] for f, k, _ in declared(cls) if k.env and k.env in environ}
        if given:
            values = c.values(given, name, cls, only=[f.name for f, k, _ in declared(cls) if k.env])
            cfg = replace(cfg, **{name: replace(getattr(cfg, name), **values)})
    if c.problems:
        raise ConfigError(f"{cfg.source_file} (environment)", c.problems)
    return cfg


def _load(path: str | Path | None) -> Config:
    if path is None:
        return defaults()
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(p), ["file not found"]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(str(p), [f"cannot read: {e}"]) from e
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(str(p), [f"not valid TOML: {e}"]) from e
    return parse(doc, str(p), p.parent)


def dashboard_auth(cfg: Config) -> tuple[str, str] | None:
    """(user, password) for the dashboards' HTTP basic auth, None when dashboard.auth_user is not set. A password
    variable that is not set (or empty) is a ConfigError when the dashboards are served, not at every load: the
    collectors and the analytics share the config file but not the dashboard's secret."""
    db = cfg.dashboard
    if not db.auth_user:
        return None
    if not cfg.dashboard_password:
        raise ConfigError(
            f"{cfg.source_file} (environment)",
            [f"dashboard.auth_password_env: names {db.auth_password_env!r}, which is not set in the environment"],
        )
    return db.auth_user, cfg.dashboard_password


def with_overrides(cfg: Config, lake: Store | None = None) -> Config:
    return replace(cfg, lake=LakeConfig(lake)) if lake is not None else cfg
