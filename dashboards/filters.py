"""The filters every page shares, kept in the URL: ?start=YYYY-MM-DD&end=YYYY-MM-DD&tenant=...&model=...

`parse` never raises on what a user typed into the address bar: a bad value is replaced by its default and
named in `problems`, which the page shows above its figures.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode

DEFAULT_DAYS = 30
EARLIEST = dt.date(1970, 1, 1)  # the lake's times are Unix times: nothing is older
# The optional filters as SQL: each binds its value twice (`[f.model, f.model]`); a null value matches all rows.
MODEL_SQL = "(CAST(? AS VARCHAR) IS NULL OR gpu_model = ?)"
TENANT_SQL = "(CAST(? AS VARCHAR) IS NULL OR tenant = ?)"
BOTH_SQL = f"{TENANT_SQL} AND {MODEL_SQL}"  # binds tenant, tenant, model, model


@dataclass(frozen=True)
class Filters:
    start: dt.date  # first UTC day shown
    end: dt.date  # last UTC day shown (inclusive)
    tenant: str | None = None
    model: str | None = None

    @property
    def start_ts(self) -> dt.datetime:
        return dt.datetime.combine(self.start, dt.time(), dt.timezone.utc)

    @property
    def end_ts(self) -> dt.datetime:
        """Exclusive end: midnight after the last day."""
        return dt.datetime.combine(self.end + dt.timedelta(days=1), dt.time(), dt.timezone.utc)

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    def search(self) -> str:
        return search(self.start.isoformat(), self.end.isoformat(), self.tenant, self.model)


def search(start: str | None, end: str | None, tenant: str | None, model: str | None) -> str:
    """The URL query of these filters; empty ones are left out."""
    q = {"start": start, "end": end, "tenant": tenant, "model": model}
    return "?" + urlencode({k: v for k, v in q.items() if v})


def parse(
    search: str | None, bounds: tuple[dt.date, dt.date] | None, today: dt.date | None = None
) -> tuple[Filters, list[str]]:
    """The filters in a URL query, each date clamped into `window(bounds, today)`; `problems` names every change."""
    args = {k: v[-1] for k, v in parse_qs((search or "").lstrip("?")).items()}
    lo, hi = window(bounds, today)
    problems = []
    end = _date(args, "end", bounds[1] if bounds else hi, lo, hi, problems)
    start = _date(args, "start", max(end - dt.timedelta(days=DEFAULT_DAYS - 1), lo), lo, hi, problems)
    if start > end:
        problems.append(f"start {start} is after end {end}: showing {end} only")
        start = end
    unknown = sorted(set(args) - {"start", "end", "tenant", "model"})
    if unknown:
        problems.append(f"unknown URL parameter(s) ignored: {', '.join(unknown)}")
    return Filters(start, end, args.get("tenant") or None, args.get("model") or None), problems


def window(bounds: tuple[dt.date, dt.date] | None, today: dt.date | None = None) -> tuple[dt.date, dt.date]:
    """The days a URL may ask for: the lake's first day with data (Unix day 0 on a lake without any) to its last
    or today, whichever is later (admission decisions can be newer than the last analysed hour).

    Bounding the dates keeps every page's arithmetic inside datetime's range (0001-01-01 less a day overflowed),
    and keeps per-day denominators to days the lake can have.
    """
    today = today or dt.datetime.now(dt.timezone.utc).date()
    if bounds is None:
        return EARLIEST, max(today, EARLIEST)
    return bounds[0], max(bounds[1], today)


def _date(args: dict, key: str, default: dt.date, lo: dt.date, hi: dt.date, problems: list[str]) -> dt.date:
    raw = args.get(key)
    if not raw:
        return default
    try:
        day = dt.date.fromisoformat(raw[:10])
    except ValueError:
        problems.append(f"{key} {raw!r} is not a date (YYYY-MM-DD): showing {default}")
        return default
    if lo <= day <= hi:
        return day
    clamped = min(max(day, lo), hi)
    problems.append(f"{key} {day} is outside {lo} to {hi} (the days with data, up to today): showing {clamped}")
    return clamped
