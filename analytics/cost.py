"""Cost: GPU-hours priced by the rate card, per UTC day, tenant and GPU model, plus the idle capacity line.

Rules (each has a hand-computed test in tests/analytics/test_cost.py):
- Allocation intervals are split at UTC midnight and clipped to the reporting period; each day's piece is
  priced at the rate in effect that day (rates change at midnight: `effective_from` is a date).
- A share of a GPU is priced by its share: half a GPU for an hour is 0.5 GPU-hours; a 1g MIG slice 1/7.
- Methods: `request` prices what was allocated; `max` prices max(allocated, used) per job, GPU and hour as in
  the OpenCost specification, where a job's use of a GPU in an hour is the GPU's busy fraction times the job's
  part of the shares on that GPU in that hour (so co-located jobs split what they used).
- Idle capacity: fleet GPU-hours not allocated, priced at the same rates. Share-back policies: `none` (an idle
  line with no tenant), `proportional` (to tenants by their cost that day and model), `platform` (to one tenant).
- A GPU model with no rate is reported (`unpriced_models`), never priced at zero.

Rate card models match a GPU model by exact name first, else by the longest rate name that appears as words in
the GPU model name (`H100` prices "NVIDIA H100 80GB HBM3"), so a rate card can be written either way.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable

import polars as pl

from gpuledger.config import Rate

DAY_US = 86_400_000_000


def match_model(model: str | None, rate_models: Iterable[str]) -> str | None:
    if model is None:
        return None
    keys = list(rate_models)
    if model in keys:
        return model
    words = f" {re.sub(r'[^a-z0-9.]+', ' ', model.lower())} "
    hits = [k for k in keys if f" {re.sub(r'[^a-z0-9.]+', ' ', k.lower()).strip()} " in words]
    return max(hits, key=len) if hits else None


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


def _rate_models(frame: pl.LazyFrame, rates: pl.DataFrame) -> pl.LazyFrame:
    models = frame.select("gpu_model").unique().collect()["gpu_model"].to_list()
    keys = rates["rate_model"].unique().to_list()
    mapping = pl.DataFrame(
        {"gpu_model": models, "rate_model": [match_model(m, keys) for m in models]},
        schema={"gpu_model": pl.String, "rate_model": pl.String},
    )
    return frame.join(mapping.lazy(), on="gpu_model", how="left")


def _priced(pieces: pl.LazyFrame, rates: pl.DataFrame) -> pl.LazyFrame:
    """Price each piece by every rate in effect during it: a price that changes at 12:00 prices the morning at
    the old rate and the afternoon at the new one. A piece's GPU-equivalents (gpu_hours / its length) times
    the overlap with each rate's interval times that price. Time before a model's first rate is unpriced: its
    cost is null, never zero."""
    hours = (pl.col("piece_end") - pl.col("piece_start")).dt.total_microseconds() / 3.6e9
    p = _rate_models(pieces, rates).with_columns(
        pl.int_range(pl.len()).alias("_piece"), (pl.col("gpu_hours") / hours).alias("_gpus")
    )
    overlap_h = (
        pl.min_horizontal("piece_end", "rate_to") - pl.max_horizontal("piece_start", "rate_from")
    ).dt.total_microseconds().clip(lower_bound=0) / 3.6e9
    costed = (
        p.join(rates.lazy(), on="rate_model", how="left")
        # min/max_horizontal skip nulls, so a model without a rate must be zeroed explicitly, not left to them.
        .with_columns(pl.when(pl.col("rate_from").is_not_null()).then(overlap_h).otherwise(0.0).alias("_h"))
        .group_by("_piece")
        .agg(
            (pl.col("_h") * pl.col("_gpus") * pl.col("usd_per_gpu_hour")).sum().alias("_cost"),
            (pl.col("_h") * pl.col("_gpus")).sum().alias("_priced_h"),
        )
    )
    return (
        p.join(costed, on="_piece", how="left")
        .with_columns(
            pl.when(pl.col("_priced_h") >= pl.col("gpu_hours") * (1 - 1e-9)).then(pl.col("_cost")).alias("cost_usd")
        )
        .drop("_piece", "_gpus", "_cost", "_priced_h")
    )


def cost_daily(
    allocs: pl.LazyFrame,
    capacity: pl.LazyFrame,
    rates: Iterable[Rate],
    start: dt.datetime,
    end: dt.datetime,
    idle_policy: str = "proportional",
    platform_tenant: str | None = None,
    usage: pl.LazyFrame | None = None,
    method: str = "request",
) -> tuple[pl.DataFrame, list[str]]:
    """Per (cluster, date, tenant, gpu_model): gpu_hours, cost_usd, idle_share_usd; and the unpriced models.

    `capacity`: (cluster, date, gpu_model, gpu_hours) the fleet could give. `usage` (method max): (gpu_uuid,
    hour, busy_ratio) per GPU-hour, e.g. from gpu_hourly.
    """
    if idle_policy not in ("none", "proportional", "platform"):
        raise ValueError(f"idle_policy must be none, proportional or platform, got {idle_policy!r}")
    if idle_policy == "platform" and not platform_tenant:
        raise ValueError("idle_policy platform needs the tenant that carries idle cost")
    rf = rate_frame(rates)
    pieces = split_days(allocs, start, end)
    if method == "max" and usage is not None:
        pieces = _max_of_request_and_use(pieces, usage, start, end)
    elif method not in ("request", "max"):
        raise ValueError(f"method must be request or max, got {method!r}")
    priced = (
        _priced(pieces, rf)
        .group_by("cluster", "date", "tenant", "gpu_model")
        .agg(
            pl.col("gpu_hours").sum(),
            pl.when(pl.col("cost_usd").is_not_null().all()).then(pl.col("cost_usd").sum()).alias("cost_usd"),
        )
        .collect()
    )
    unpriced = sorted({m for m in priced.filter(pl.col("cost_usd").is_null())["gpu_model"] if m})
    alloc_by_model = priced.group_by("cluster", "date", "gpu_model").agg(
        pl.col("gpu_hours").sum().alias("allocated"), pl.col("cost_usd").sum().alias("model_cost")
    )
    # Idle capacity is priced at the day's time-weighted rate (one GPU priced over the whole day, / 24).
    cap = capacity.filter(pl.col("date").is_between(start.date(), (end - dt.timedelta(microseconds=1)).date()))
    day_start = pl.col("date").cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    day_rate = _priced(
        cap.select("cluster", "date", "gpu_model")
        .unique()
        .with_columns(
            day_start.alias("piece_start"),
            (day_start + pl.duration(days=1)).alias("piece_end"),
            pl.lit(24.0).alias("gpu_hours"),
        ),
        rf,
    ).select("cluster", "date", "gpu_model", (pl.col("cost_usd") / 24).alias("usd_per_gpu_hour"))
    idle = (
        cap.join(day_rate, on=["cluster", "date", "gpu_model"], how="left")
        .collect()
        .join(alloc_by_model, on=["cluster", "date", "gpu_model"], how="left")
        .with_columns((pl.col("gpu_hours") - pl.col("allocated").fill_null(0)).clip(lower_bound=0).alias("idle_hours"))
        .with_columns((pl.col("idle_hours") * pl.col("usd_per_gpu_hour")).alias("idle_usd"))
    )
    unpriced = sorted(set(unpriced) | {m for m in idle.filter(pl.col("usd_per_gpu_hour").is_null())["gpu_model"] if m})
    out = priced.select("cluster", "date", "tenant", "gpu_model", "gpu_hours", "cost_usd")
    key = ["cluster", "date", "gpu_model"]
    if idle_policy == "proportional":
        shares = out.join(idle.select(*key, "idle_usd"), on=key, how="left").join(
            alloc_by_model.select(*key, "model_cost"), on=key, how="left"
        )
        out = shares.with_columns(
            pl.when(pl.col("model_cost") > 0)
            .then(pl.col("idle_usd") * pl.col("cost_usd") / pl.col("model_cost"))
            .otherwise(0.0)
            .fill_null(0.0)
            .alias("idle_share_usd")
        ).drop("idle_usd", "model_cost")
        # A day and model with idle capacity but no allocation at all has nobody to share it with.
        orphan = idle.join(alloc_by_model.select(key), on=key, how="anti")
        out = pl.concat([out, _idle_rows(orphan, None)], how="diagonal_relaxed")
    else:
        out = out.with_columns(pl.lit(0.0).alias("idle_share_usd"))
        out = pl.concat(
            [out, _idle_rows(idle, platform_tenant if idle_policy == "platform" else None)], how="diagonal_relaxed"
        )
        if idle_policy == "platform":
            out = out.group_by("cluster", "date", "tenant", "gpu_model").agg(
                pl.col("gpu_hours").sum(), pl.col("cost_usd").sum(), pl.col("idle_share_usd").sum()
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
    joined = hourly.join(total_share, on=["gpu_uuid", "hour"], how="left").join(
        usage.select("gpu_uuid", "hour", "busy_ratio"), on=["gpu_uuid", "hour"], how="left"
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
    (its gpu_hours in that hour times E); energy_usd = kWh x `usd_per_kwh`.
    """
    return (
        alloc_hours.join(hourly.select("gpu_uuid", "hour", "energy_wh"), on=["gpu_uuid", "hour"], how="inner")
        .with_columns(
            (pl.col("energy_wh") * pl.col("gpu_hours") / 1000).alias("energy_kwh"),
            pl.col("hour").dt.date().alias("date"),
        )
        .group_by("cluster", "date", "tenant", "gpu_model")
        .agg(pl.col("energy_kwh").sum())
        .with_columns((pl.col("energy_kwh") * usd_per_kwh).alias("energy_usd"))
    )
