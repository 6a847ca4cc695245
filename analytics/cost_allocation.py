"""Split cost allocation: each physical GPU's time in a charge period, priced once, split among the jobs that held it.

This is the grain of the FOCUS export (sql/focus_cost.sql): one *origin charge* per GPU and charge period, and its
*allocated charges*, one per job that held the GPU plus the unallocated (idle) remainder, which sum to it.

- **Charge period**: a UTC day, cut where the GPU model's rate changes (rates change at any instant), so each
  period has a single unit price and every allocated charge of it carries that same price.
- **Origin**: the GPU's GPU-hours in the period, hour by hour: a whole hour for each hour it reported in, plus the
  GPU-hours charged to jobs in the hours it did not report (a GPU whose telemetry had a gap, or had not started yet,
  while a job held it is still charged for the job, and the hours it reported idle stay idle).
- **A job's row**: its GPU-hours on the GPU in the period: share x time (method `request`), or per hour
  max(share, used) as OpenCost does (method `max`, the same rule as analytics/cost.py). A MIG slice is a row
  of its parent GPU (1/7 of it for a 1g slice), with the slice in `slice_uuid`.
- **Idle row**: origin - the jobs' rows (= the reported hours no job held), with no job; one per origin, 0 when the
  jobs held all of it (the FOCUS view rounds quantities to 1e-9 GPU-hours and puts the rounding remainder there, so
  the split sums stay exact).
- A job whose GPU nobody knows (no `gpu_uuid`) has no origin to be split from: its rows have a null GPU.
- A model without a rate is never priced at zero: its price and cost are null (the export refuses it).

Pure functions; IO lives in analytics/runner.py. Hand-computed cases: tests/finops/test_cost_allocation.py.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections.abc import Iterable

import polars as pl

from gpuledger import schema
from gpuledger.analytics.cost import _max_of_request_and_use, rate_frame, split_days
from gpuledger.analytics.gpu_hourly import physical
from gpuledger.analytics.sums import exact_sum
from gpuledger.config import Rate, match_model
from gpuledger.vendors import vendor_expr

UTC = dt.timezone.utc
_US = pl.Datetime("us", "UTC")
_PERIOD_COLS = ("period_end", "gpu_model", "rate_model", "usd_per_gpu_hour", "node")


def charge_periods(models: Iterable[str], rates: Iterable[Rate], start: dt.datetime, end: dt.datetime) -> pl.DataFrame:
    """Per GPU model: the periods [period_start, period_end) of [start, end) cut at UTC midnights and rate changes.

    Columns gpu_model, rate_model, period_start, period_end, usd_per_gpu_hour (null before the model's first rate,
    or when no rate matches the model).
    """
    rf = rate_frame(rates)
    keys = rf["rate_model"].unique().to_list()
    by_rate = {k: rf.filter(pl.col("rate_model") == k).sort("rate_from") for k in keys}
    midnights = []
    day = dt.datetime.combine(start.date(), dt.time(), UTC)
    while day < end:
        if day > start:
            midnights.append(day)
        day += dt.timedelta(days=1)
    rows = []
    # A job with no model still has GPU time: its periods are the days, unpriced.
    for model in sorted(set(models), key=lambda m: (m is None, m or "")):
        rate_model = match_model(model, keys)
        froms, prices = [], []
        if rate_model is not None:
            froms = by_rate[rate_model]["rate_from"].to_list()
            prices = by_rate[rate_model]["usd_per_gpu_hour"].to_list()
        cuts = sorted({start, end, *midnights, *(f for f in froms if start < f < end)})
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            k = bisect.bisect_right(froms, a) - 1
            rows.append((model, rate_model, a, b, prices[k] if k >= 0 else None))
    return pl.DataFrame(
        rows,
        schema={
            "gpu_model": pl.String,
            "rate_model": pl.String,
            "period_start": _US,
            "period_end": _US,
            "usd_per_gpu_hour": pl.Float64,
        },
        orient="row",
    )


def _lit(t: dt.datetime) -> pl.Expr:
    return pl.lit(t).dt.cast_time_unit("us")


def _overlap_h(a_start: str, a_end: str, b_start: str, b_end: str) -> pl.Expr:
    return (pl.min_horizontal(a_end, b_end) - pl.max_horizontal(a_start, b_start)).dt.total_microseconds().clip(
        lower_bound=0
    ) / 3.6e9


_SEEN = {"parent_gpu_uuid": "parent_gpu_uuid", "model": "gpu_model_seen", "node": "gpu_node"}


def gpu_attributes(hourly: pl.LazyFrame) -> pl.DataFrame:
    """Per GPU or MIG UUID in `hourly`: for each of parent GPU, model and node, the last value seen and its hour."""
    h = hourly.select("gpu_uuid", "hour", *_SEEN).collect()
    out = h.select("gpu_uuid").unique()
    for col, name in _SEEN.items():
        last = (
            h.filter(pl.col(col).is_not_null())
            .sort("hour")
            .group_by("gpu_uuid")
            .agg(pl.col(col).last().alias(name), pl.col("hour").last().alias(f"{name}_hour"))
        )
        out = out.join(last, on="gpu_uuid", how="left")
    return out


def gpus_seen(before: pl.DataFrame | None, days: list[pl.DataFrame]) -> pl.DataFrame:
    """gpu_attributes of more hours merged into `before`'s: the later value of each attribute wins (a day seen
    again replaces what it said before, later days what earlier ones said)."""
    frames = [f for f in ([before] if before is not None else []) + days if f.height]
    if not frames:
        cols = {"gpu_uuid": pl.String}
        for name in _SEEN.values():
            cols |= {name: pl.String, f"{name}_hour": _US}
        return pl.DataFrame(schema=cols)
    allf = pl.concat(frames, how="vertical_relaxed").with_row_index("_k")
    out = allf.select("gpu_uuid").unique()
    for name in _SEEN.values():
        last = (
            allf.filter(pl.col(name).is_not_null())
            .sort(f"{name}_hour", "_k")
            .group_by("gpu_uuid")
            .agg(pl.col(name).last(), pl.col(f"{name}_hour").last())
        )
        out = out.join(last, on="gpu_uuid", how="left")
    return out.sort("gpu_uuid")


def _gpus(hourly: pl.LazyFrame, seen: pl.LazyFrame | None = None) -> pl.LazyFrame:
    """Per GPU or MIG UUID seen in telemetry: the physical GPU it is on, its model and node (latest seen).
    `seen`: gpus_seen's frame, when the caller keeps it across runs rather than reading all of gpu_hourly."""
    if seen is None:
        seen = gpu_attributes(hourly).lazy()
    return seen.select("gpu_uuid", *_SEEN.values()).with_columns(
        pl.coalesce("parent_gpu_uuid", "gpu_uuid").alias("resource_uuid")
    )


