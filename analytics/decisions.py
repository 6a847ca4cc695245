"""Decision inputs for the enforcer, per tenant and GPU model: what it holds now, its quota headroom, its
budget spent and left this month, its decayed historical usage and fair-share factor, and idle GPUs it holds.

Fair share follows Slurm's classic multifactor plugin: usage decays with a half-life T (U <- U * 2^(-dt/T) +
usage * dt, i.e. each GPU-hour counts 2^(-age/T)); the factor is F = 2^(-U/S) where U is the tenant's share of
all decayed usage and S its share of all weights. F = 1 for a tenant that used nothing, 0.5 for one that used
exactly its share, towards 0 for one far over it.

Grants (approved quota requests in force now, gpuledger/quota_requests.py) raise the quotas while they last, as
`decisions` says: a grant of g GPUs of model M adds g to the quota of each row of a model M names, and g to the
tenant's all-models row (its "*" quota), once; overlapping grants add up. A row with no quota stays without one.

A quota key names GPU models by the rate card's rule (`gpuledger.config.match_model`: `H100` caps each model
whose name has the word H100); a key that names no model of the lake is a config error, checked before the rows
are built, so no quota is silently ignored.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence

import polars as pl

from gpuledger.analytics.day_memo import by_day
from gpuledger.analytics.sums import exact_sum
from gpuledger.config import Config, Tenant, check_quota_models, match_model
from gpuledger.lake import has_data
from gpuledger.quota_requests import Grant
from gpuledger.store import LakeRef

ANY = "*"


def known_models(lake: LakeRef, read_only: bool = False) -> list[str]:
    """The GPU models the lake knows: its nodes' inventory, its telemetry's rollups and its allocations."""
    return sorted(set().union(*models_by_cluster(lake, read_only).values()))


def models_by_cluster(lake: LakeRef, read_only: bool = False) -> dict[str, list[str]]:
    """`known_models` of each cluster: a cluster's decision rows name the models it has, not another cluster's.
    read_only: nothing is written into the lake (no day memo; `day_memo.by_day`)."""
    found: dict[str, set[str]] = {}
    for table, column in (("nodes", "gpu_model"), ("gpu_hourly", "model"), ("gpu_allocations", "gpu_model")):
        if has_data(lake, table):
            # Kept per day of the table (analytics/day_memo.py): a whole year's scan on every run otherwise.
            pairs = by_day(
                lake,
                table,
                f"models-{table}",
                lambda day, c=column: day.select("cluster", c).drop_nulls(c).unique().collect(),
                read_only,
            )
            pairs = pairs.unique().sort(pl.all())
            for cluster, model in pairs.iter_rows():
                found.setdefault(cluster, set()).add(model)
    return {c: sorted(m) for c, m in found.items()}


def _pairs(rows: pl.LazyFrame, column: str) -> pl.DataFrame:
    return rows.select("cluster", column).drop_nulls(column).unique().collect()


def checked_models(lake: LakeRef, cfg: Config, read_only: bool = False) -> list[str]:
    """`known_models`, once every quota key of the config names one of them (ConfigError otherwise): what the
    analytics and `gpuledger enforcer serve`/`check` call before they rely on the quotas (read_only: writing
    nothing into the lake, as the webhook on an object-store lake must not)."""
    models = known_models(lake, read_only)
    check_quota_models(cfg, models)
    return models


def decayed_usage(alloc_hours: pl.LazyFrame, now: dt.datetime, half_life_h: float) -> pl.LazyFrame:
    """Per tenant: sum of GPU-hours x 2^(-age/T), age measured from the middle of each hour to `now`."""
    now_lit = pl.lit(now).dt.cast_time_unit("us")
    age_h = (now_lit - (pl.col("hour") + pl.duration(minutes=30))).dt.total_microseconds() / 3.6e9
    return (
        alloc_hours.filter(pl.col("hour") < now_lit)
        .group_by("tenant")
        # An exact sum (analytics/sums.py): in float, two runs of one lake gave different last bits, and decisions rows.
        .agg(exact_sum(pl.col("gpu_hours") * 2.0 ** (-age_h.clip(lower_bound=0) / half_life_h)).alias("usage_decayed"))
    )


def fairshare(usage: pl.DataFrame, tenants: tuple[Tenant, ...]) -> pl.DataFrame:
    """tenant, weight_share (S), usage_share (U), fairshare (2^(-U/S))."""
    total_w = sum(t.weight for t in tenants) or 1.0
    u = dict(zip(usage["tenant"].to_list(), usage["usage_decayed"].to_list(), strict=True))
    # fsum: exact whatever the order, and the usage rows come in a group-by's order (a plain sum's last bit changed
    # between two runs of one lake, and with it the decisions rows).
    total_u = math.fsum(v for k, v in u.items() if k in {t.name for t in tenants}) or 0.0
    rows = []
    for t in tenants:
        s = t.weight / total_w
        share = (u.get(t.name, 0.0) / total_u) if total_u else 0.0
        rows.append((t.name, s, share, 2.0 ** (-share / s)))
    return pl.DataFrame(
        rows,
        schema={"tenant": pl.String, "weight_share": pl.Float64, "usage_share": pl.Float64, "fairshare": pl.Float64},
        orient="row",
    )


def decisions(
    allocs_now: pl.DataFrame,
    spent_month: pl.DataFrame,
    usage: pl.DataFrame,
    idle_now: pl.DataFrame,
    tenants: tuple[Tenant, ...],
    now: dt.datetime,
    models: list[str],
    grants: Sequence[Grant] = (),
) -> pl.DataFrame:
    """One row per (tenant, gpu_model) the tenant holds, has a quota for or is granted more of, named as the lake
    names the model.

    allocs_now: (tenant, gpu_model, share) of open allocations; spent_month: (tenant, usd, gpu_h) this month;
    usage: (tenant, usage_decayed); idle_now: (tenant, gpu_model, idle_gpus); models: the lake's GPU models
    (`known_models`), which the quota keys and the grants' models are resolved against; grants: those in force now.

    A grant of g GPUs of M raises, while in force, the quota of each model row M names (whether the row's quota is
    the model's own key or "*") and the all-models row, by g; the latter once per grant, however many models M
    names, and only when M names a model here. The webhook checks the model row and the all-models row, so the g
    GPUs are usable on M, and on the total: g more of M is g more in all. A model capped by "*" alone may use that
    raised total while M's grant is not in use; a model with its own key never goes past it (docs/governance.md).
    A row with no quota (no key, no "*") stays without one: nothing to raise.
    """
    held = allocs_now.group_by("tenant", "gpu_model").agg(exact_sum(pl.col("share")).alias("allocated_gpus"))
    hold = {(r["tenant"], r["gpu_model"]): r["allocated_gpus"] for r in held.iter_rows(named=True)}
    idle = {(r["tenant"], r["gpu_model"]): r["idle_gpus"] for r in idle_now.iter_rows(named=True)}
    spent = dict(zip(spent_month["tenant"].to_list(), spent_month["usd"].to_list(), strict=True))
    spent_h = dict(zip(spent_month["tenant"].to_list(), spent_month["gpu_h"].to_list(), strict=True))
    decayed = dict(zip(usage["tenant"].to_list(), usage["usage_decayed"].to_list(), strict=True))
    fs = {r["tenant"]: r for r in fairshare(usage, tenants).iter_rows(named=True)}
    rows = []
    for t in tenants:
        held_by = {m: v for (tn, m), v in hold.items() if tn == t.name}
        idle_by = {m: v for (tn, m), v in idle.items() if tn == t.name}
        total = math.fsum(held_by.values())
        # The quota key of each model (None: only "*" applies), by the rate card's rule.
        keys = [k for k in t.quota if k != ANY]
        key_of = {m: match_model(m, keys) for m in {*models, *held_by} if m}
        # The grants in force, each on the models it names (by the quota keys' rule) and, once, on the total.
        mine = [g for g in grants if g.tenant == t.name]
        named = [(g, [m for m in key_of if match_model(m, [g.gpu_model])]) for g in mine]
        granted = {m: math.fsum(g.gpus for g, ms in named if m in ms) for m in key_of}
        granted_total = math.fsum(g.gpus for g, ms in named if ms)
        capped = {m for m, k in key_of.items() if k or ANY in t.quota}
        # Rows: each model it holds, has its own quota for or a grant on, and one all-models row (gpu_model null).
        extra = {m for m, g in granted.items() if g and m in capped}
        rows_for = sorted({m for m in held_by if m} | {m for m, k in key_of.items() if k} | extra) + [None]
        for model in rows_for:
            key = key_of.get(model) if model else None
            if model is None:
                allocated, quota, cap_on = total, t.quota.get(ANY), total
                more = granted_total
            else:
                allocated = held_by.get(model, 0.0)
                quota = t.quota[key] if key else t.quota.get(ANY)
                cap_on = allocated if key else total  # a "*" quota caps all models together
                more = granted.get(model, 0.0)
            if quota is not None:
                quota = float(quota) + more
            budget = t.budget_usd_per_month
            used = spent.get(t.name, 0.0)
            rows.append(
                {
                    "tenant": t.name,
                    "gpu_model": model,
                    "allocated_gpus": allocated,
                    "quota_gpus": None if quota is None else float(quota),
                    "headroom_gpus": None if quota is None else float(quota) - cap_on,
                    "budget_usd": budget,
                    "spent_usd": used,
                    "budget_left_usd": None if budget is None else budget - used,
                    "budget_used_pct": None if not budget else 100.0 * used / budget,
                    "budget_gpu_h": t.budget_gpu_hours_per_month,
                    "spent_gpu_h": spent_h.get(t.name, 0.0),
                    "usage_decayed_gpu_h": decayed.get(t.name, 0.0),
                    "weight_share": fs[t.name]["weight_share"],
                    "usage_share": fs[t.name]["usage_share"],
                    "fairshare": fs[t.name]["fairshare"],
                    "idle_gpus_now": math.fsum(idle_by.values()) if model is None else idle_by.get(model, 0.0),
                    "computed_at": now,
                }
            )
    return pl.DataFrame(rows, schema_overrides={"computed_at": pl.Datetime("us", "UTC")})
