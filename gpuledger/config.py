"""Config: named defaults -> tomllib -> validate once, collecting every problem with its key -> a frozen object.

No other module reads the environment or config files: the CLI calls `load()` once and hands the result down.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import socket
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from gpuledger.errors import ConfigError

# Sources register a factory under a name in this entry-point group, the built-ins too (pyproject.toml), so a
# third-party package adds one with no edit here. The core reads the names only; collector/sources.py loads them.
SOURCE_GROUP = "gpuledger.sources"
SIM_MODELS = ("H100", "H200", "A100", "L40S", "L4", "T4")


def source_names() -> tuple[str, ...]:
    """The registered source names, sorted (read from installed metadata, ~50 ms: call it when needed)."""
    return tuple(sorted(entry_points(group=SOURCE_GROUP).names))


@dataclass(frozen=True)
class Tenant:
    name: str
    namespaces: tuple[str, ...]
    weight: float = 1.0
    quota: dict[str, int] = field(default_factory=dict)  # GPU model -> max concurrent GPUs; "*" = any model
    budget_usd_per_month: float | None = None
    budget_gpu_hours_per_month: float | None = None  # GPU-hours charged (cost_daily.gpu_hours) per calendar month


@dataclass(frozen=True)
class Rate:
    gpu_model: str
    usd_per_gpu_hour: float
    effective_from: dt.datetime  # UTC; a TOML date means its midnight UTC, a TOML offset datetime that instant

    def __post_init__(self) -> None:
        if not isinstance(self.effective_from, dt.datetime):  # a date: its midnight, UTC
            object.__setattr__(
                self, "effective_from", dt.datetime.combine(self.effective_from, dt.time(), dt.timezone.utc)
            )


@dataclass(frozen=True)
class LakeConfig:
    path: Path = Path("gpuledger-data")


@dataclass(frozen=True)
class CollectorConfig:
    interval_s: float = 10.0
    flush_interval_s: float = 30.0
    process_interval_s: float = 60.0
    sources: tuple[str, ...] = ("sim",)
    node: str = ""  # writer id of this collector; empty = the host name
    spool_dir: Path | None = None  # default: <lake>/_spool/<node>
    dcgm_urls: tuple[str, ...] = ()  # dcgm-exporter /metrics pages to scrape (source dcgm)
    prometheus_url: str = ""  # Prometheus server holding DCGM series (source prometheus)
    metrics_port: int = 0  # serve the collector's own /metrics here; 0 = off

    @property
    def writer(self) -> str:
        return self.node or socket.gethostname().split(".")[0]


@dataclass(frozen=True)
class SimConfig:
    nodes: int = 12
    gpus_per_node: int = 8
    models: tuple[str, ...] = ("H100", "A100", "L40S")
    seed: int = 42
    backfill_days: float = 7.0  # the recent window, every backfill_step_s (as the live collector samples)
    backfill_step_s: float = 30.0
    # Older history before it, coarser: 28 days give the demand forecast its four weeks (MIN_DAYS) for ~80 %
    # more samples than the 7 fine days alone (576 a GPU-day at 150 s against 2,880 at 30 s). 150 s, not 300:
    # two samples in every 5-minute bucket, which is what gpu_5min needs to measure the time (and energy) covered.
    history_days: float = 28.0
    history_step_s: float = 150.0
    load: float = 0.5  # offered GPU-hours over capacity (collector/sim/workload.py); see README on 0.7


@dataclass(frozen=True)
class AnalyticsConfig:
    cost_method: str = "request"  # request: allocated time; max: max(allocated, used) as in OpenCost
    idle_policy: str = "proportional"  # none, proportional, platform
    platform_tenant: str = ""  # carries idle cost with idle_policy = "platform"
    usd_per_kwh: float = 0.0  # energy price; 0 = no energy cost line
    waste_threshold_pct: float = 5.0  # an allocated GPU-hour below this mean utilization is idle
    waste_window_h: int = 1  # ...and counts as waste inside a run of at least this many idle hours
    fairshare_half_life_h: float = 168.0  # Slurm's default PriorityDecayHalfLife is 7 days


@dataclass(frozen=True)
class FinopsConfig:
    provider_name: str = "gpuledger"  # FOCUS ServiceProviderName and InvoiceIssuerName: who runs the GPU service
    host_provider_name: str = ""  # FOCUS HostProviderName: who hosts the GPUs (a cloud, or your own); "" = the same


@dataclass(frozen=True)
class DashboardConfig:
    host: str = "127.0.0.1"  # where `gpuledger dashboard` listens; 0.0.0.0 to serve other machines
    port: int = 8050
    auth_user: str = ""  # HTTP basic auth on every page and callback when set (with auth_password_env)
    auth_password_env: str = ""  # name of the environment variable holding the password (never the password)


ENFORCER_MODES = ("enforce", "warn", "dry-run")
# A namespace's tenant when the config's [[tenants]] namespaces do not name it (collector and enforcer alike).
TENANT_LABEL = "gpuledger.io/tenant"


@dataclass(frozen=True)
class EnforcerConfig:
    quota_mode: str = "enforce"  # each policy: enforce (deny), warn (admit with a warning) or dry-run (audit only)
    budget_mode: str = "warn"
    idle_hog_mode: str = "warn"
    fair_share_mode: str = "enforce"  # enforce: /mutate sets the priority class; dry-run: it does not
    budget_warn_pct: float = 80.0
    idle_max_gpus: float = 4.0  # a tenant holding more allocated-but-idle GPUs than this...
    idle_min_h: float = 2.0  # ...each idle for at least this long, is gated
    tenant_label: str = TENANT_LABEL  # namespaces' tenant label, watched from the API; "" = the config's map only
    failure_mode: str = "allow"  # a missing or stale decision table: allow (with a warning) or deny
    max_table_age_s: float = 900.0
    refresh_s: float = 60.0  # how often the decision table is reloaded from the lake
    burst_window_s: float = 30.0  # admissions this long ago or less count against quotas on top of the table
    policy_version: str = "v1"


@dataclass(frozen=True)
class Config:
    cluster: str = "default"
    lake: LakeConfig = LakeConfig()
    collector: CollectorConfig = CollectorConfig()
    simulator: SimConfig = SimConfig()
    analytics: AnalyticsConfig = AnalyticsConfig()
    finops: FinopsConfig = FinopsConfig()
    tenants: tuple[Tenant, ...] = ()
    rates: tuple[Rate, ...] = ()
    source_file: str = "<built-in defaults>"
    dashboard: DashboardConfig = DashboardConfig()
    enforcer: EnforcerConfig = EnforcerConfig()

    def tenant_of_namespace(self) -> dict[str, str]:
        return {ns: t.name for t in self.tenants for ns in t.namespaces}


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
)


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
        for key in t.quota:
            if key != "*" and not any(match_model(m, [key]) for m in known):
                problems.append(
                    f"tenants[{i}] ({t.name}).quota.{key}: names no GPU model in the lake (known: {', '.join(known)})"
                )
    if problems:
        raise ConfigError(cfg.source_file, problems)


class _Checker:
    """Walks a parsed TOML document, recording `key.path: problem` for every mistake instead of stopping."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def bad(self, key: str, problem: str) -> None:
        self.problems.append(f"{key}: {problem}")

    def table(self, doc: Any, key: str, allowed: set[str]) -> dict:
        if not isinstance(doc, dict):
            self.bad(key, f"expected a table, got {type(doc).__name__}")
            return {}
        for k in doc:
            if k not in allowed:
                self.bad(f"{key}.{k}" if key else k, f"unknown key (allowed: {', '.join(sorted(allowed))})")
        return doc

    def finite(self, path: str, v: Any) -> bool:
        """TOML has nan and inf: no quota, budget, weight, price or interval of ours means either."""
        if isinstance(v, float) and not math.isfinite(v):
            self.bad(path, f"must be a finite number, got {v!r}")
            return False
        return True

    def get(self, doc: dict, key: str, path: str, kind: type | tuple, default: Any, check=None, why: str = "") -> Any:
        if key not in doc:
            return default
        v = doc[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(v, bool) and bool not in kinds:
            ok = False
        else:
            ok = isinstance(v, kinds)
        if not ok:
            names = " or ".join(k.__name__.replace("str", "string").replace("float", "number") for k in kinds)
            self.bad(path, f"expected {names}, got {type(v).__name__} {v!r}")
            return default
        if not self.finite(path, v):
            return default
        if check is not None and not check(v):
            self.bad(path, f"{why}, got {v!r}")
            return default
        return v


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


def _positive(v: float) -> bool:
    return v > 0


def parse(doc: dict, source_file: str, base_dir: Path | None = None) -> Config:
    c = _Checker()
    top = c.table(
        doc,
        "",
        {
            "cluster",
            "lake",
            "collector",
            "simulator",
            "analytics",
            "finops",
            "tenants",
            "rates",
            "dashboard",
            "enforcer",
        },
    )
    cfg = defaults()
    cluster = c.get(top, "cluster", "cluster", str, cfg.cluster, lambda s: s.strip() != "", "must not be empty")

    lake = cfg.lake
    if "lake" in top:
        t = c.table(top["lake"], "lake", {"path"})
        p = c.get(t, "path", "lake.path", str, None, lambda s: s.strip() != "", "must not be empty")
        if p is not None:
            path = Path(p).expanduser()
            lake = LakeConfig(path if path.is_absolute() or base_dir is None else base_dir / path)

    col = cfg.collector
    if "collector" in top:
        t = c.table(
            top["collector"],
            "collector",
            {
                "interval_s",
                "flush_interval_s",
                "process_interval_s",
                "sources",
                "node",
                "spool_dir",
                "dcgm_urls",
                "prometheus_url",
                "metrics_port",
            },
        )
        num = (int, float)
        sources = c.get(t, "sources", "collector.sources", list, list(col.sources))
        registered = source_names() if sources else ()
        for i, s in enumerate(sources):
            if s not in registered:
                c.bad(f"collector.sources[{i}]", f"unknown source {s!r} (registered: {', '.join(registered)})")
        dup = sorted({s for s in sources if sources.count(s) > 1})
        if dup:
            c.bad("collector.sources", f"listed twice: {', '.join(map(str, dup))}")
        spool = c.get(t, "spool_dir", "collector.spool_dir", str, None)
        urls = c.get(t, "dcgm_urls", "collector.dcgm_urls", list, [])
        for i, u in enumerate(urls):
            if not isinstance(u, str) or not u.startswith(("http://", "https://")):
                c.bad(f"collector.dcgm_urls[{i}]", f"expected an http(s) URL, got {u!r}")
        prom = c.get(t, "prometheus_url", "collector.prometheus_url", str, "")
        if prom and not prom.startswith(("http://", "https://")):
            c.bad("collector.prometheus_url", f"expected an http(s) URL, got {prom!r}")
        port = c.get(
            t,
            "metrics_port",
            "collector.metrics_port",
            int,
            0,
            lambda v: 0 <= v <= 65535,
            "must be a TCP port (0 = off)",
        )
        col = CollectorConfig(
            interval_s=float(
                c.get(t, "interval_s", "collector.interval_s", num, col.interval_s, _positive, "must be > 0")
            ),
            flush_interval_s=float(
                c.get(
                    t,
                    "flush_interval_s",
                    "collector.flush_interval_s",
                    num,
                    col.flush_interval_s,
                    _positive,
                    "must be > 0",
                )
            ),
            process_interval_s=float(
                c.get(
                    t,
                    "process_interval_s",
                    "collector.process_interval_s",
                    num,
                    col.process_interval_s,
                    _positive,
                    "must be > 0",
                )
            ),
            sources=tuple(str(s) for s in sources),
            node=c.get(t, "node", "collector.node", str, ""),
            spool_dir=Path(spool) if spool else None,
            dcgm_urls=tuple(u for u in urls if isinstance(u, str)),
            prometheus_url=prom,
            metrics_port=port,
        )

    sim = cfg.simulator
    if "simulator" in top:
        t = c.table(
            top["simulator"],
            "simulator",
            {
                "nodes",
                "gpus_per_node",
                "models",
                "seed",
                "backfill_days",
                "backfill_step_s",
                "history_days",
                "history_step_s",
                "load",
            },
        )
        models = c.get(t, "models", "simulator.models", list, list(sim.models))
        for i, m in enumerate(models):
            if m not in SIM_MODELS:
                c.bad(f"simulator.models[{i}]", f"unknown simulated model {m!r} (known: {', '.join(SIM_MODELS)})")
        if not models:
            c.bad("simulator.models", "must list at least one model")
        sim = SimConfig(
            nodes=c.get(t, "nodes", "simulator.nodes", int, sim.nodes, _positive, "must be > 0"),
            gpus_per_node=c.get(
                t,
                "gpus_per_node",
                "simulator.gpus_per_node",
                int,
                sim.gpus_per_node,
                lambda v: 1 <= v <= 16,
                "must be between 1 and 16",
            ),
            models=tuple(models),
            seed=c.get(t, "seed", "simulator.seed", int, sim.seed, lambda v: v >= 0, "must be >= 0"),
            backfill_days=float(
                c.get(
                    t,
                    "backfill_days",
                    "simulator.backfill_days",
                    (int, float),
                    sim.backfill_days,
                    lambda v: v >= 0,
                    "must be >= 0",
                )
            ),
            backfill_step_s=float(
                c.get(
                    t,
                    "backfill_step_s",
                    "simulator.backfill_step_s",
                    (int, float),
                    sim.backfill_step_s,
                    lambda v: v >= 1,
                    "must be >= 1",
                )
            ),
            history_days=float(
                c.get(
                    t,
                    "history_days",
                    "simulator.history_days",
                    (int, float),
                    sim.history_days,
                    lambda v: 0 <= v <= 3650,
                    "must be between 0 and 3650",
                )
            ),
            history_step_s=float(
                c.get(
                    t,
                    "history_step_s",
                    "simulator.history_step_s",
                    (int, float),
                    sim.history_step_s,
                    lambda v: 1 <= v <= 86400,
                    "must be between 1 and 86400",
                )
            ),
            load=float(
                c.get(t, "load", "simulator.load", (int, float), sim.load, lambda v: 0 < v <= 2, "must be in (0, 2]")
            ),
        )

    an = cfg.analytics
    if "analytics" in top:
        t = c.table(top["analytics"], "analytics", set(AnalyticsConfig.__dataclass_fields__))
        num = (int, float)
        an = AnalyticsConfig(
            cost_method=c.get(
                t,
                "cost_method",
                "analytics.cost_method",
                str,
                an.cost_method,
                lambda v: v in ("request", "max"),
                "must be request or max",
            ),
            idle_policy=c.get(
                t,
                "idle_policy",
                "analytics.idle_policy",
                str,
                an.idle_policy,
                lambda v: v in ("none", "proportional", "platform"),
                "must be none, proportional or platform",
            ),
            platform_tenant=c.get(t, "platform_tenant", "analytics.platform_tenant", str, an.platform_tenant),
            usd_per_kwh=float(
                c.get(t, "usd_per_kwh", "analytics.usd_per_kwh", num, an.usd_per_kwh, lambda v: v >= 0, "must be >= 0")
            ),
            waste_threshold_pct=float(
                c.get(
                    t,
                    "waste_threshold_pct",
                    "analytics.waste_threshold_pct",
                    num,
                    an.waste_threshold_pct,
                    lambda v: 0 <= v <= 100,
                    "must be 0..100",
                )
            ),
            waste_window_h=c.get(
                t, "waste_window_h", "analytics.waste_window_h", int, an.waste_window_h, _positive, "must be > 0"
            ),
            fairshare_half_life_h=float(
                c.get(
                    t,
                    "fairshare_half_life_h",
                    "analytics.fairshare_half_life_h",
                    num,
                    an.fairshare_half_life_h,
                    _positive,
                    "must be > 0",
                )
            ),
        )
        if an.idle_policy == "platform" and not an.platform_tenant:
            c.bad("analytics.platform_tenant", "needed when idle_policy is platform (the tenant carrying idle cost)")

    fo = cfg.finops
    if "finops" in top:
        t = c.table(top["finops"], "finops", set(FinopsConfig.__dataclass_fields__))
        named = lambda v: v.strip() != ""  # noqa: E731
        fo = FinopsConfig(
            provider_name=c.get(
                t, "provider_name", "finops.provider_name", str, fo.provider_name, named, "must not be empty"
            ),
            host_provider_name=c.get(t, "host_provider_name", "finops.host_provider_name", str, fo.host_provider_name),
        )

    tenants = cfg.tenants
    if "tenants" in top:
        tenants = _tenants(c, top["tenants"])
    rates = cfg.rates
    if "rates" in top:
        rates = _rates(c, top["rates"])

    db = cfg.dashboard
    if "dashboard" in top:
        t = c.table(top["dashboard"], "dashboard", set(DashboardConfig.__dataclass_fields__))
        db = DashboardConfig(
            host=c.get(t, "host", "dashboard.host", str, db.host, lambda v: v.strip() != "", "must not be empty"),
            port=c.get(t, "port", "dashboard.port", int, db.port, lambda v: 1 <= v <= 65535, "must be a TCP port"),
            auth_user=c.get(t, "auth_user", "dashboard.auth_user", str, ""),
            auth_password_env=c.get(t, "auth_password_env", "dashboard.auth_password_env", str, ""),
        )
        if bool(db.auth_user) != bool(db.auth_password_env):
            c.bad("dashboard.auth_user", "set both auth_user and auth_password_env, or neither")
    en = cfg.enforcer
    if "enforcer" in top:
        t = c.table(top["enforcer"], "enforcer", set(EnforcerConfig.__dataclass_fields__))
        modes = {}
        for key in ("quota_mode", "budget_mode", "idle_hog_mode", "fair_share_mode"):
            modes[key] = c.get(
                t,
                key,
                f"enforcer.{key}",
                str,
                getattr(en, key),
                lambda v: v in ENFORCER_MODES,
                f"must be one of {', '.join(ENFORCER_MODES)}",
            )
        num = (int, float)
        en = EnforcerConfig(
            **modes,
            budget_warn_pct=float(
                c.get(
                    t,
                    "budget_warn_pct",
                    "enforcer.budget_warn_pct",
                    num,
                    en.budget_warn_pct,
                    lambda v: 0 < v <= 100,
                    "must be in (0, 100]",
                )
            ),
            idle_max_gpus=float(
                c.get(
                    t,
                    "idle_max_gpus",
                    "enforcer.idle_max_gpus",
                    num,
                    en.idle_max_gpus,
                    lambda v: v >= 0,
                    "must be >= 0",
                )
            ),
            idle_min_h=float(
                c.get(t, "idle_min_h", "enforcer.idle_min_h", num, en.idle_min_h, lambda v: v >= 0, "must be >= 0")
            ),
            tenant_label=c.get(
                t,
                "tenant_label",
                "enforcer.tenant_label",
                str,
                en.tenant_label,
                lambda v: v == "" or _label_key(v),
                "must be a Kubernetes label key (prefix/name) or empty",
            ),
            failure_mode=c.get(
                t,
                "failure_mode",
                "enforcer.failure_mode",
                str,
                en.failure_mode,
                lambda v: v in ("allow", "deny"),
                "must be allow or deny",
            ),
            max_table_age_s=float(
                c.get(
                    t, "max_table_age_s", "enforcer.max_table_age_s", num, en.max_table_age_s, _positive, "must be > 0"
                )
            ),
            refresh_s=float(c.get(t, "refresh_s", "enforcer.refresh_s", num, en.refresh_s, _positive, "must be > 0")),
            burst_window_s=float(
                c.get(
                    t,
                    "burst_window_s",
                    "enforcer.burst_window_s",
                    num,
                    en.burst_window_s,
                    lambda v: v >= 0,
                    "must be >= 0",
                )
            ),
            policy_version=c.get(t, "policy_version", "enforcer.policy_version", str, en.policy_version),
        )
    if an.platform_tenant and tenants and an.platform_tenant not in {t.name for t in tenants}:
        c.bad("analytics.platform_tenant", f"no tenant named {an.platform_tenant!r}")
    if c.problems:
        raise ConfigError(source_file, c.problems)
    return Config(cluster, lake, col, sim, an, fo, tenants, rates, source_file, db, en)


def _tenants(c: _Checker, raw: Any) -> tuple[Tenant, ...]:
    if not isinstance(raw, list):
        c.bad("tenants", "expected an array of tables ([[tenants]])")
        return ()
    out: list[Tenant] = []
    owner: dict[str, str] = {}
    for i, doc in enumerate(raw):
        key = f"tenants[{i}]"
        t = c.table(doc, key, {"name", "namespaces", "weight", "quota", "budget"})
        name = c.get(t, "name", f"{key}.name", str, None, lambda s: s.strip() != "", "must not be empty")
        if "name" not in t:
            c.bad(f"{key}.name", "missing (every tenant needs a name)")
        if name:
            key = f"tenants[{i}] ({name})"
        namespaces = c.get(t, "namespaces", f"{key}.namespaces", list, [])
        for j, ns in enumerate(namespaces):
            if not isinstance(ns, str) or not ns:
                c.bad(f"{key}.namespaces[{j}]", f"expected a namespace name, got {ns!r}")
            elif ns in owner:
                c.bad(f"{key}.namespaces[{j}]", f"namespace {ns!r} already belongs to tenant {owner[ns]!r}")
            else:
                owner[ns] = name or "?"
        weight = c.get(t, "weight", f"{key}.weight", (int, float), 1.0, _positive, "must be > 0")
        quota: dict[str, int] = {}
        if "quota" in t:
            q = t["quota"]
            if not isinstance(q, dict):
                c.bad(f"{key}.quota", "expected a table of GPU model = max concurrent GPUs")
            else:
                for model, n in q.items():
                    if isinstance(n, bool) or not isinstance(n, (int, float)):
                        c.bad(f"{key}.quota.{model}", f"expected a number of GPUs, got {n!r}")
                    elif n < 0:
                        c.bad(f"{key}.quota.{model}", f"must be >= 0, got {n!r}")
                    elif c.finite(f"{key}.quota.{model}", n):  # records nan and inf as problems
                        quota[model] = n
        budget = gpu_h = None
        if "budget" in t:
            b = c.table(t["budget"], f"{key}.budget", {"usd_per_month", "gpu_hours_per_month"})
            # > 0: a budget of 0 would read as "none" to some and "nothing allowed" to others; leave it out for none.
            budget = c.get(
                b,
                "usd_per_month",
                f"{key}.budget.usd_per_month",
                (int, float),
                None,
                _positive,
                "must be > 0 (leave it out for no budget)",
            )
            gpu_h = c.get(
                b,
                "gpu_hours_per_month",
                f"{key}.budget.gpu_hours_per_month",
                (int, float),
                None,
                _positive,
                "must be > 0 (leave it out for no budget)",
            )
        if name:
            out.append(
                Tenant(
                    name,
                    tuple(n for n in namespaces if isinstance(n, str)),
                    float(weight),
                    quota,
                    float(budget) if budget is not None else None,
                    float(gpu_h) if gpu_h is not None else None,
                )
            )
    names = [t.name for t in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        c.bad("tenants", f"duplicate tenant name(s): {', '.join(dup)}")
    return tuple(out)


def _rates(c: _Checker, raw: Any) -> tuple[Rate, ...]:
    if not isinstance(raw, list):
        c.bad("rates", "expected an array of tables ([[rates]])")
        return ()
    out = []
    for i, doc in enumerate(raw):
        key = f"rates[{i}]"
        t = c.table(doc, key, {"gpu_model", "usd_per_gpu_hour", "effective_from"})
        for req in ("gpu_model", "usd_per_gpu_hour", "effective_from"):
            if req not in t:
                c.bad(f"{key}.{req}", "missing")
        model = c.get(t, "gpu_model", f"{key}.gpu_model", str, None, lambda s: s.strip() != "", "must not be empty")
        price = c.get(
            t, "usd_per_gpu_hour", f"{key}.usd_per_gpu_hour", (int, float), None, lambda v: v >= 0, "must be >= 0"
        )
        since = c.get(t, "effective_from", f"{key}.effective_from", (dt.date, dt.datetime), None)
        if isinstance(since, dt.datetime):
            if since.tzinfo is None:
                c.bad(f"{key}.effective_from", f"{since.isoformat()} has no UTC offset: write 2026-07-01T12:00:00Z")
                since = None
            else:
                since = since.astimezone(dt.timezone.utc)
        if model is not None and price is not None and since is not None:
            out.append(Rate(model, float(price), since))
    seen: dict[tuple[str, dt.datetime], int] = {}
    for i, r in enumerate(out):
        k = (r.gpu_model, r.effective_from)
        if k in seen:
            c.bad("rates", f"two prices for {r.gpu_model} from {r.effective_from} (rates[{seen[k]}] and rates[{i}])")
        seen[k] = i
    return tuple(out)


def load(path: str | Path | None) -> Config:
    """Load and validate a config file; `None` gives the built-in defaults."""
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


def with_overrides(cfg: Config, lake: Path | None = None) -> Config:
    return replace(cfg, lake=LakeConfig(lake)) if lake is not None else cfg