def _in_periods(frame: pl.LazyFrame, periods: pl.DataFrame, model: str, start: str, end: str) -> pl.LazyFrame:
    """Each row of `frame` (an interval [start, end) within one UTC day, of GPU model `model`) cut by the periods of
    its model and day; `_h` is the overlap in hours."""
    p = periods.lazy().with_columns(pl.col("period_start").dt.date().alias("_day"))
    return (
        frame.with_columns(pl.col(start).dt.date().alias("_day"))
        .join(
            p,
            left_on=[model, "_day"],
            right_on=["gpu_model", "_day"],
            how="inner",
            nulls_equal=True,
            maintain_order="left",
        )
        .with_columns(_overlap_h(start, end, "period_start", "period_end").alias("_h"))
        .filter(pl.col("_h") > 0)
    )


def cost_allocation(
    allocs: pl.LazyFrame,
    hourly: pl.LazyFrame,
    rates: Iterable[Rate],
    start: dt.datetime,
    end: dt.datetime,
    method: str = "request",
    seen: pl.LazyFrame | None = None,
) -> pl.DataFrame:
    """The rows of the cost_allocation table for [start, end) (see the module docstring).

    `seen`: each GPU's model, node and parent as telemetry last reported them (gpus_seen), else read from `hourly`."""
    if method not in ("request", "max"):
        raise ValueError(f"method must be request or max, got {method!r}")
    rates = list(rates)
    gpus = _gpus(hourly, seen)
    # A job's GPU: the physical one (a MIG slice's parent), priced by the model telemetry saw on it, else the job's.
    a = (
        allocs.join(gpus, on="gpu_uuid", how="left", maintain_order="left")
        .with_columns(
            pl.coalesce("resource_uuid", "gpu_uuid").alias("resource_uuid"),  # null: no GPU named
            pl.when(pl.col("resource_uuid").is_not_null() & (pl.col("resource_uuid") != pl.col("gpu_uuid")))
            .then(pl.col("gpu_uuid"))
            .alias("slice_uuid"),
            pl.coalesce("gpu_model_seen", "gpu_model").alias("gpu_model"),
            pl.coalesce("gpu_node", "node").alias("node"),
        )
        .drop("parent_gpu_uuid", "gpu_model_seen", "gpu_node")
    )
    pieces = split_days(a, start, end)
    if method == "max":
        pieces = _max_of_request_and_use(pieces, hourly.select("gpu_uuid", "hour", "busy_ratio"), start, end)
    # GPU-equivalents held over the piece (share, or max(share, used) for the hour), times the overlap with a period.
    piece_h = (pl.col("piece_end") - pl.col("piece_start")).dt.total_microseconds() / 3.6e9
    pieces = pieces.with_columns((pl.col("gpu_hours") / piece_h).alias("_gpus"))
    models = set(pieces.select("gpu_model").unique().collect()["gpu_model"].to_list())
    # The capacity whose unallocated hours are idle: each physical GPU's hours, a GPU known by its partitions only
    # (AMD CPX) included (gpu_hourly.physical, the rule fleet_hourly counts supply by).
    window = (pl.col("hour") + pl.duration(hours=1) > _lit(start)) & (pl.col("hour") < _lit(end))
    cap = physical(hourly.filter(window)).select(
        "cluster",
        "gpu_uuid",
        pl.col("model").alias("gpu_model"),
        "node",
        pl.col("hour").alias("_s"),
        (pl.col("hour") + pl.duration(hours=1)).alias("_e"),
    )
    models |= set(cap.select("gpu_model").unique().collect()["gpu_model"].to_list())
    periods = charge_periods(models, rates, start, end)

    jobs = (
        _in_periods(pieces, periods, "gpu_model", "piece_start", "piece_end")
        .group_by("cluster", "resource_uuid", "period_start", "job_id", "slice_uuid")
        .agg(
            exact_sum(pl.col("_gpus") * pl.col("_h")).alias("gpu_hours"),
            *[pl.col(c).first() for c in (*_PERIOD_COLS, "tenant", "namespace", "pod")],
        )
        .rename({"resource_uuid": "gpu_uuid"})
        .collect()
        # Sorted: the per-GPU sums below add the jobs' floats in one order, run after run.
        .sort("cluster", "gpu_uuid", "period_start", "job_id", "slice_uuid", nulls_last=True)
    )
    reported = (
        _in_periods(cap, periods, "gpu_model", "_s", "_e")
        .group_by("cluster", "gpu_uuid", "period_start")
        .agg(
            exact_sum(pl.col("_h")).alias("reported_h"),
            *[pl.col(c).first() for c in _PERIOD_COLS],
        )
        .collect()
        .sort("cluster", "gpu_uuid", "period_start")
    )
    key = ["cluster", "gpu_uuid", "period_start"]
    on_gpus = jobs.filter(pl.col("gpu_uuid").is_not_null())
    charged = (
        on_gpus.group_by(key)
        .agg(exact_sum(pl.col("gpu_hours")).alias("_jobs_h"))
        .join(_charged_while_reporting(pieces, periods, cap), on=key, how="left")
    )
    origin_cols = ["period_end", "gpu_model", "rate_model", "usd_per_gpu_hour", "node"]
    origins = (
        pl.concat(
            [
                reported.select(*key, *origin_cols),
                # A GPU charged in a period it never reported in still has an origin: take its attributes from the jobs.
                on_gpus.select(*key, *origin_cols),
            ]
        )
        .unique(subset=key, keep="first", maintain_order=True)
        .join(reported.select(*key, "reported_h"), on=key, how="left")
        .join(charged, on=key, how="left")
        .with_columns(
            # Hour by hour, max(reported, held): the reported hours plus what jobs held outside them. The outer max
            # only matters for shares summing above one GPU (an over-committed GPU is charged what was held).
            pl.max_horizontal(
                pl.col("reported_h").fill_null(0.0)
                + pl.col("_jobs_h").fill_null(0.0)
                - pl.col("_jobs_reported_h").fill_null(0.0),
                pl.col("_jobs_h").fill_null(0.0),
            ).alias("origin_gpu_hours")
        )
    )
    idle = origins.with_columns((pl.col("origin_gpu_hours") - pl.col("_jobs_h").fill_null(0.0)).alias("gpu_hours"))
    out = pl.concat(
        [
            jobs.join(origins.select(*key, "origin_gpu_hours"), on=key, how="left"),
            idle.select(*key, *origin_cols, "origin_gpu_hours", "gpu_hours"),
        ],
        how="diagonal_relaxed",
    )
    out = exact_quantities(out)
    return (
        out.with_columns(
            (pl.col("gpu_hours") * pl.col("usd_per_gpu_hour")).alias("cost_usd"),
            pl.lit(method).alias("method"),
            pl.col("period_start").dt.date().alias("date"),
            vendor_expr("gpu_model", None),  # FOCUS x_GpuVendor; the rate card names models, not vendors
        )
        .select(
            "period_start",
            "period_end",
            "cluster",
            "gpu_uuid",
            "node",
            "gpu_model",
            "rate_model",
            "usd_per_gpu_hour",
            "origin_gpu_hours",
            "gpu_hours",
            "cost_usd",
            "charge_gpu_hours",
            "origin_charge_gpu_hours",
            "job_id",
            "tenant",
            "namespace",
            "pod",
            "slice_uuid",
            "method",
            "vendor",
            "date",
        )
        .sort("period_start", "gpu_uuid", "job_id", "slice_uuid", "cluster", nulls_last=True)
    )


