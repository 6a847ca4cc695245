import datetime as dt
import subprocess

import polars as pl
import pytest

from gpuledger import schema
from gpuledger.errors import LakeError
from gpuledger.lake import LakeWriter, conform, scan, table_files

from builders import at

UTC = dt.timezone.utc


def _samples(ts_list, node="n1"):
    return pl.DataFrame(
        {
            "ts": [dt.datetime.fromtimestamp(t, UTC) for t in ts_list],
            "cluster": ["c"] * len(ts_list),
            "node": [node] * len(ts_list),
            "gpu_uuid": [f"GPU-{i}" for i in range(len(ts_list))],
            "util_gpu_pct": [10.0 * i for i in range(len(ts_list))],
            "source": ["test"] * len(ts_list),
        }
    )


def test_write_partitions_by_utc_date(store):
    midnight = at(2).timestamp()
    df = pl.concat([_samples([midnight - 10, midnight + 10], "n1"), _samples([midnight + 20], "n2")])
    w = LakeWriter(store)
    rel = sorted(w.write("gpu_samples", df, "w1-1"))
    assert rel == [
        "gpu_samples/date=2026-11-01/part-w1-1.parquet",
        "gpu_samples/date=2026-11-02/part-w1-1.parquet",
    ]
    # The partition column lives in the path only; the node is in the file.
    assert "date" not in pl.read_parquet(store.get(rel[0])).columns
    assert pl.read_parquet(store.get(rel[1]))["node"].to_list() == ["n1", "n2"]
    back = scan(store, "gpu_samples").collect().sort("ts")
    assert back.schema == schema.GPU_SAMPLES.polars_schema
    assert back["node"].to_list() == ["n1", "n1", "n2"]
    assert back["date"].to_list() == [dt.date(2026, 11, 1), dt.date(2026, 11, 2), dt.date(2026, 11, 2)]
    assert back["util_gpu_pct"].to_list() == [0.0, 10.0, 0.0]
    assert back["power_w"].null_count() == 3  # missing nullable columns become null, never zero


def test_a_name_is_written_once_and_another_writers_file_of_that_name_is_refused(store):
    """The same flush again (a retry after a crash) is done, nothing added; other rows under the name are another
    writer's (two collectors with one node name): refused, never an overwrite."""
    w = LakeWriter(store)
    df = _samples([1_700_000_000, 1_700_000_010])
    first = w.write("gpu_samples", df, "a")
    assert w.write("gpu_samples", df, "a") == first
    assert scan(store, "gpu_samples").collect().height == 2
    assert table_files(store, "gpu_samples") == first
    with pytest.raises(LakeError, match=r"already exists with other contents: another writer wrote this (file|key)"):
        w.write("gpu_samples", df.with_columns(node=pl.lit("n2")), "a")
    assert scan(store, "gpu_samples").collect()["node"].to_list() == ["n1", "n1"]  # not overwritten


def test_null_node_reads_back_null(tmp_path):
    jobs = pl.DataFrame(
        {
            "updated_at": [at(2, 5)],
            "cluster": ["c"],
            "job_id": ["j"],
            "status": ["pending"],
            "source": ["test"],
            "node": [None],
        }
    )
    (f,) = LakeWriter(tmp_path).write("jobs", jobs, "x")
    assert f == "jobs/date=2026-11-02/part-x.parquet"
    assert scan(tmp_path, "jobs").collect()["node"].to_list() == [None]


@pytest.mark.parametrize(
    "frame,message",
    [
        (lambda d: d.with_columns(bogus=pl.lit(1)), "gpu_samples: unknown column(s) bogus"),
        (lambda d: d.drop("gpu_uuid"), "gpu_samples: missing required column(s) gpu_uuid"),
        (lambda d: d.with_columns(util_gpu_pct=pl.lit("high")), "gpu_samples: values do not fit the schema"),
        (lambda d: d.with_columns(gpu_uuid=pl.lit(None, pl.String)), "null values in required column(s) gpu_uuid"),
    ],
)
def test_conform_names_table_and_columns(frame, message):
    with pytest.raises(LakeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        conform("gpu_samples", frame(_samples([1_700_000_000])))


def test_unsafe_file_names_cannot_escape_the_lake(tmp_path):
    with pytest.raises(LakeError, match="cannot be used in a lake path"):
        LakeWriter(tmp_path).write("gpu_samples", _samples([1_700_000_000]), "../etc")


def test_empty_table_scans_with_full_schema(tmp_path):
    df = scan(tmp_path, "health_events").collect()
    assert df.height == 0 and df.schema == schema.HEALTH_EVENTS.polars_schema


def test_unwritable_lake_is_a_clear_error(tmp_path):
    target = tmp_path / "file-not-dir"
    target.write_text("x")
    with pytest.raises(LakeError, match=f"cannot write {target}"):
        LakeWriter(target / "lake").init()


@pytest.fixture
def tiny_fs(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {r.stderr.decode().strip()}")
    yield mnt
    # Lazy, as the other small-disk fixtures: a writer thread may close its failed temp file a moment after the
    # test (pyarrow's writer, on ENOSPC), and a plain umount of a busy tmpfs fails the teardown.
    subprocess.run(["umount", "-l", str(mnt)], check=True)


def test_full_disk_is_a_clear_error_and_leaves_no_partial_file(tiny_fs):
    big = pl.DataFrame(
        {
            "ts": [at(2)] * 200_000,
            "cluster": ["c"] * 200_000,
            "node": ["n1"] * 200_000,
            "gpu_uuid": [f"GPU-{i:08x}-{i * 7919:012x}" for i in range(200_000)],
            "source": ["t"] * 200_000,
        }
    )
    with pytest.raises(LakeError, match="disk full while writing"):
        LakeWriter(tiny_fs).write("gpu_samples", big, "big")
    leftovers = [p for p in tiny_fs.rglob("*") if p.is_file()]
    assert leftovers == []


def test_frames_from_rows_take_types_from_the_schema_not_the_first_rows():
    from gpuledger.lake import frame_from_rows

    rows = [
        {
            "updated_at": i,
            "cluster": "c",
            "job_id": str(i),
            "status": "running",
            "source": "t",
            "finished_at": None,
            "gpus": None,
        }
        for i in range(500)
    ]
    rows.append({**rows[0], "finished_at": 1_795_392_208_566_644, "gpus": 0.25})
    df = frame_from_rows("jobs", rows)
    assert df.schema["finished_at"] == schema.UTC_US and df.schema["gpus"] == pl.Float64
    assert df["finished_at"][-1] == at(23, 0, 3, 28, 566644)


def test_frame_from_columns_refuses_unknown_columns():
    from gpuledger.lake import frame_from_columns

    with pytest.raises(LakeError, match="jobs: unknown column 'colour'"):
        frame_from_columns("jobs", {"colour": ["red"]})


def test_many_partitions_on_a_full_disk_publish_nothing_and_leave_nothing(tiny_fs):
    n = 60_000
    big = pl.DataFrame(
        {
            "ts": [dt.datetime(2026, 11, 1 + i % 3, tzinfo=UTC) for i in range(n)],
            "cluster": ["c"] * n,
            "node": [f"n{i % 4}" for i in range(n)],
            "gpu_uuid": [f"GPU-{i:08x}-{i * 7919:012x}" for i in range(n)],
            "source": ["t"] * n,
        }
    )
    df = conform("gpu_samples", big)
    with pytest.raises(LakeError, match="disk full while writing"):
        LakeWriter(tiny_fs).write_partitions("gpu_samples", df, "many")  # 12 partitions, staged together
    assert [p for p in tiny_fs.rglob("*") if p.is_file()] == []
