"""Which hours and days of which derived table a run recomputes, and why: pure functions, stamps and state in, a frozen
plan out (the rules analytics/runner.py and analytics/incremental.py follow; tests/analytics/test_planner.py).

The raw tables are append-only, but a file can reach the lake days late (a node's spool flushed after a network
partition) or be rewritten (compaction merges a closed day's files). So a run compares the Store's stamps of every raw
file it reads (gpuledger.lake.file_stamps: (mtime, size) on disk, (ETag, size) in an object store) with the last
run's (`file_changes`), and each change becomes a span of time to recompute (`late_spans`): a new file from its
first sample's hour to the end of its day (its rows are that day's), a rewritten or removed file its whole day. With
the telemetry window (from the watermark) and the allocation intervals that changed, the spans give the
hours of the pass over raw samples and of fragmentation (`starts`, `ranges`). The job-level tables are recomputed by
whole UTC days (analytics/incremental.py): `job_days` says which, from the days whose inputs changed.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from types import MappingProxyType

DAY = dt.timedelta(days=1)
UTC = dt.timezone.utc
PER_DAY = ("job_hourly", "cost_allocation", "cost_daily", "queue_depth", "fleet_hourly")


def midnight(d: dt.date) -> dt.datetime:
    return dt.datetime.combine(d, dt.time(), UTC)


def days_of(a: dt.datetime, b: dt.datetime) -> frozenset[dt.date]:
    """UTC days of [a, b], both ends (a boundary moved across midnight changes both days' rows)."""
    lo, hi = min(a, b).date(), max(a, b).date()
    return frozenset(lo + dt.timedelta(days=k) for k in range((hi - lo).days + 1))


def file_day(rel: str) -> dt.date:
    """The UTC date of a raw file from its hive folder (`<table>/date=YYYY-MM-DD/<name>`)."""
    return dt.date.fromisoformat(PurePosixPath(rel).parent.name.removeprefix("date="))


@dataclass(frozen=True)
class FileChanges:
    """A raw table's files since the last run, by path relative to the lake."""

    added: frozenset[str] = frozenset()
    rewritten: frozenset[str] = frozenset()
    removed: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.added or self.rewritten or self.removed)


def file_changes(old: Mapping[str, Sequence], new: Mapping[str, Sequence]) -> FileChanges:
    """Files new since `old`, those whose stamp or size differ, and those gone (both {path: [stamp, size]})."""
    return FileChanges(
        added=frozenset(r for r in new if r not in old),
        rewritten=frozenset(r for r, s in new.items() if r in old and list(old[r]) != list(s)),
        removed=frozenset(r for r in old if r not in new),
    )


@dataclass(frozen=True)
class Span:
    """[lo, hi) to recompute, and why."""

    lo: dt.datetime
    hi: dt.datetime
    why: str


def needs_first_sample(changes: FileChanges, window_lo: dt.datetime | None) -> list[str]:
    """The new files whose first sample's time `late_spans` needs: those of days the window does not cover whole
    (a file of a later day is recomputed whole anyway, so an hourly run reads nothing more than before)."""
    return sorted(r for r in changes.added if window_lo is None or file_day(r) <= window_lo.date())


def late_spans(changes: FileChanges, first_sample: Mapping[str, dt.datetime | None]) -> list[Span]:
    """The spans a raw table's changed files dirty (module docstring). `first_sample`: each new file's earliest
    time, for those `needs_first_sample` named (others, and an empty file, count from their day's midnight)."""
    out = []
    for rel in sorted(changes.added):
        start = midnight(file_day(rel))
        first = first_sample.get(rel)
        lo = start if first is None else min(max(first, start), start + DAY)
        out.append(Span(lo, start + DAY, f"new file {rel}"))
    for kind, rels in (("rewritten", changes.rewritten), ("removed", changes.removed)):
        for rel in sorted(rels):
            start = midnight(file_day(rel))
            out.append(Span(start, start + DAY, f"{kind} file {rel}"))
    return out


def _hour(t: dt.datetime) -> dt.datetime:
    return t.replace(minute=0, second=0, microsecond=0)


def starts(spans: Iterable[Span]) -> dict[dt.date, dt.datetime]:
    """{UTC day: the whole hour to recompute it from} over every span (every bucket is then recomputed from all of
    its samples; the day's rows before that hour are kept)."""
    out: dict[dt.date, dt.datetime] = {}
    for s in spans:
        if s.hi <= s.lo:
            continue
        for d in days_of(s.lo, s.hi - dt.timedelta(microseconds=1)):
            t = _hour(max(s.lo, midnight(d)))
            out[d] = min(out.get(d, t), t)
    return out


