"""How the dashboards write numbers, units, times and periods: one registry, column name -> (label, unit).

Every table header, KPI unit and axis title reads from here, so a quantity looks the same on every page:

| quantity | shown as | from |
|---|---|---|
| GPUs (counts, means, fractions of a GPU) | `12.5 GPUs` | as stored |
| GPU-hours | `1,234.5 GPU-h` | as stored |
| money | `1,234.50 USD` | as stored |
| shares | `12.3 %` | percent columns as stored, fractions (efficiency, frag_rate) x 100 |
| waits (queue time) | `90.0 min`: minutes everywhere | `*_s` seconds / 60, `*_min` as stored |
| run, hold and idle durations | `1.5 h`: hours everywhere | `*_s` seconds / 3600, `*_h` as stored |
| counts (jobs, events, requests) | `1,234` | as stored |
| times | `2026-11-01 14:00 UTC` | UTC always |

A column's unit scales its values for the grid (dashboards/ui.py `table`): the grid holds the shown number (minutes
for a wait), formatted by its d3 format in the browser, so sorting stays numeric and the CSV export has the same
number the header's unit names. A column not in REGISTRY is drawn with its raw name and logged; the dashboards'
tests fail on it (tests/dashboards/test_format.py walks every table of every page).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Unit:
    symbol: str  # after the label, in brackets: "GPU-h"; "" for a count or a name
    d3: str | None  # the grid's number format (d3-format, the same syntax as Python's format spec); None: not a number
    scale: float = 1.0  # stored value x scale = the shown value (seconds -> minutes: 1/60)
    bar: bool = False  # drawn as a bar inside its cell (a share of a limit: 100 % fills it, more turns it red)


GPUS = Unit("GPUs", ",.1f")
GPU_H = Unit("GPU-h", ",.1f")
USD = Unit("USD", ",.2f")
USD_PER_GPU_H = Unit("USD/GPU-h", ",.2f")
PCT = Unit("%", ",.1f")
FRACTION_PCT = Unit("%", ",.1f", 100.0)  # a fraction (0..1) shown as a percentage
PCT_OF_LIMIT = Unit("%", ",.0f", bar=True)
WAIT_S = Unit("min", ",.1f", 1 / 60)  # waits: minutes everywhere
WAIT_MIN = Unit("min", ",.1f")
DURATION_S = Unit("h", ",.1f", 1 / 3600)  # run, hold and idle times: hours everywhere
DURATION_H = Unit("h", ",.1f")
COUNT = Unit("", ",.0f")
RATIO = Unit("", ",.2f")  # a factor or a ratio: no unit
MS = Unit("ms", ",.1f")
KWH = Unit("kWh", ",.1f")
GIB = Unit("GiB", ",.1f")
WATT = Unit("W", ",.0f")
SHARE = Unit("of a GPU", ",.2f")  # 1 whole, 0.5 half, 0.14 a 1g MIG slice of 7
TEXT = Unit("", None)
UTC = Unit("UTC", None)  # a time: written YYYY-MM-DD HH:MM, the header says UTC
DAY = Unit("UTC", None)  # a UTC day, YYYY-MM-DD


@dataclass(frozen=True)
class Col:
    label: str
    unit: Unit = TEXT

    @property
    def header(self) -> str:
        if not self.unit.symbol or self.label == self.unit.symbol:  # "GPUs", not "GPUs (GPUs)"
            return self.label
        return f"{self.label} ({self.unit.symbol})"


def _cols(unit: Unit, **labels: str) -> dict[str, Col]:
    return {name: Col(label, unit) for name, label in labels.items()}


# column name (as the pages' queries and the analytics' tables name it) -> how it is shown
REGISTRY: dict[str, Col] = {
    **_cols(
        TEXT,
        cluster="Cluster",
        tenant="Tenant",
        gpu_model="GPU model",
        node="Node",
        job_id="Job",
        namespace="Namespace",
        pod="Pod",
        kind="Kind",
        name="Name",
        status="Status",
        policy="Policy",
        mode="Mode",
        decision="Decision",
        reason="Reason",
        variant="Variant",
        method="Forecast method",
        size_bucket="Job size (GPUs)",
        workload_class="Workload class",
        queue="Queue",
        gpu_uuid="GPU",
        parent_gpu_uuid="Physical GPU",
        model="GPU model",
        vendor="Vendor",
        gpu_models="GPU models",
        bit="Bit",
        detail="Detail",
        open="Still held",
        mig_profile="MIG profile",
        request_id="Request",
        state="State",
        requested_by="Asked by",
        decided_by="Decided by",
        note="Note",
        action="Step",
        actor="By",
    ),
    **_cols(
        GPUS,
        gpus="GPUs",
        supply_gpus="Supply",
        demand_gpus="Demand",
        allocated_gpus="Allocated",
        busy_gpus="Busy",
        pending_gpus="Asked for by waiting jobs",
        free_gpus="Free",
        fragmented_gpus="Fragmented",
        peak_allocated_gpus="Peak allocated",
        peak_demand_gpus="Peak demand",
        mean_allocated_gpus="Mean allocated",
        allocated_gpus_mean="Mean allocated",
        busy_gpus_mean="Mean busy",
        allocated_gpus_now="Allocated now",
        idle_gpus_now="Idle now",
        idle_gpus="Idle",
        quota_gpus="Quota",
        headroom_gpus="Headroom",
        stranded_1gpu="Stranded for 1-GPU jobs",
        stranded_2gpu="Stranded for 2-GPU jobs",
        stranded_4gpu="Stranded for 4-GPU jobs",
        stranded_8gpu="Stranded for 8-GPU jobs",
        gpu_count="GPUs",
        gpus_mean="Mean GPUs",
        gpus_reporting="GPUs reporting",
    ),
    **_cols(
        GPU_H,
        gpu_hours="GPU time",
        idle_gpu_hours="Idle",
        allocated_gpu_hours="Allocated",
        busy_gpu_hours="Busy",
    ),
    **_cols(
        USD,
        cost_usd="Own jobs' cost",
        idle_share_usd="Idle capacity share",
        total_usd="Total cost",
        idle_cost_usd="Cost of idle GPU-hours",
        spent_usd="Spent",
        budget_usd="Monthly budget",
    ),
    **_cols(USD_PER_GPU_H, usd_per_gpu_hour="Price"),
    **_cols(Unit("GPU-h/day", ",.1f"), gpu_hours_freed_per_day="Given back"),
    **_cols(Unit("USD/day", ",.2f"), usd_per_day="Its cost"),
    **_cols(GPU_H, freed_gpu_hours="Would have been freed"),
    **_cols(DURATION_H, idle_after_h="Rule: reclaim after"),
    **_cols(COUNT, actions="Actions"),
    **_cols(DAY, month="Month"),
    **_cols(
        PCT,
        mean_allocation_pct="Mean allocation",
        peak_demand_pct_of_supply="Peak demand, share of supply",
        allocation_pct="Allocation",
        efficiency_pct="Busy share of allocated",
        idle_pct_of_allocated="Idle share of allocated",
        frag_rate_pct="Fragmentation rate",
        budget_used_pct="Budget used",
        backtest_wape_pct="WAPE",
        baseline_wape_pct="Baseline WAPE",
        backtest_mape_pct="MAPE",
        allocated_pct="Allocated share",
        busy_pct_of_allocated="Busy share of allocated",
        util_gpu_pct_mean="Mean utilization",
        sm_active_pct_mean="Mean SM activity",
        pct_of_samples="Share of samples",
        clocks_limited_pct="Clocks held down",
    ),
    **_cols(FRACTION_PCT, efficiency="Busy share of allocated", frag_rate="Fragmentation rate"),
    **_cols(PCT_OF_LIMIT, quota_used_pct="Used of quota"),
    **_cols(WAIT_S, queue_s="Wait", wait_mean_s="Mean wait", wait_p50_s="Median wait", wait_p90_s="p90 wait"),
    **_cols(
        WAIT_MIN,
        wait_p90_min="p90 wait",
        longest_wait_min="Longest wait",
        p10="Wait p10",
        p25="Wait p25",
        p50="Wait median",
        p75="Wait p75",
        p90="Wait p90",
        mean="Mean wait",
    ),
    **_cols(DURATION_S, run_s="Run time", held_s="Held", idle_s="Idle for"),
    **_cols(DURATION_H, idle_h="Idle for"),
    **_cols(
        COUNT,
        jobs="Jobs",
        events="Events",
        nodes="Nodes",
        decisions="Decisions",
        pending_jobs="Waiting jobs",
        pending_jobs_max="Waiting jobs (hour's max)",
        unplaceable_jobs="Jobs that no longer fit",
        history_days="History (days)",
        samples="Samples",
        code="Code",
        gpu_index="Index",
    ),
    **_cols(
        RATIO,
        expansion="Expansion factor",
        expansion_mean="Mean expansion factor",
        expansion_p90="p90 expansion factor",
        backtest_mase="MASE",
        baseline_mase="Baseline MASE",
        fairshare="Fair-share factor",
    ),
    **_cols(MS, latency_p99_ms="p99 latency"),
    **_cols(KWH, energy_kwh="Energy"),
    **_cols(GIB, gpu_mem_gib="GPU memory", mem_used_gib_max="Peak memory used"),
    **_cols(WATT, power_w_mean="Mean power"),
    **_cols(Unit("°C", ",.0f"), temp_c_max="Peak temperature"),
    **_cols(SHARE, share="Share held"),
    **_cols(
        UTC,
        ts="Time",
        t="Time",
        hour="Hour",
        submitted_at="Submitted",
        scheduled_at="Scheduled",
        finished_at="Finished",
        idle_since="Idle since",
        computed_at="Computed",
        start="From",
        end="To",
        first="First seen",
        last="Last seen",
        first_seen="First seen",
        last_seen="Last seen",
        requested_at="Asked",
        decided_at="Decided",
        valid_from="In force from",
        valid_until="Until",
    ),
    **_cols(
        DAY,
        day="Day",
        date="Day",
        exceeds_supply_day="Demand exceeds supply on",
        exceeds_supply_earliest_day="As early as (80 % band)",
        exceeds_supply_latest_day="At the latest (80 % band)",
    ),
}


def col(name: str) -> Col:
    """How column `name` is shown; an unregistered one keeps its raw name (and is logged: the tests fail on it)."""
    found = REGISTRY.get(name)
    if found is None:
        log.warning("dashboards: column %r has no label in dashboards/format.py REGISTRY", name)
        return Col(name)
    return found


def header(name: str) -> str:
    """The table header (and axis title) of column `name`: its label and unit, e.g. "Wait (min)"."""
    return col(name).header


# -- numbers as text (KPI cards, sentences); the same formats as the grid's ----------------------------------------
def number(value: float | int | None, spec: str = ",.0f") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return format(value, spec)


def shown(name: str, value: float | int | None) -> str:
    """`value` of column `name` as its table cell and unit show it: shown("queue_s", 5400) -> "90.0 min"."""
    c = col(name)
    if c.unit.d3 is None or value is None:
        return "—" if value is None else str(value)
    text = number(value * c.unit.scale, c.unit.d3)
    return f"{text} {c.unit.symbol}" if c.unit.symbol else text


def usd(value: float | None) -> str:
    """1234.5 -> "1,234.50 USD"."""
    return "—" if value is None else f"{number(value, USD.d3)} USD"


def gpu_hours(value: float | None) -> str:
    return "—" if value is None else f"{number(value, GPU_H.d3)} GPU-h"


def pct(value: float | None) -> str:
    return "—" if value is None else f"{number(value, PCT.d3)} %"


def wait(seconds: float | None) -> str:
    """A wait, in minutes everywhere: 5400 -> "90.0 min"."""
    return "—" if seconds is None else f"{number(seconds / 60, WAIT_S.d3)} min"


def duration(seconds: float | None) -> str:
    """A run, hold or idle time, in hours everywhere: 5400 -> "1.5 h"."""
    return "—" if seconds is None else f"{number(seconds / 3600, DURATION_S.d3)} h"


def utc(t: dt.datetime | None) -> str:
    """A time as every page writes it: 2026-11-01 14:00 UTC."""
    if t is None:
        return "—"
    if t.tzinfo is not None:
        t = t.astimezone(dt.timezone.utc)
    return f"{t:%Y-%m-%d %H:%M} UTC"


# -- periods: a month or range that the data does not cover to its end says so --------------------------------------
def _next_month(month: dt.date) -> dt.date:
    return (month.replace(day=28) + dt.timedelta(days=4)).replace(day=1)


def month(month_start: dt.date, data_to: dt.datetime | None, data_from: dt.date | None = None) -> str:
    """The month `month_start` as a KPI names it: "2026-10", or "2026-11 to 3 Nov 14:00 UTC (partial)" when the
    figures (`data_to`, the end of the last analysed hour) stop before the month ends, or "2026-09 from 28 Sep
    (partial)" when they start after it began (`data_from`, the first day with data)."""
    end = dt.datetime.combine(_next_month(month_start), dt.time(), dt.timezone.utc)
    before = data_to is not None and data_to <= dt.datetime.combine(month_start, dt.time(), dt.timezone.utc)
    if before or (data_from is not None and data_from >= end.date()):
        return f"{month_start:%Y-%m} (no data)"
    parts = []
    if data_from is not None and data_from > month_start:
        parts.append(f"from {data_from.day} {data_from:%b}")
    if data_to is not None and data_to < end:
        parts.append(f"to {data_to.day} {data_to:%b %H:%M} UTC")
    return f"{month_start:%Y-%m} {' '.join(parts)} (partial)" if parts else f"{month_start:%Y-%m}"


def period(start: dt.date, end: dt.date, data_to: dt.datetime | None) -> str:
    """A range of UTC days, "2026-10-03 to 2026-11-01", with "(last day partial, to 14:00 UTC)" when the figures
    stop inside its last day (or "(no data after ...)" before it)."""
    text = f"{start} to {end}" if start != end else f"{start}"
    end_ts = dt.datetime.combine(end + dt.timedelta(days=1), dt.time(), dt.timezone.utc)
    if data_to is None or data_to >= end_ts:
        return text
    if data_to.date() == end:
        return f"{text} (last day partial, to {data_to:%H:%M} UTC)"
    return f"{text} (partial: figures to {utc(data_to)})"
