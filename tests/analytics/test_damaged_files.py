"""A damaged raw file is set aside by `analyze`, not a stop: before the analytics read a file they have not read
before, they check it (lake_check); a cut or foreign gpu_samples file is named in one line, moved under
_quarantine/, recorded in quarantined_files, and the run goes on with every other file. On both stores."""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.runner import run
from gpuledger.lake import scan, table_files
from gpuledger.store.base import parquet_bytes

from builders import END, make_lake, put_lake


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
        run(lake, until_s=END)

    named = [m for m in caplog.messages if "set aside as" in m]
    assert len(named) == 2 and any(victim in m for m in named) and any(foreign_key in m for m in named)
    q = scan(lake, "quarantined_files").collect().sort("file")
    assert sorted(q["file"].to_list()) == sorted([victim, foreign_key]) and set(q["found_by"]) == {"analyze"}
    # Every other sample was counted: the hourly rollup holds exactly the samples left.
    assert scan(lake, "gpu_hourly").collect()["samples"].sum() == total - rows_in
    # The next run reads nothing again and sets nothing aside twice.
    caplog.clear()
    with caplog.at_level("WARNING"):
        run(lake, until_s=END)
    assert not [m for m in caplog.messages if "set aside as" in m]
    assert scan(lake, "quarantined_files").collect().height == 2