def ranges(day_starts: Mapping[dt.date, dt.datetime], now: dt.datetime) -> list[tuple[dt.datetime, dt.datetime]]:
    """The days' hours to recompute as few [lo, hi) as possible, in time order: consecutive days join when the later
    one starts at its midnight; each ends at a midnight or at `now`. Nothing at or after `now`."""
    out: list[list[dt.datetime]] = []
    for d in sorted(day_starts):
        lo, end = day_starts[d], min(midnight(d) + DAY, now)
        if lo >= end:
            continue
        if out and out[-1][1] == lo:
            out[-1][1] = end
        else:
            out.append([lo, end])
    return [(a, b) for a, b in out]


def load_from(
    touched: Iterable[dt.date], needed_from: dt.date | None, waste_window_h: int, held_s: float
) -> dt.date | None:
    """The first day whose jobs an incremental run loads (jobs that finished before it are not read), from the days
    a change touches and the first day another pass needs (None: the lake's start, so every job).

    `job_days` widens the touched days by the waste window's reach, and each of those days' job_hourly rows read the
    allocations within the reach again either side: so twice the reach back, and the longest any job held its GPUs
    (`held_s`: a time-sliced job's intervals are cut where its neighbours on the GPU start and end), and a day."""
    if needed_from is None:
        return None
    back = 2 * waste_reach_days(waste_window_h) + math.ceil(held_s / 86400) + 1
    return min({*touched, needed_from}) - dt.timedelta(days=back)


@dataclass(frozen=True)
class Changes:
    """What changed since the last run, as UTC days (the inputs of `job_days`)."""

    allocations: frozenset[dt.date] = frozenset()  # allocation intervals that differ from gpu_allocations'
    gpu_hourly: frozenset[dt.date] = frozenset()  # gpu_hourly files rewritten (telemetry pass, late samples)
    new_gpus: frozenset[dt.date] = frozenset()  # days held of GPUs seen for the first time (their model is priced)
    clock: frozenset[dt.date] = frozenset()  # the days `now` moved over since the last run (and a --from window)
    waits: frozenset[dt.date] = frozenset()  # the days a job whose wait changed was waiting
    waste_window_h: int = 1


@dataclass(frozen=True)
class DayPlan:
    """Per derived table the UTC days to recompute, and per day why (labels of the changes behind it)."""

    days: Mapping[str, frozenset[dt.date]]
    why: Mapping[dt.date, frozenset[str]]
    full: str | None = None  # every day is recomputed, for this reason

    def all_days(self) -> list[dt.date]:
        return sorted(frozenset().union(*self.days.values()))


def _frozen(days: dict[str, set[dt.date]], why: dict[dt.date, set[str]], full: str | None = None) -> DayPlan:
    return DayPlan(
        MappingProxyType({t: frozenset(days[t]) for t in PER_DAY}),
        MappingProxyType({d: frozenset(w) for d, w in sorted(why.items())}),
        full,
    )


def waste_reach_days(waste_window_h: int) -> int:
    """Days either side a job-hour's waste can depend on (a waste run is decided within W - 1 hours)."""
    return math.ceil((waste_window_h - 1) / 24)


def job_days(c: Changes) -> DayPlan:
    """The job-level tables' days an incremental run recomputes (analytics/incremental.py's module docstring):
    job_hourly where allocations, gpu_hourly or the clock changed, widened by the waste window's reach; the cost
    tables there and where a new GPU was held; queue_depth where waits or the clock changed; fleet_hourly where
    queue_depth, gpu_hourly or the clock changed."""
    why: dict[dt.date, set[str]] = {}
    for label, days in (
        ("allocations", c.allocations),
        ("gpu_hourly", c.gpu_hourly),
        ("new GPUs", c.new_gpus),
        ("clock", c.clock),
        ("waits", c.waits),
    ):
        for d in days:
            why.setdefault(d, set()).add(label)
    reach = waste_reach_days(c.waste_window_h)
    base = c.allocations | c.gpu_hourly | c.clock
    hours = {d + dt.timedelta(days=k) for d in base for k in range(-reach, reach + 1)}
    for d in hours - base:
        why.setdefault(d, set()).add("waste window")
    cost = base | c.new_gpus
    queue = c.waits | c.clock
    days = {
        "job_hourly": hours,
        "cost_allocation": cost,
        "cost_daily": cost,
        "queue_depth": queue,
        "fleet_hourly": queue | c.gpu_hourly | c.clock,
    }
    return _frozen(days, why)


def full_days(reason: str, inputs: Iterable[dt.date], written: Mapping[str, Iterable[dt.date]]) -> DayPlan:
    """Every day of the inputs for every per-day table, and the days already written (a day without rows now loses
    its file)."""
    inputs = frozenset(inputs)
    days = {t: set(inputs) | set(written.get(t, ())) for t in PER_DAY}
    why = {d: {reason} for d in frozenset().union(*days.values())}
    return _frozen(days, why, reason)