def _charged_while_reporting(pieces: pl.LazyFrame, periods: pl.DataFrame, cap: pl.LazyFrame) -> pl.DataFrame:
    """Per (cluster, gpu_uuid, period_start): the jobs' GPU-hours on the physical GPU within the hours it reported
    in. Reported hours are taken as runs of consecutive hours, so a GPU that reports steadily is one interval."""
    runs = (
        cap.select("cluster", "gpu_uuid", "_s", "_e")
        .unique()
        .sort("cluster", "gpu_uuid", "_s")
        .with_columns(
            (pl.col("_s") != pl.col("_e").shift(1).over("cluster", "gpu_uuid"))
            .fill_null(True)
            .cum_sum()
            .over("cluster", "gpu_uuid")
            .alias("_run")
        )
        .group_by("cluster", "gpu_uuid", "_run")
        .agg(pl.col("_s").min().alias("_rs"), pl.col("_e").max().alias("_re"))
    )
    held = _in_periods(
        pieces.filter(pl.col("resource_uuid").is_not_null()), periods, "gpu_model", "piece_start", "piece_end"
    ).with_columns(
        pl.max_horizontal("piece_start", "period_start").alias("_hs"),
        pl.min_horizontal("piece_end", "period_end").alias("_he"),
    )
    return (
        held.join(
            runs.sort("cluster", "gpu_uuid", "_run"),
            left_on=["cluster", "resource_uuid"],
            right_on=["cluster", "gpu_uuid"],
            how="inner",
            maintain_order="left_right",
        )
        .with_columns(_overlap_h("_hs", "_he", "_rs", "_re").alias("_in_run_h"))
        .group_by("cluster", "resource_uuid", "period_start")
        .agg(exact_sum(pl.col("_gpus") * pl.col("_in_run_h")).alias("_jobs_reported_h"))
        .rename({"resource_uuid": "gpu_uuid"})
        .collect()
    )


