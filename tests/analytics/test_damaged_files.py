"""A damaged raw file is set aside by `analyze`, not a stop: before the analytics read a file they have not read
before, they check it (lake_check); a cut or foreign gpu_samples file is named in one line, moved under
_quarantine/, recorded in quarantined_files, and the run goes on with every other file. A derived file damaged after
the run that wrote it is set aside too, and the derived tables rebuilt from the raw ones. On both stores."""

from __future__ import annotations

import polars as pl
import pytest

from gpuledger.analytics.runner import run
from gpuledger.lake import scan, table_files
from gpuledger.schema import DERIVED_TABLES
from gpuledger.store.base import parquet_bytes

from builders import END, differences, make_lake, on_disk, put_lake

DERIVED = [t.name for t in DERIVED_TABLES]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """The lake _lake_on makes, analysed once from scratch. Read-only."""
    lake = tmp_path_factory.mktemp("scratch") / "lake"
    make_lake(lake, nodes=2, gpus=2, days=2.0, step_s=300)
    run(lake, until_s=END)
    return lake


def _lake_on(store, tmp_path):
    local = tmp_path / "made"
    make_lake(local, nodes=2, gpus=2, days=2.0, step_s=300)
    return put_lake(local, store)


def test_analyze_sets_a_damaged_samples_file_aside_and_goes_on(store, tmp_path, caplog):
    lake = _lake_on(store, tmp_path)
    files = table_files(lake, "gpu_samples")
    assert len(files) >= 2
    victim = files[0]
    rows_in = pl.read_parquet(lake.get(victim)).height
    total = scan(lake, "gpu_samples").collect().height
    data = lake.get(victim)
    lake.delete([victim])
    lake.put_new(victim, data[: len(data) // 2])
    foreign_key = victim.rsplit("/", 1)[0] + "/part-foreign.parquet"
    lake.put_new(foreign_key, parquet_bytes(pl.DataFrame({"ts": ["yesterday"], "gpu_uuid": ["GPU-x"]})))

    with caplog.at_level("WARNING"):
        reports = run(lake, until_s=END)

    assert [(r.job, r.rows) for r in reports if r.job == "quarantined_files"] == [("quarantined_files", 2)]
    named = [m for m in caplog.messages if "set aside as" in m]
    assert len(named) == 2 and any(victim in m for m in named) and any(foreign_key in m for m in named)
    q = scan(lake, "quarantined_files").collect().sort("file")
    assert sorted(q["file"].to_list()) == sorted([victim, foreign_key]) and set(q["found_by"]) == {"analyze"}
    # The collector's /metrics counts them by table (a listing of _quarantine/ at each scrape).
    from prometheus_client import generate_latest

    from gpuledger.collector.metrics import CollectorMetrics

    page = generate_latest(CollectorMetrics(store=lake).registry).decode()
    assert 'gpuledger_quarantined_files{table="gpu_samples"} 2.0' in page, page
    # Every other sample was counted: the hourly rollup holds exactly the samples left.
    assert scan(lake, "gpu_hourly").collect()["samples"].sum() == total - rows_in
    # The next run reads nothing again and sets nothing aside twice.
    caplog.clear()
    with caplog.at_level("WARNING"):
        run(lake, until_s=END)
    assert not [m for m in caplog.messages if "set aside as" in m]
    assert scan(lake, "quarantined_files").collect().height == 2


@pytest.mark.parametrize("table", ["gpu_hourly", "job_stats"])
def test_a_damaged_derived_file_is_rebuilt_and_the_tables_equal_a_run_from_scratch(
    store, tmp_path, caplog, table, scratch
):
    """A derived file cut short after the run that wrote it: the next run sees its stamp changed, sets it aside with a
    warning and rebuilds every derived table from the raw ones; they then hold what a run from scratch writes."""
    lake = _lake_on(store, tmp_path)
    run(lake, until_s=END - 6 * 3600)
    victim = table_files(lake, table)[0]
    data = lake.get(victim)
    lake.delete([victim])
    lake.put_new(victim, data[: len(data) // 2])

    with caplog.at_level("WARNING"):
        run(lake, until_s=END)
    assert any(victim in m and "set aside as" in m for m in caplog.messages), caplog.messages
    assert any(f"a damaged file of {table} was set aside; rebuilding" in m for m in caplog.messages)

    got = tmp_path / "got"
    on_disk(lake, got)
    compared = 0
    for t in DERIVED:
        assert differences(got, scratch, t) == (0, 0), t
        compared += scan(scratch, t).select(pl.len()).collect().item()
    assert compared > 1000  # the comparison was of tables with rows
    # The set-aside copy is named in quarantined_files, and the next run checks nothing again.
    assert scan(lake, "quarantined_files").collect()["file"].to_list() == [victim]
    caplog.clear()
    with caplog.at_level("WARNING"):
        run(lake, until_s=END)
    assert not [m for m in caplog.messages if "set aside" in m or "rebuilding" in m]
