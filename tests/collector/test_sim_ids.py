"""Job ids name one job in a lake, whichever runs of the simulator wrote it (the `jobs` view keeps the newest state
per (cluster, job_id): two jobs under one id would be read as one)."""

import duckdb

from gpuledger.collector.sim.backfill import backfill
from gpuledger.config import defaults

END = 1793577600  # 2026-11-03 00:00 UTC
DAY = 86400
KW = dict(nodes=2, gpus_per_node=4, models=("L4",), step_s=3600, workers=1)


def _run(lake, end_s, seed=42):
    kw = dict(KW)
    step = kw.pop("step_s")
    backfill(defaults(), lake, end_s - 2 * DAY, end_s, step, seed=seed, **kw)


def _ids(lake):
    return (
        duckdb.connect()
        .execute(
            f"SELECT count(DISTINCT job_id), count(DISTINCT (job_id, submitted_at)), count(DISTINCT submitted_at) "
            f"FROM read_parquet('{lake}/jobs/**/*.parquet', hive_partitioning = true)"
        )
        .fetchone()
    )


def test_a_run_a_week_later_names_new_jobs(tmp_path):
    """A new fleet a whole week after another draws the same stream (the daily and weekly cycle repeat), so the ids
    made of the seed, the draws and the job counter were the earlier week's: every job of the second run shared its
    id with one of the first (the lake lost them all in the `jobs` view)."""
    lake = tmp_path / "lake"
    _run(lake, END)
    first = _ids(lake)
    _run(lake, END + 7 * DAY)
    ids, pairs, submits = _ids(lake)
    assert pairs > first[1] + 20  # the second run added jobs
    assert ids == pairs == submits


def test_runs_of_other_seeds_into_one_lake_name_new_jobs(tmp_path):
    lake = tmp_path / "lake"
    _run(lake, END)
    _run(lake, END, seed=43)
    ids, pairs, _ = _ids(lake)
    assert ids == pairs


def test_ids_are_the_same_on_a_rerun(tmp_path):
    """Deterministic: the same seed and window name the same jobs alike (a re-run rewrites the same rows)."""
    _run(tmp_path / "a", END)
    _run(tmp_path / "b", END)
    q = "SELECT DISTINCT job_id, submitted_at FROM read_parquet('{}/jobs/**/*.parquet', hive_partitioning = true)"
    a = set(duckdb.connect().execute(q.format(tmp_path / "a")).fetchall())
    assert a and a == set(duckdb.connect().execute(q.format(tmp_path / "b")).fetchall())
    _run(tmp_path / "a", END)  # again into the same lake: the same files, rewritten
    assert _ids(tmp_path / "a")[:2] == (len(a), len(a))