def exact_quantities(rows: pl.DataFrame) -> pl.DataFrame:
    """Add charge_gpu_hours and origin_charge_gpu_hours: the FOCUS export's quantities, as exact decimals.

    Each job's GPU-hours to 1e-9; the idle row (no job) is the origin minus the jobs' rounded hours, so the rows of
    one origin (cluster, GPU, period) sum to it exactly, with no tolerance. Computed here rather than in the
    focus_cost view: a window over every charge made the view 3x slower.
    """
    exact = schema.GPU_HOURS_EXACT
    key = ["cluster", "gpu_uuid", "period_start"]
    jobs_q = pl.col("_q").filter(pl.col("job_id").is_not_null()).sum().over(key)
    origin_q = pl.max_horizontal(pl.col("origin_gpu_hours").round(9).cast(exact), jobs_q)
    return (
        rows.with_columns(pl.col("gpu_hours").round(9).cast(exact).alias("_q"))
        .with_columns(
            pl.when(pl.col("job_id").is_null())
            .then(origin_q - jobs_q)
            .otherwise(pl.col("_q"))
            .cast(exact)
            .alias("charge_gpu_hours"),
            pl.when(pl.col("gpu_uuid").is_not_null()).then(origin_q).cast(exact).alias("origin_charge_gpu_hours"),
        )
        .drop("_q")
    )
