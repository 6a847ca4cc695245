"""The filters every page shares, kept in the URL: ?start=YYYY-MM-DD&end=YYYY-MM-DD&tenant=...&model=...&cluster=...

`parse` never raises on what a user typed into the address bar: a bad value is replaced by its default and
named in `problems`, which the page shows above its figures.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode

import polars as pl

DEFAULT_DAYS = 30
EARLIEST = dt.date(1970, 1, 1)  # the lake's times are Unix times: nothing is older
# The optional filters as SQL: each binds its value twice; a null value matches all rows. One lake may hold several
# clusters, and every filter narrows to the chosen one too: bind Filters.model_args, tenant_args or both_args.
CLUSTER_SQL = "(CAST(? AS VARCHAR) IS NULL OR cluster = ?)"
MODEL_SQL = f"{CLUSTER_SQL} AND (CAST(? AS VARCHAR) IS NULL OR gpu_model = ?)"  # binds f.model_args
# A row that is its physical GPU's (gpu_hourly.physical's rule, in SQL over table {t} aliased d, keyed by {k}): a
# GPU's own row, or a partition of a GPU with no row of its own in that {k} (an AMD GPU in CPX mode)
PHYSICAL_SQL = (
    "(d.parent_gpu_uuid IS NULL OR NOT EXISTS (SELECT 1 FROM {t} o WHERE o.{k} = d.{k} AND o.cluster = d.cluster "
    "AND o.gpu_uuid = d.parent_gpu_uuid))"
)
# The viewer's tenants (dashboards/access.py): a signed-in tenant user's rows only, whatever the URL asks; a null
# list (an admin, or no sign-in configured) matches every row. Every query of a table with a tenant column binds it,
# through TENANT_SQL or BOTH_SQL, so no page, CSV export or callback can return another tenant's rows.
SCOPE_SQL = "(CAST(? AS VARCHAR[]) IS NULL OR list_contains(CAST(? AS VARCHAR[]), tenant))"  # binds f.scope_args
TENANT_SQL = f"{CLUSTER_SQL} AND {SCOPE_SQL} AND (CAST(? AS VARCHAR) IS NULL OR tenant = ?)"  # binds f.tenant_args
BOTH_SQL = f"{TENANT_SQL} AND (CAST(? AS VARCHAR) IS NULL OR gpu_model = ?)"  # binds f.both_args
KEYS = ("start", "end", "tenant", "model", "cluster")


@dataclass(frozen=True)
class Filters:
    start: dt.date  # first UTC day shown
    end: dt.date  # last UTC day shown (inclusive)
    tenant: str | None = None
    model: str | None = None
    cluster: str | None = None  # None: every cluster of the lake
    # The tenants the viewer may see (None: all). Not from the URL: from who asks (dashboards/access.py).
    scope: tuple[str, ...] | None = None

    @property
    def cluster_args(self) -> list:
        return [self.cluster, self.cluster]

    @property
    def model_args(self) -> list:
        """The parameters of MODEL_SQL."""
        return [*self.cluster_args, self.model, self.model]

    @property
    def scope_args(self) -> list:
        """The parameters of SCOPE_SQL."""
        scope = None if self.scope is None else list(self.scope)
        return [scope, scope]

    @property
    def tenant_args(self) -> list:
        """The parameters of TENANT_SQL."""
        return [*self.cluster_args, *self.scope_args, self.tenant, self.tenant]

    @property
    def both_args(self) -> list:
        """The parameters of BOTH_SQL."""
        return [*self.tenant_args, self.model, self.model]

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
        return search(self.start.isoformat(), self.end.isoformat(), self.tenant, self.model, self.cluster)


def search(
    start: str | None, end: str | None, tenant: str | None, model: str | None, cluster: str | None = None
) -> str:
    """The URL query of these filters; empty ones are left out."""
    q = {"start": start, "end": end, "tenant": tenant, "model": model, "cluster": cluster}
    return "?" + urlencode({k: v for k, v in q.items() if v})


def parse(
    search: str | None,
    bounds: tuple[dt.date, dt.date] | None,
    today: dt.date | None = None,
    scope: tuple[str, ...] | None = None,
) -> tuple[Filters, list[str]]:
    """The filters in a URL query, each date clamped into `window(bounds, today)`; `problems` names every change.
    `scope`: the viewer's tenants (None: all); a tenant outside it is dropped from the filters, and said."""
    args = {k: v[-1] for k, v in parse_qs((search or "").lstrip("?")).items()}
    lo, hi = window(bounds, today)
    problems = []
    end = _date(args, "end", bounds[1] if bounds else hi, lo, hi, problems)
    start = _date(args, "start", max(end - dt.timedelta(days=DEFAULT_DAYS - 1), lo), lo, hi, problems)
    if start > end:
        problems.append(f"start {start} is after end {end}: showing {end} only")
        start = end
    unknown = sorted(set(args) - set(KEYS))
    if unknown:
        problems.append(f"unknown URL parameter(s) ignored: {', '.join(unknown)}")
    tenant, model, cluster = (args.get(k) or None for k in ("tenant", "model", "cluster"))
    if tenant is not None and scope is not None and tenant not in scope:
        # Say no more than that (whether such a tenant exists is another tenant's data), and do not echo the name,
        # so nothing on the page names a tenant outside the viewer's.
        problems.append(f"the URL's tenant is not one of yours ({', '.join(scope) or 'none'}): showing yours")
        tenant = None
    return Filters(start, end, tenant, model, cluster, scope), problems


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


def by_cluster(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """`frame` with `column` naming the cluster too (`eu-1 / H100`) when the frame holds rows of several clusters:
    a figure drawing one series (or bar) per `column` then draws one per cluster, where a sum over the clusters
    would hide that one is short of GPUs and the other idle. One cluster: `frame` as it is."""
    if "cluster" not in frame.columns or frame["cluster"].n_unique() < 2:
        return frame
    label = pl.concat_str(pl.col("cluster"), pl.lit(" / "), pl.col(column).cast(pl.String).fill_null("(none)"))
    return frame.with_columns(label.alias(column))
