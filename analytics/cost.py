"""Cost: GPU-hours priced by the rate card, per UTC day, tenant and GPU model, plus the idle capacity line.

cost_daily is cost_allocation (analytics/cost_allocation.py, the FOCUS export's rows) regrouped per tenant and day,
with the GPUs' idle rows shared back, so every cost figure comes from one pricing and one definition of idle time.
The pieces both use live here. Rules (hand-computed tests in tests/analytics/test_cost.py and
tests/finops/test_cost_totals.py):
- Allocation intervals are split at UTC midnight and clipped to the reporting period; each piece is priced at the
  rate in effect while it was held (a rate can change at any instant).
- A share of a GPU is priced by its share: half a GPU for an hour is 0.5 GPU-hours; a 1g MIG slice 1/7.
- Methods: `request` prices what was allocated; `max` prices max(allocated, used) per job, GPU and hour as in
  the OpenCost specification, where a job's use of a GPU in an hour is the GPU's busy fraction times the job's
  part of the shares on that GPU in that hour (so co-located jobs split what they used).
- Idle capacity: each GPU's reported hours that no job held, priced at the same rates. Share-back policies: `none`
  (an idle line with no tenant), `proportional` (to tenants by their cost that day and model), `platform` (to one
  tenant).
- A GPU model with no rate is reported (`unpriced_models`), never priced at zero.

Rate card models match a GPU model by exact name first, else by the longest rate name that appears as words in
the GPU model name (`H100` prices "NVIDIA H100 80GB HBM3"), so a rate card can be written either way: the rule
is `gpuledger.config.match_model`, which quota keys follow too.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import polars as pl

from gpuledger.analytics.sums import exact_sum
from gpuledger.config import Rate


def rate_frame(rates: Iterable[Rate]) -> pl.DataFrame:
    """rate_model, usd_per_gpu_hour, and the interval [rate_from, rate_to) each price is in effect."""
    rows = [(r.gpu_model, r.usd_per_gpu_hour, r.effective_from) for r in rates]
    f = pl.DataFrame(
        rows,
        schema={"rate_model": pl.String, "usd_per_gpu_hour": pl.Float64, "rate_from": pl.Datetime("us", "UTC")},
        orient="row",
    ).sort("rate_model", "rate_from")
    far = dt.datetime(9999, 1, 1, tzinfo=dt.timezone.utc)
    return f.with_columns(pl.col("rate_from").shift(-1).over("rate_model").fill_null(far).alias("rate_to"))


def split_days(allocs: pl.LazyFrame, start: dt.datetime, end: dt.datetime) -> pl.LazyFrame:
    """One row per allocation piece within one UTC day of [start, end): columns date, gpu_hours (x share)."""
    lo = pl.lit(start).dt.cast_time_unit("us")
    hi = pl.lit(end).dt.cast_time_unit("us")
    clipped = allocs.with_columns(
        pl.max_horizontal(pl.col("start"), lo).alias("_s"), pl.min_horizontal(pl.col("end"), hi).alias("_e")
    ).filter(pl.col("_e") > pl.col("_s"))
    days = clipped.with_columns(
        pl.date_ranges(pl.col("_s").dt.date(), (pl.col("_e") - pl.duration(microseconds=1)).dt.date()).alias("date")
    ).explode("date")
    day_start = pl.col("date").cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    piece_s = pl.max_horizontal(pl.col("_s"), day_start)
    piece_e = pl.min_horizontal(pl.col("_e"), day_start + pl.duration(days=1))
    return (
        days.with_columns(piece_s.alias("piece_start"), piece_e.alias("piece_end"))
        .with_columns(
            ((pl.col("piece_end") - pl.col("piece_start")).dt.total_microseconds() / 3.6e9 * pl.col("share")).alias(
                "gpu_hours"
            )
        )
        .drop("_s", "_e")
    )


def cost_daily(
    allocation: pl.DataFrame, idle_policy: str = "proportional", platform_tenant: str | None = None
) -> tuple[pl.DataFrame, list[str]]:
    """Per (cluster, date, tenant, gpu_model): gpu_hours, cost_usd, idle_share_usd; and the unpriced models.

    `allocation` is the cost_allocation table (analytics/cost_allocation.py): jobs' rows (job_id set) and each GPU's
    idle row per charge period. cost_daily only regroups them and shares the idle rows back, so that its totals, and
    every view and page built on it, are the FOCUS export's to the cent: the GPU time and idle capacity are defined
    in one place.
    """
    if idle_policy not in ("none", "proportional", "platform"):
        raise ValueError(f"idle_policy must be none, proportional or platform, got {idle_policy!r}")
    if idle_policy == "platform" and not platform_tenant:
        raise ValueError("idle_policy platform needs the tenant that carries idle cost")
    key = ["cluster", "date", "gpu_model"]
    priced_all = pl.col("cost_usd").is_not_null().all()
    out = (
        allocation.filter(pl.col("job_id").is_not_null())
        .group_by(*key, "tenant")
        .agg(exact_sum(pl.col("gpu_hours")), pl.when(priced_all).then(exact_sum(pl.col("cost_usd"))).alias("cost_usd"))
        .select("cluster", "date", "tenant", "gpu_model", "gpu_hours", "cost_usd")
        # In a fixed order: a group-by's rows come in any order, and the per-model sums below over them differed in
        # the last bit from run to run (so did every idle share, and two runs of one lake wrote different rows).
        .sort(*key, "tenant", nulls_last=True)
    )
    # A job on a GPU nobody named has no idle row, so it never reduces another GPU's idle time.
    idle = (
        allocation.filter(pl.col("job_id").is_null() & pl.col("gpu_uuid").is_not_null())
        .group_by(key)
        .agg(
            exact_sum(pl.col("gpu_hours")).alias("idle_hours"),
            pl.when(priced_all).then(exact_sum(pl.col("cost_usd"))).alias("idle_usd"),
        )
    )
    unpriced = sorted(
        {m for m in out.filter(pl.col("cost_usd").is_null())["gpu_model"] if m}
        | {m for m in idle.filter(pl.col("idle_usd").is_null())["gpu_model"] if m}
    )
    alloc_by_model = out.group_by(key).agg(exact_sum(pl.col("cost_usd")).alias("model_cost"))
    if idle_policy == "proportional":
        shares = out.join(idle.select(*key, "idle_usd"), on=key, how="left", nulls_equal=True).join(
            alloc_by_model, on=key, how="left", nulls_equal=True
        )
        out = shares.with_columns(
            pl.when(pl.col("model_cost") > 0)
            .then(pl.col("idle_usd") * pl.col("cost_usd") / pl.col("model_cost"))
            .otherwise(0.0)
            .fill_null(0.0)
            .alias("idle_share_usd")
        ).drop("idle_usd", "model_cost")
        # A day and model with idle capacity but no allocation at all has nobody to share it with.
        orphan = idle.join(alloc_by_model.select(key), on=key, how="anti", nulls_equal=True)
        out = pl.concat([out, _idle_rows(orphan, None)], how="diagonal_relaxed")
    else:
        out = out.with_columns(pl.lit(0.0).alias("idle_share_usd"))
        out = pl.concat(
            [out, _idle_rows(idle, platform_tenant if idle_policy == "platform" else None)], how="diagonal_relaxed"
        )
        if idle_policy == "platform":
            out = out.group_by("cluster", "date", "tenant", "gpu_model").agg(
                exact_sum(pl.col("gpu_hours")), exact_sum(pl.col("cost_usd")), exact_sum(pl.col("idle_share_usd"))
            )
    return out.sort("date", "gpu_model", "tenant", nulls_last=True), unpriced


def _idle_rows(idle: pl.DataFrame, tenant: str | None) -> pl.DataFrame:
    return idle.filter(pl.col("idle_hours") > 0).select(
        "cluster",
        "date",
        pl.lit(tenant, pl.String).alias("tenant"),
        "gpu_model",
        pl.lit(0.0).alias("gpu_hours"),
        pl.lit(0.0).alias("cost_usd"),
        pl.col("idle_usd").alias("idle_share_usd"),
    )


def _max_of_request_and_use(
    pieces: pl.LazyFrame, usage: pl.LazyFrame, start: dt.datetime, end: dt.datetime
) -> pl.LazyFrame:
    """OpenCost's max(request, usage), per job, GPU and hour. Whole GPUs are never below their use (share 1.0
    >= busy <= 1); a share can be: a quarter-GPU job that kept the GPU 60% busy alone is charged 0.6."""
    hourly = (
        pieces.with_columns(
            pl.datetime_ranges(
                pl.max_horizontal("start", pl.lit(start).dt.cast_time_unit("us")).dt.truncate("1h"),
                pl.min_horizontal("end", pl.lit(end).dt.cast_time_unit("us")) - pl.duration(microseconds=1),
                "1h",
            ).alias("hour")
        )
        .explode("hour")
        .filter(pl.col("hour").dt.date() == pl.col("date"))
    )
    total_share = hourly.group_by("gpu_uuid", "hour").agg(pl.col("share").sum().alias("_shares"))
    joined = hourly.join(total_share, on=["gpu_uuid", "hour"], how="left", maintain_order="left").join(
        usage.select("gpu_uuid", "hour", "busy_ratio"), on=["gpu_uuid", "hour"], how="left", maintain_order="left"
    )
    h_start = pl.max_horizontal(pl.col("start"), pl.col("hour"))
    h_end = pl.min_horizontal(pl.col("end"), pl.col("hour") + pl.duration(hours=1))
    frac = (h_end - h_start).dt.total_microseconds() / 3.6e9
    used = pl.col("busy_ratio").fill_null(0) * pl.col("share") / pl.col("_shares")
    return joined.with_columns(
        (pl.max_horizontal(pl.col("share"), used) * frac).alias("gpu_hours"),
        h_start.alias("piece_start"),
        h_end.alias("piece_end"),
    )


def energy_daily(alloc_hours: pl.LazyFrame, hourly: pl.LazyFrame, usd_per_kwh: float) -> pl.LazyFrame:
    """Energy per (cluster, date, tenant, gpu_model): each GPU-hour's measured energy, split by the shares held.

    A job holding share s of a GPU for a fraction f of an hour in which the GPU used E Wh is charged E x s x f
    (its gpu_hours in that hour times E); energy_usd = kWh x `usd_per_kwh`. The GPU model is the one telemetry
    reports for the GPU, as in cost_allocation, so the rows join cost_daily's.
    """
    return (
        alloc_hours.join(
            hourly.select("gpu_uuid", "hour", "energy_wh", pl.col("model").alias("_seen")),
            on=["gpu_uuid", "hour"],
            how="inner",
            maintain_order="left",  # each group's floats added in one order, run after run
        )
        .with_columns(
            (pl.col("energy_wh") * pl.col("gpu_hours") / 1000).alias("energy_kwh"),
            pl.col("hour").dt.date().alias("date"),
            pl.coalesce("_seen", "gpu_model").alias("gpu_model"),
        )
        # Summed in a fixed order: the join's rows come in any order, and the sums differed in the last bit between
        # two runs of one lake. (A sort inside .agg(), or before a group-by that need not keep order, is optimised
        # away in a lazy query; maintain_order keeps this one.)
        .sort("cluster", "date", "tenant", "gpu_model", "energy_kwh", nulls_last=True)
        .group_by("cluster", "date", "tenant", "gpu_model", maintain_order=True)
        .agg(exact_sum(pl.col("energy_kwh")))
        .with_columns((pl.col("energy_kwh") * usd_per_kwh).alias("energy_usd"))
    )
