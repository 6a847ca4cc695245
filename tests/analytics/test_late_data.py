"""A raw file that reaches the lake days late (a node's spool flushed after a network partition) is analysed: the
derived tables then equal a run from scratch over the same raw files (issue 22 item 1).

A simulated lake (3 nodes x 4 GPUs, Oct 29 - Nov 1, not compacted). One node's rows of Oct 31 are held back from a
raw table, `analyze` runs, the rows are written into Oct 31's folder as a new file (as a late flush does), and
`analyze` runs again to the same time. Every derived table is then compared, row for row, with a run from scratch
over a copy of the raw tables (for late jobs rows, all but fragmentation, whose workload is every job seen at the
time of each run). Oct 31 lies a day before the telemetry look-back of the second run (Nov 1 22:00), so
only the change detection of the raw files can find it. Also: a late file in a day already compacted, and the same
on an object-store lake (moto's S3 server, tests/s3_server.py).
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest

from gpuledger.analytics.runner import run
from gpuledger.compaction import compact
from gpuledger.lake import LakeWriter, scan, table_files
from gpuledger.schema import DERIVED_TABLES
from gpuledger.store import open_store

from builders import END, differences, make_lake
from s3_server import download, upload

LATE_DAY = dt.date(2026, 10, 31)
END_DAY = dt.datetime.fromtimestamp(END, dt.timezone.utc).date()
DERIVED = [t.name for t in DERIVED_TABLES]


@pytest.fixture(scope="module")
def sim_lake(tmp_path_factory) -> Path:
    """3 nodes x 4 GPUs for 4 days up to END (Nov 2 00:00), one file per raw table and day. Read-only: copy it."""
    lake = tmp_path_factory.mktemp("late") / "lake"
    make_lake(lake, nodes=3, gpus=4, days=4.0, step_s=600)
    return lake


def _second_node(lake: Path) -> str:
    nodes = scan(lake, "gpu_samples", date=LATE_DAY).select(pl.col("node").unique().sort()).collect()["node"]
    assert nodes.len() == 3
    return nodes[1]


def hold_back(lake: Path, table: str, node: str) -> pl.DataFrame:
    """Removes the node's rows of LATE_DAY from the table's files (rewritten in place) and returns them."""
    held = []
    for f in sorted((lake / table / f"date={LATE_DAY.isoformat()}").glob("*.parquet")):
        rows = pl.read_parquet(f)
        mine = pl.col("node") == node
        held.append(rows.filter(mine))
        rows.filter(~mine).write_parquet(f)
    out = pl.concat(held)
    assert out.height > 0
    return out


def land_late(lake, table: str, rows: pl.DataFrame, name: str = "late-flush") -> None:
    """The held rows written into their day's folder as a new file, as the node's late flush does."""
    LakeWriter(lake).write(table, rows.with_columns(pl.lit(LATE_DAY).alias("date")), name)


def raw_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("_state", *DERIVED))
    return dst


def assert_derived_equal(incremental: Path, scratch: Path, tables=DERIVED) -> int:
    """Every derived table holds the same rows in both lakes (DuckDB EXCEPT ALL, both ways); returns the rows."""
    rows = 0
    for t in tables:
        assert differences(incremental, scratch, t) == (0, 0), f"{t}: (rows only incremental, only from scratch)"
        files = [str(scratch / f) for f in table_files(scratch, t)]
        rows += duckdb.connect().execute("SELECT count(*) FROM read_parquet(?)", [files]).fetchone()[0] if files else 0
    return rows


def day_figures(lake: Path) -> tuple[int, float]:
    """(GPUs in gpu_hourly, cost plus idle share in USD) of LATE_DAY: the issue's two figures."""
    gpus = scan(lake, "gpu_hourly", date=LATE_DAY).select(pl.col("gpu_uuid").n_unique()).collect().item()
    usd = (
        scan(lake, "cost_daily", date=LATE_DAY)
        .select((pl.col("cost_usd").fill_null(0) + pl.col("idle_share_usd").fill_null(0)).sum())
        .collect()
        .item()
    )
    return gpus, usd


@pytest.mark.parametrize("table", ["gpu_samples", "jobs"])
def test_rows_landing_days_late_are_analysed_like_a_run_from_scratch(sim_lake, tmp_path, table):
    lake = raw_copy(sim_lake, tmp_path / "lake")
    held = hold_back(lake, table, _second_node(lake))
    run(lake, until_s=END)
    land_late(lake, table, held)
    run(lake, until_s=END)
    scratch = raw_copy(lake, tmp_path / "scratch")
    run(scratch, until_s=END)
    assert day_figures(scratch)[0] == 12  # 3 nodes x 4 GPUs: the day is whole
    assert day_figures(lake) == day_figures(scratch)
    # fragmentation's workload is every job seen so far (analytics/frag_series.py): new jobs, late or not, change it
    # for the hours computed from now on, not for those already written, so it is compared only for late samples.
    tables = DERIVED if table == "gpu_samples" else [t for t in DERIVED if t != "fragmentation"]
    assert assert_derived_equal(lake, scratch, tables) > 10_000


def test_a_late_file_in_a_day_already_compacted(sim_lake, tmp_path):
    lake = raw_copy(sim_lake, tmp_path / "lake")
    held = hold_back(lake, "gpu_samples", _second_node(lake))
    noon = dt.datetime.combine(LATE_DAY, dt.time(12), dt.timezone.utc)
    # The node's morning arrives on time, as a second file of the day (so that compaction has files to merge).
    land_late(lake, "gpu_samples", held.filter(pl.col("ts") < noon), "on-time")
    run(lake, until_s=END)
    report = compact(lake, today=END_DAY)
    day = lake / "gpu_samples" / f"date={LATE_DAY.isoformat()}"
    assert report.partitions >= 1 and [f.name[:6] for f in day.glob("*.parquet")] == ["part-c"], report
    run(lake, until_s=END)  # the merged files are new stamps: their days are recomputed, to the same rows
    land_late(lake, "gpu_samples", held.filter(pl.col("ts") >= noon))
    run(lake, until_s=END)
    assert len(list(day.glob("*.parquet"))) == 2
    scratch = raw_copy(lake, tmp_path / "scratch")
    run(scratch, until_s=END)
    assert day_figures(lake) == day_figures(scratch)
    assert day_figures(lake)[0] == 12
    assert assert_derived_equal(lake, scratch) > 10_000


def test_rows_landing_days_late_on_an_object_store_lake(sim_lake, s3, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    local = raw_copy(sim_lake, tmp_path / "local")
    held = hold_back(local, "gpu_samples", _second_node(local))
    lake = open_store(f"s3://{s3.bucket}/fleet")
    assert upload(local, lake) > 0
    run(lake, until_s=END)
    land_late(lake, "gpu_samples", held)
    run(lake, until_s=END)
    land_late(local, "gpu_samples", held)  # the bucket's raw files, on disk, analysed from scratch
    scratch = raw_copy(local, tmp_path / "scratch")
    run(scratch, until_s=END)
    got = tmp_path / "got"
    download(lake, got, keep=lambda rel: rel.split("/")[0] in DERIVED)
    assert day_figures(got) == day_figures(scratch)
    assert day_figures(got)[0] == 12
    assert assert_derived_equal(got, scratch) > 10_000
