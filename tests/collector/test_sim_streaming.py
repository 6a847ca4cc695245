"""The simulator streams its schedule one window (a UTC day, or a month of coarse history) at a time, carrying
only open jobs and the scheduler's state, and writes each window's rows before simulating the next (issue 15
item 3: a year of 1,000 GPUs took 15.3 GB with the whole schedule in memory).

Streaming must not change a single row. The expected lakes under data/sim_stream/ were written by the
whole-schedule code (commit a4232bb, before streaming) with `python tests/collector/test_sim_streaming.py`
run at that commit: one Parquet file per case and table, every row the lake held. Each test rebuilds its case
with today's code and compares the tables with DuckDB `EXCEPT ALL`, both ways (a multiset comparison: a row
lost, added or duplicated shows).

The jobs.parquet files were rewritten when job ids came to be hashed from the submit time (two runs a week apart
shared every id): the rows are those of the whole-schedule code with each job_id replaced one-to-one, every other
column the same (EXCEPT ALL with job_id left out, both ways: 0 rows). new_then_continued/nodes.parquet was
rewritten when a node's last row of a run ending off the step grid came to say its last sample (07:40) instead of
t1 - step (07:37): those 3 rows' last_seen is all that changed.

The gpu_samples, gpu_processes and jobs files were rewritten when the simulator came to run every workload class
(issue 25: services, notebooks, evaluation bursts, cron jobs; every job and so every sample changed). They were
written by a4232bb's whole-schedule backfill module run over today's fleet, workload and telemetry, and today's
streaming backfill wrote the same rows (EXCEPT ALL both ways: 0 rows in every table, but for the 3 nodes rows
above, which are today's); health_events and nodes did not change.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb
import pytest

from gpuledger.collector.sim import backfill as backfill_mod
from gpuledger.collector.sim import state as sim_state
from gpuledger.collector.sim.backfill import backfill
from gpuledger.config import defaults
from gpuledger.lake import table_files
from gpuledger.store import open_store

EXPECTED = Path(__file__).parent / "data" / "sim_stream"
TABLES = ("gpu_samples", "gpu_processes", "jobs", "nodes", "health_events")
END = 1795998600  # 2026-11-30 00:30 UTC: the first and the last window are parts of a day
DAY = 86400


def _new_then_continued(lake: Path) -> None:
    """A new fleet over 2.6 days at 300 s, then `up` filling the next 1.3 days (epoch_s continues the fleet).

    Load 0.9 on 3 nodes of 4 GPUs: jobs queue, and jobs of up to 3 days span the day boundaries.
    """
    cfg = defaults()
    kw = dict(nodes=3, gpus_per_node=4, models=("H100", "L4"), seed=11, load=0.9, workers=1)
    backfill(cfg, lake, END - 2.6 * DAY, END, 300, **kw)
    st = sim_state.load(lake, cfg.cluster)
    backfill(cfg, lake, st.written_until_s, END + 1.3 * DAY, 300, epoch_s=st.epoch_s, **kw)


def _coarse_history(lake: Path) -> None:
    """What `up` gives an empty lake: 35 coarse days at 3600 s (two coarse windows: 31 days, then 4), then a day
    and a half at 600 s, on 2 nodes of 2 GPUs with two worker processes."""
    cfg = defaults()
    backfill(
        cfg,
        lake,
        END - 36.5 * DAY,
        END,
        600,
        nodes=2,
        gpus_per_node=2,
        models=("A100",),
        seed=3,
        workers=2,
        coarse_until_s=END - 1.5 * DAY,
        coarse_step_s=3600,
    )


CASES = {"new_then_continued": _new_then_continued, "coarse_history": _coarse_history}


def _relation(con: duckdb.DuckDBPyConnection, lake: Path, table: str) -> str:
    files = [str(lake / f) for f in table_files(lake, table)]
    return f"read_parquet({files!r}, hive_partitioning = true, union_by_name = true)"


def _write_expected(case: str, lake: Path) -> None:
    out = EXPECTED / case
    out.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    for table in TABLES:
        if table_files(lake, table):
            rel = _relation(con, lake, table)
            con.execute(f"COPY (SELECT * FROM {rel}) TO '{out / table}.parquet' (FORMAT parquet)")
    state = json.loads(open_store(lake).get(sim_state.key("default")))
    (out / "sim_state.json").write_text(json.dumps(state, indent=1))


@pytest.mark.parametrize(("case", "batch_samples"), [(c, None) for c in sorted(CASES)] + [("new_then_continued", 500)])
def test_streamed_schedule_writes_the_rows_of_the_whole_schedule(tmp_path, monkeypatch, case, batch_samples):
    """Also with a window cut into a batch per node (500 samples: each node's energy counter must follow it)."""
    if batch_samples:
        monkeypatch.setattr(backfill_mod, "BATCH_SAMPLES", batch_samples)
    lake = tmp_path / "lake"
    CASES[case](lake)
    con = duckdb.connect()
    for table in TABLES:
        expected_file = EXPECTED / case / f"{table}.parquet"
        if not expected_file.exists():
            assert not table_files(lake, table), f"{table}: rows where the whole schedule wrote none"
            continue
        got, want = _relation(con, lake, table), f"read_parquet('{expected_file}')"
        n_got = con.execute(f"SELECT count(*) FROM {got}").fetchone()[0]
        n_want = con.execute(f"SELECT count(*) FROM {want}").fetchone()[0]
        cols = ", ".join(f'"{c}"' for c in con.sql(f"SELECT * FROM {want} LIMIT 0").columns)
        extra = con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM {got} EXCEPT ALL SELECT {cols} FROM {want})")
        extra = extra.fetchone()[0]
        lost = con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM {want} EXCEPT ALL SELECT {cols} FROM {got})")
        assert (n_got, extra, lost.fetchone()[0]) == (n_want, 0, 0), table
    want_state = json.loads((EXPECTED / case / "sim_state.json").read_text())
    # The state file as it was written before partitions existed (a fleet without them writes no partition keys),
    # and read back as the same state.
    assert json.loads(open_store(lake).get(sim_state.key("default"))) == want_state
    assert sim_state.load(lake, "default") == sim_state.SimState(
        **{**want_state, "models": tuple(want_state["models"])}
    )


