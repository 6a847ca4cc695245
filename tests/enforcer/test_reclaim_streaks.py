"""Idle streaks as Run:ai counts them (enforcer/reclaim/streaks.py), on sample series computed by hand.

Times are seconds after T0 (a window boundary: T0 is midnight); windows are 30 s unless a test says otherwise."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from gpuledger.enforcer.reclaim.streaks import gpu_streaks, job_streaks

T0 = dt.datetime(2026, 11, 2, tzinfo=dt.timezone.utc)


def t(s: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=s)


def samples(gpu: str, series: list[tuple[float, float | None]]) -> pl.DataFrame:
    return pl.DataFrame(
        {"ts": [t(s) for s, _ in series], "gpu_uuid": [gpu] * len(series), "util_gpu_pct": [u for _, u in series]},
        schema={"ts": pl.Datetime("us", "UTC"), "gpu_uuid": pl.String, "util_gpu_pct": pl.Float32},
    )


def holds(*rows: tuple[str, str, float, float]) -> pl.LazyFrame:
    """(job_id, gpu_uuid, allocation start in s, idle_below_pct)"""
    return pl.LazyFrame(
        {
            "job_id": [r[0] for r in rows],
            "gpu_uuid": [r[1] for r in rows],
            "start": [t(r[2]) for r in rows],
            "idle_below_pct": [r[3] for r in rows],
        },
        schema={
            "job_id": pl.String,
            "gpu_uuid": pl.String,
            "start": pl.Datetime("us", "UTC"),
            "idle_below_pct": pl.Float64,
        },
    )


def streak(frame, h, now, window_s=30.0, max_gap_s=120.0, read_from=-10_000.0) -> dict:
    out = gpu_streaks(frame.lazy(), h, t(now), window_s=window_s, max_gap_s=max_gap_s, read_from=t(read_from))
    rows = out.collect().rows(named=True)
    assert len(rows) == 1
    return rows[0]


def every(start: int, stop: int, step: int, util: float = 0.0) -> list[tuple[float, float]]:
    return [(s, util) for s in range(start, stop, step)]


def test_activity_resets_the_count():
    # 10 s samples 0..90, busy at 10: window [0, 30) was not fully idle, so the run starts at 30. At now = 125 the
    # last complete window ends at 120: 120 - 30 = 90 s, three windows.
    s = samples("g", [(0, 0.0), (10, 50.0)] + every(20, 100, 10))
    r = streak(s, holds(("j", "g", -100, 1.0)), now=125)
    assert (r["idle_since"], r["idle_s"], r["since_lookback"]) == (t(30), 90.0, False)


def test_idle_from_the_allocation_start_counts_whole_windows_only():
    # allocated at 5, idle samples 5, 15, ... 195: the window [0, 30) is partly before the allocation, so the first
    # whole window starts at 30; now = 200 -> last complete window ends at 180: 150 s.
    s = samples("g", every(5, 200, 10))
    r = streak(s, holds(("j", "g", 5, 1.0)), now=200)
    assert (r["idle_since"], r["idle_s"]) == (t(30), 150.0)


def test_samples_before_the_allocation_were_another_jobs():
    # a busy sample at -10 belongs to the previous holder: the job allocated at 0 has been idle since 0; now = 95 ->
    # windows [0, 90): 90 s.
    s = samples("g", [(-10, 90.0)] + every(0, 95, 10))
    r = streak(s, holds(("j", "g", 0, 1.0)), now=95)
    assert (r["idle_since"], r["idle_s"]) == (t(0), 90.0)


def test_a_gap_in_telemetry_restarts_the_run():
    # idle 0..60, nothing until 300 (a 240 s gap > max_gap 120), idle 300..410: the run starts again at 300; now =
    # 415 -> last complete window ends at 390: 90 s.
    s = samples("g", every(0, 70, 10) + every(300, 420, 10))
    r = streak(s, holds(("j", "g", -100, 1.0)), now=415)
    assert (r["idle_since"], r["idle_s"]) == (t(300), 90.0)


def test_a_gpu_that_stopped_reporting_is_not_idle_now():
    # idle samples up to 200, now = 330: the newest is 130 s old > max_gap 120 -> not known to be idle: 0 s.
    s = samples("g", every(0, 210, 10))
    r = streak(s, holds(("j", "g", -100, 1.0)), now=330)
    assert (r["idle_since"], r["idle_s"]) == (None, 0.0)
    # 110 s old is within max_gap: held over, windows up to 300 count: 300 - 0 = 300 s
    assert streak(s, holds(("j", "g", -100, 1.0)), now=310)["idle_s"] == 300.0


def test_a_sample_without_utilization_is_not_idle():
    # a null at 40 ends window [30, 60) -> run from 60; now = 130 -> 120 - 60 = 60 s
    s = samples("g", every(0, 40, 10) + [(40, None)] + every(50, 130, 10))
    assert streak(s, holds(("j", "g", -100, 1.0)), now=130)["idle_s"] == 60.0


def test_the_threshold_is_the_jobs_class():
    # 3 % everywhere: idle under a 5 % threshold (0..90 -> now 95: 90 s), busy under 1 % (every window busy: 0 s)
    s = samples("g", every(0, 100, 10, util=3.0))
    assert streak(s, holds(("j", "g", -100, 5.0)), now=95)["idle_s"] == 90.0
    assert streak(s, holds(("j", "g", -100, 1.0)), now=95)["idle_s"] == 0.0


def test_hourly_samples_fill_the_windows_between_them():
    # a lake with one sample an hour (the simulator's year), max_gap 3700 s: idle samples at 0, 1 h, 2 h, 3 h; the
    # job was allocated before the read began (read_from = 0), so the run reaches back to the first sample read:
    # since_lookback. now = 3 h 10 min: 11,400 s of whole 30 s windows.
    s = samples("g", [(h * 3600, 0.0) for h in range(4)])
    r = streak(s, holds(("j", "g", -3600, 1.0)), now=3 * 3600 + 600, max_gap_s=3700, read_from=0)
    assert (r["idle_since"], r["idle_s"], r["since_lookback"]) == (t(0), 11_400.0, True)


def test_windows_of_another_length():
    # 60 s windows, busy at 70: window [60, 120) not idle -> run from 120; now = 250 -> 240 - 120 = 120 s
    s = samples("g", every(0, 70, 10) + [(70, 20.0)] + every(80, 250, 10))
    assert streak(s, holds(("j", "g", -100, 1.0)), now=250, window_s=60)["idle_s"] == 120.0


@pytest.mark.parametrize(("busy_at", "want_g2"), [(40, 120.0), (100, 60.0)])
def test_a_job_is_as_idle_as_its_least_idle_gpu(busy_at, want_g2):
    # now = 200, last complete window ends at 180. g1 busy at 10: idle from 30, 150 s. g2 busy at 40: from 60, 120 s;
    # busy at 100: from 120, 60 s. g3 has no sample at all: 0 s for a job holding it.
    s = pl.concat(
        [
            samples("g1", [(0, 0.0), (10, 40.0)] + every(20, 200, 10)),
            samples("g2", every(0, busy_at, 10) + [(busy_at, 70.0)] + every(busy_at + 10, 200, 10)),
        ]
    )
    h = holds(("j", "g1", -100, 1.0), ("j", "g2", -100, 1.0), ("k", "g1", -100, 1.0), ("k", "g3", -100, 1.0))
    per_gpu = gpu_streaks(s.lazy(), h, t(200), window_s=30, max_gap_s=120, read_from=t(-10_000))
    jobs = {r["job_id"]: r for r in job_streaks(per_gpu, h).collect().rows(named=True)}
    # j: min(g1 150 s from 30, g2) and idle since the later start (g2's)
    assert jobs["j"]["idle_s"] == min(150.0, want_g2)
    assert jobs["j"]["idle_since"] == t(180 - want_g2)
    # k holds g3, never sampled: not idle
    assert (jobs["k"]["idle_s"], jobs["k"]["idle_since"]) == (0.0, None)
