"""The planner (analytics/planner.py): stamps and changes in, hours and days to recompute out, each case by hand."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from gpuledger.analytics import planner
from gpuledger.analytics.planner import Changes, FileChanges, Span

UTC = dt.timezone.utc


def t(day: int, h: int = 0, m: int = 0) -> dt.datetime:
    return dt.datetime(2026, 12, day, h, m, tzinfo=UTC)


def d(day: int) -> dt.date:
    return dt.date(2026, 12, day)


def rel(day: int, name: str = "a") -> str:
    return f"gpu_samples/date=2026-12-{day:02d}/part-{name}.parquet"


@pytest.mark.parametrize(
    "old, new, want",
    [
        ({}, {}, FileChanges()),
        ({rel(1): [5, 10]}, {rel(1): [5, 10]}, FileChanges()),
        ({rel(1): [5, 10]}, {rel(1): [5, 10], rel(1, "b"): [6, 3]}, FileChanges(added=frozenset({rel(1, "b")}))),
        ({rel(1): [5, 10]}, {rel(1): [7, 10]}, FileChanges(rewritten=frozenset({rel(1)}))),  # stamp alone
        ({rel(1): [5, 10]}, {rel(1): [5, 11]}, FileChanges(rewritten=frozenset({rel(1)}))),  # size alone
        # compaction: two files become one new one
        (
            {rel(1): [5, 10], rel(1, "b"): [6, 3]},
            {rel(1, "c"): [9, 13]},
            FileChanges(added=frozenset({rel(1, "c")}), removed=frozenset({rel(1), rel(1, "b")})),
        ),
        # an object store's ETag is a string
        ({rel(2): ['"e1"', 10]}, {rel(2): ['"e2"', 10]}, FileChanges(rewritten=frozenset({rel(2)}))),
    ],
    ids=["nothing", "same", "new file", "new mtime", "new size", "compacted", "new etag"],
)
def test_file_changes(old, new, want):
    assert planner.file_changes(old, new) == want
    assert bool(want) == bool(planner.file_changes(old, new))


@pytest.mark.parametrize(
    "changes, first, want",
    [
        # a new file counts from its first sample's hour to the end of its day
        (FileChanges(added=frozenset({rel(1)})), {rel(1): t(1, 10, 20)}, [(t(1, 10, 20), t(2))]),
        # without a first sample (empty, or not asked for): its whole day
        (FileChanges(added=frozenset({rel(1)})), {}, [(t(1), t(2))]),
        # a sample dated outside its folder's day is clamped to the day
        (FileChanges(added=frozenset({rel(3)})), {rel(3): t(2, 23)}, [(t(3), t(4))]),
        (FileChanges(rewritten=frozenset({rel(1)})), {}, [(t(1), t(2))]),
        (FileChanges(removed=frozenset({rel(4)})), {}, [(t(4), t(5))]),
    ],
    ids=["new", "new, no first sample", "clamped", "rewritten", "removed"],
)
def test_late_spans(changes, first, want):
    assert [(s.lo, s.hi) for s in planner.late_spans(changes, first)] == want


def test_only_new_files_of_days_the_window_does_not_cover_whole_are_read():
    changes = FileChanges(added=frozenset({rel(1), rel(3), rel(4)}), rewritten=frozenset({rel(2)}))
    assert planner.needs_first_sample(changes, t(3, 22)) == [rel(1), rel(3)]
    assert planner.needs_first_sample(changes, None) == [rel(1), rel(3), rel(4)]


@pytest.mark.parametrize(
    "spans, want",
    [
        ([], {}),
        # the window: its first hour, whole hours
        ([(t(3, 22, 40), t(4, 1))], {d(3): t(3, 22), d(4): t(4)}),
        # a late day far before the window keeps its own start
        ([(t(3, 22), t(4, 1)), (t(1, 10, 20), t(2))], {d(1): t(1, 10), d(3): t(3, 22), d(4): t(4)}),
        # two spans of one day: the earlier start
        ([(t(1, 10), t(2)), (t(1, 3, 5), t(1, 4))], {d(1): t(1, 3)}),
        # a span ending at midnight does not reach the next day
        ([(t(1, 5), t(2))], {d(1): t(1, 5)}),
        ([(t(2), t(2))], {}),  # empty
    ],
    ids=["none", "window", "late day", "same day", "to midnight", "empty"],
)
def test_starts(spans, want):
    assert planner.starts([Span(a, b, "x") for a, b in spans]) == want


@pytest.mark.parametrize(
    "starts, now, want",
    [
        ({}, t(4, 1), []),
        ({d(3): t(3, 22), d(4): t(4)}, t(4, 1), [(t(3, 22), t(4, 1))]),
        # a late day apart: its own range, ending at its midnight
        ({d(1): t(1, 10), d(3): t(3, 22), d(4): t(4)}, t(4, 1), [(t(1, 10), t(2)), (t(3, 22), t(4, 1))]),
        # the next day starting mid-day does not join
        ({d(1): t(1, 10), d(2): t(2, 5)}, t(4), [(t(1, 10), t(2)), (t(2, 5), t(3))]),
        # nothing at or after now
        ({d(4): t(4, 2), d(5): t(5)}, t(4, 1), []),
    ],
    ids=["none", "window", "late day", "apart", "future"],
)
def test_ranges(starts, now, want):
    assert planner.ranges(starts, now) == want


@pytest.mark.parametrize(
    "touched, needed, window_h, held_s, want",
    [
        ({d(5), d(6)}, d(6), 1, 0.0, d(4)),  # a day back
        ({d(5), d(6)}, d(6), 1, 2.5 * 86400, d(1)),  # and the longest hold, in whole days up
        ({d(6)}, d(4), 1, 0.0, d(3)),  # a late raw day the other pass needs reaches further
        ({d(9)}, d(9), 30, 0.0, d(4)),  # twice the waste window's reach (2 days)
        ({d(5)}, None, 1, 0.0, None),  # another pass needs the lake's start: every job
    ],
)
def test_load_from(touched, needed, window_h, held_s, want):
    assert planner.load_from(touched, needed, window_h, held_s) == want


def test_job_days_by_change():
    c = Changes(
        allocations=frozenset({d(1)}),
        gpu_hourly=frozenset({d(3)}),
        new_gpus=frozenset({d(5)}),
        clock=frozenset({d(7)}),
        waits=frozenset({d(9)}),
    )
    p = planner.job_days(c)
    assert p.days == {
        "job_hourly": {d(1), d(3), d(7)},
        "cost_allocation": {d(1), d(3), d(5), d(7)},
        "cost_daily": {d(1), d(3), d(5), d(7)},
        "queue_depth": {d(7), d(9)},
        "fleet_hourly": {d(3), d(7), d(9)},
    }
    assert p.why == {
        d(1): {"allocations"},
        d(3): {"gpu_hourly"},
        d(5): {"new GPUs"},
        d(7): {"clock"},
        d(9): {"waits"},
    }
    assert p.all_days() == [d(1), d(3), d(5), d(7), d(9)]
    assert p.full is None


def test_a_waste_window_widens_job_hourly_by_its_reach():
    c = Changes(gpu_hourly=frozenset({d(10)}), waste_window_h=30)  # 29 h either side: 2 days
    p = planner.job_days(c)
    assert p.days["job_hourly"] == {d(8), d(9), d(10), d(11), d(12)}
    assert p.days["cost_allocation"] == {d(10)}
    assert p.why[d(8)] == {"waste window"} and p.why[d(10)] == {"gpu_hourly"}
    assert [planner.waste_reach_days(h) for h in (1, 24, 25, 49)] == [0, 1, 1, 2]


def test_every_day_planned_lies_within_the_jobs_loaded():
    """What prepare loads (load_from) and what job_tables recomputes (job_days) agree by construction: with the
    changes within the touched days, every day planned, less the waste window's reach its rows read, is on or after
    the first day loaded."""
    for window_h in (1, 3, 25, 30, 49, 100):
        reach = dt.timedelta(days=planner.waste_reach_days(window_h))
        touched = {d(8), d(12)}
        c = Changes(allocations=frozenset({d(8)}), gpu_hourly=frozenset({d(12)}), waste_window_h=window_h)
        low = min(planner.job_days(c).all_days())
        assert low - reach >= planner.load_from(touched, d(12), window_h, 0.0), window_h


def test_a_full_plan_covers_the_inputs_and_every_day_written():
    p = planner.full_days("a first run", [d(2), d(3)], {"job_hourly": [d(1)], "queue_depth": []})
    assert p.full == "a first run"
    assert p.days["job_hourly"] == {d(1), d(2), d(3)}
    assert p.days["fleet_hourly"] == {d(2), d(3)}
    assert p.why[d(1)] == {"a first run"}


def test_plans_are_frozen():
    p = planner.job_days(Changes(clock=frozenset({d(1)})))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.full = "x"
    with pytest.raises(TypeError):
        p.days["job_hourly"] = frozenset()