def test_the_expected_lakes_hold_what_the_cases_need():
    """The cases exercise what streaming could get wrong: jobs open across window boundaries (their rows are
    written in a later window than their start), jobs held over from the warm-up day, and the continued run."""
    con = duckdb.connect()
    jobs = f"read_parquet('{EXPECTED / 'new_then_continued' / 'jobs.parquet'}')"
    spanning = con.execute(
        f"SELECT count(*) FROM {jobs} WHERE status = 'succeeded' "
        "AND CAST(scheduled_at AS DATE) <> CAST(finished_at AS DATE)"
    ).fetchone()[0]
    before_start = con.execute(f"SELECT count(*) FROM {jobs} WHERE epoch(updated_at) < {END - 2.6 * DAY}").fetchone()[0]
    pending = con.execute(f"SELECT count(*) FROM {jobs} WHERE status = 'pending'").fetchone()[0]
    assert spanning > 5 and before_start > 5 and pending > 5


def test_the_schedule_advances_a_window_at_a_time_and_a_closed_day_is_one_file(tmp_path, monkeypatch):
    """The bound on memory: the fleet is advanced a day at a time and forgets what ended, so what it holds at any
    moment is a day or so of allocations, not the run's. At 3600 s a day of the fleet is one batch: one file per
    table and day, written directly (no merge afterwards)."""
    from gpuledger.collector.sim.fleet import Fleet

    seen: list[tuple[float, int]] = []  # (until, allocations held when asked to advance there)
    advance = Fleet.advance

    def spy(self, until_s):
        seen.append((until_s, sum(map(len, self.allocations))))
        return advance(self, until_s)

    monkeypatch.setattr(Fleet, "advance", spy)
    lake = tmp_path / "lake"
    days, end = 6, END + 1800  # 01:00, on the step grid
    r = backfill(defaults(), lake, end - days * DAY, end, 3600, nodes=2, gpus_per_node=4, models=("L4",), seed=5)
    untils = [u for u, _ in seen]
    assert len(untils) > days  # not the whole run in one call
    assert untils == sorted(untils) and untils[-1] == end
    assert max(b - a for a, b in zip(untils, untils[1:], strict=False)) <= DAY
    # The fleet held at most a few days' allocations at once, against the r.jobs it ran.
    assert max(n for _, n in seen) < r.jobs / 2
    for table in ("gpu_samples", "gpu_processes", "nodes", "jobs"):
        per_day = {f.split("/")[1]: 0 for f in table_files(lake, table)}
        for f in table_files(lake, table):
            per_day[f.split("/")[1]] += 1
        assert set(per_day.values()) == {1}, (table, per_day)
    assert len(table_files(lake, "gpu_samples")) == days + 1  # 01:00 to 01:00: 7 UTC dates


if __name__ == "__main__":  # rewrite the expected lakes: only at a commit whose rows are known right (see above)
    import tempfile

    for name in sys.argv[1:] or sorted(CASES):
        with tempfile.TemporaryDirectory() as d:
            CASES[name](Path(d) / "lake")
            _write_expected(name, Path(d) / "lake")
