"""Imports of outside job data: the generic jobs file and the Alibaba openb trace, checked by hand and on real data."""

from __future__ import annotations

import datetime as dt
import shutil
import time
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.imports import MAX_REJECTIONS, ImportFileError, Rejection
from gpuledger.analytics.imports.alibaba2023 import DEFAULT_ORIGIN, import_alibaba_2023
from gpuledger.analytics.imports.alibaba2025 import import_alibaba_2025
from gpuledger.analytics.imports.jobs_file import import_jobs_file
from gpuledger.config import Tenant, defaults
from gpuledger.errors import UsageError
from gpuledger.lake import scan, table_files
from gpuledger.query import Lake

from builders import at

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "imports"
TINY = FIXTURES / "openb_tiny"
TRACES = REPO.parent / "shared" / "data" / "traces"
OPENB = TRACES / "alibaba-gpu-v2023"
DLRM = TRACES / "alibaba-gpu-v2025"
DLRM_TINY = FIXTURES / "alibaba2025_tiny"
UTC = dt.timezone.utc
MARCH = 3  # the jobs files in tests/fixtures/imports are of March 2026


def jobs(lake: Path) -> pl.DataFrame:
    return scan(lake, "jobs").collect().sort("job_id")


# ---------------------------------------------------------------- generic jobs file


def test_good_csv_is_imported_with_every_column_mapped(tmp_path):
    report = import_jobs_file(FIXTURES / "jobs_good.csv", tmp_path, defaults())
    assert (report.rows_read, report.rows_imported, report.rows_rejected) == (4, 4, 0)
    got = jobs(tmp_path)
    rows = {r["job_id"]: r for r in got.iter_rows(named=True)}
    t1 = rows["train-1"]
    assert t1["tenant"] == "nlp"  # empty in the file: from the config's namespace -> tenant map
    assert t1["queue"] == "high" and t1["gpu_model"] == "NVIDIA H100 80GB HBM3"
    assert (t1["gpus"], t1["gpu_sharing"], t1["status"], t1["node"]) == (8.0, "exclusive", "succeeded", "gpu-node-1")
    assert (t1["submitted_at"], t1["scheduled_at"], t1["finished_at"]) == (
        at(1, 10, month=MARCH),
        at(1, 10, 5, month=MARCH),
        at(1, 12, month=MARCH),
    )
    assert t1["updated_at"] == at(1, 12, month=MARCH)  # finished_at, when there is one
    assert (t1["cluster"], t1["source"], t1["date"]) == ("default", "import", dt.date(2026, 3, 1))
    t2 = rows["train-2"]
    assert t2["tenant"] == "vision"  # given in the file
    assert t2["updated_at"] == at(1, 11, 0, 30, month=MARCH) and t2["finished_at"] is None  # else scheduled_at
    nb = rows["nb-3"]
    assert (nb["gpus"], nb["gpu_sharing"], nb["tenant"], nb["node"]) == (0.25, "fraction", "platform", None)
    assert nb["updated_at"] == at(2, 9, month=MARCH)  # else submitted_at
    cpu = rows["cpu-4"]
    assert cpu["tenant"] is None  # a namespace no tenant owns
    assert cpu["gpu_sharing"] is None and cpu["status"] == "failed"  # status is case-insensitive
    assert cpu["submitted_at"] == at(2, 9, 30, 0, 250_000, month=MARCH)


def test_every_column_of_a_jobs_file_reaches_the_jobs_table(tmp_path):
    """The file's columns are the `jobs` table's (gpuledger/schema.py), less those the import sets: a column the
    schema gains is either read into the lake or listed as not in the file, never accepted and dropped."""
    from gpuledger.analytics.imports import jobs_file
    from gpuledger.schema import JOBS

    assert jobs_file.COLUMNS == (
        "job_id",
        "tenant",
        "namespace",
        "queue",
        "gpu_model",
        "gpus",
        "submitted_at",
        "scheduled_at",
        "finished_at",
        "status",
        "node",
    )
    assert set(jobs_file.COLUMNS) | set(jobs_file.NOT_IN_FILE) == set(JOBS.column_names)
    f = tmp_path / "one.csv"
    values = ("j1", "t", "ns", "q", "L4", "2", "2026-03-01T10:00:00Z", "2026-03-01T10:01:00Z", "2026-03-01T11:00:00Z")
    f.write_text(",".join(jobs_file.COLUMNS) + "\n" + ",".join(values) + ",preempted,n1\n")
    assert import_jobs_file(f, tmp_path / "lake", defaults()).rows_imported == 1
    row = jobs(tmp_path / "lake").row(0, named=True)
    assert [row[c] for c in jobs_file.COLUMNS] == [
        "j1",
        "t",
        "ns",
        "q",
        "L4",
        2.0,
        at(1, 10, month=MARCH),
        at(1, 10, 1, month=MARCH),
        at(1, 11, month=MARCH),
        "preempted",
        "n1",
    ]


def test_cluster_comes_from_the_config(tmp_path):
    import dataclasses

    cfg = dataclasses.replace(defaults(), cluster="prod-eu")
    import_jobs_file(FIXTURES / "jobs_good.csv", tmp_path, cfg)
    assert set(jobs(tmp_path)["cluster"]) == {"prod-eu"}


BAD_ROWS = [
    (3, "submitted_at '2026-03-01T10:00:00' has no time zone: write UTC times with Z or +00:00"),
    (4, "submitted_at '2026-03-01T10:00:00+02:00' is not UTC: write UTC times with Z or +00:00"),
    (5, "submitted_at 'yesterday' is not an ISO-8601 time"),
    (6, "gpus 'two' is not a number"),
    (7, "gpus '-0.5' is negative"),
    (8, "missing value for required column gpus"),
    (9, "scheduled_at 2026-03-01T09:59:59+00:00 is before submitted_at 2026-03-01T10:00:00+00:00"),
    (10, "finished_at 2026-03-01T10:05:00+00:00 is before scheduled_at 2026-03-01T10:10:00+00:00"),
    (11, "finished_at 2026-03-01T09:00:00+00:00 is before submitted_at 2026-03-01T10:00:00+00:00"),
    (12, "unknown status 'done' (allowed: pending, running, succeeded, failed, cancelled, preempted)"),
    (13, "missing value for required column status"),
    (14, "duplicate job_id 'ok-1' (first on line 2)"),
    (15, "missing value for required column job_id"),
    (16, "expected 11 fields, got 3"),
    (
        17,
        "node '../etc' cannot be used in a lake path: use letters, digits, '.', '_' or '-' "
        "(at most 200 characters, not starting with '.', '_' or '-')",
    ),
    (18, "missing value for required column submitted_at"),
    (21, "gpus 'nan' is not a finite number"),  # the row before spans lines 19-20 (a quoted newline)
    (23, "duplicate job_id 'naive' (first on line 3)"),  # a rejected first row still makes its id ambiguous
]


def test_every_bad_row_is_rejected_with_its_line_and_reason(tmp_path):
    path = FIXTURES / "jobs_bad_rows.csv"
    report = import_jobs_file(path, tmp_path, defaults())
    assert report.rejections == [Rejection(str(path), line, reason) for line, reason in BAD_ROWS]
    assert (report.rows_read, report.rows_rejected, report.rows_imported) == (21, len(BAD_ROWS), 3)
    got = jobs(tmp_path)
    assert got["job_id"].to_list() == ["multi-line", "ok-1", "ok-2"]
    assert got.filter(pl.col("job_id") == "ok-1")["gpus"].item() == 1.0  # the first ok-1, not the duplicate
    assert got.filter(pl.col("job_id") == "multi-line")["queue"].item() == "night\nqueue"
    assert f"{path}:3: submitted_at" in report.summary()[-len(BAD_ROWS)]


def test_only_the_first_rejections_are_kept_but_all_are_counted(tmp_path):
    src = tmp_path / "many.csv"
    lines = ["job_id,gpus,submitted_at,status"] + [f"j{i},-1,2026-03-01T10:00:00Z,pending" for i in range(25)]
    src.write_text("\n".join(lines) + "\n")
    report = import_jobs_file(src, tmp_path / "lake", defaults())
    assert report.rows_rejected == 25 and len(report.rejections) == MAX_REJECTIONS
    assert report.rejections[-1].line == MAX_REJECTIONS + 1
    assert report.summary()[-1] == f"  ... and {25 - MAX_REJECTIONS} more rejected rows"
    assert report.files == [] and not table_files(tmp_path / "lake", "jobs")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "jobs_bad_unknown_columns.csv",
            ":1: unknown column(s) user, priority (allowed: job_id, tenant, namespace, queue, gpu_model, gpus, "
            "submitted_at, scheduled_at, finished_at, status, node)",
        ),
        ("jobs_bad_missing_columns.csv", ":1: missing required column(s) gpus, submitted_at"),
    ],
)
def test_a_file_with_bad_columns_is_refused_whole(tmp_path, name, message):
    with pytest.raises(ImportFileError) as e:
        import_jobs_file(FIXTURES / name, tmp_path, defaults())
    assert str(e.value) == str(FIXTURES / name) + message
    assert not (tmp_path / "jobs").exists()


def test_unreadable_inputs_name_the_file(tmp_path):
    with pytest.raises(ImportFileError, match=r"nope\.csv: cannot read: No such file"):
        import_jobs_file(tmp_path / "nope.csv", tmp_path, defaults())
    (tmp_path / "jobs.json").write_text("{}")
    with pytest.raises(ImportFileError, match=r"jobs\.json: unknown file type '\.json': expected \.csv or \.parquet"):
        import_jobs_file(tmp_path / "jobs.json", tmp_path, defaults())
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ImportFileError, match=r"empty\.csv:1: empty header"):
        import_jobs_file(tmp_path / "empty.csv", tmp_path, defaults())
    (tmp_path / "latin1.csv").write_bytes("job_id,gpus,submitted_at,status\ncaf\xe9,1,x,y\n".encode("latin-1"))
    with pytest.raises(ImportFileError, match=r"latin1\.csv: not UTF-8 text"):
        import_jobs_file(tmp_path / "latin1.csv", tmp_path, defaults())
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(ImportFileError, match=r"broken\.parquet: not a readable Parquet file"):
        import_jobs_file(tmp_path / "broken.parquet", tmp_path, defaults())


def test_a_header_only_file_imports_nothing(tmp_path):
    src = tmp_path / "header.csv"
    src.write_text("job_id,gpus,submitted_at,status\n")
    report = import_jobs_file(src, tmp_path / "lake", defaults())
    assert (report.rows_read, report.rows_imported, report.files) == (0, 0, [])


def test_parquet_rows_are_numbered_from_one_and_timestamps_keep_their_zone(tmp_path):
    src = tmp_path / "jobs.parquet"
    pl.DataFrame(
        {
            "job_id": ["a", "b", "c"],
            "gpus": [1.0, -2.0, 0.5],
            "submitted_at": [
                at(1, 10, month=MARCH),
                at(1, 10, month=MARCH),
                dt.datetime(2026, 3, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            ],
            "status": ["running", "pending", "succeeded"],
            "namespace": ["nlp", None, "research"],
        },
        schema_overrides={"submitted_at": pl.Datetime("us", "UTC")},
    ).write_parquet(src)
    report = import_jobs_file(src, tmp_path / "lake", defaults())
    assert report.rejections == [Rejection(str(src), 2, "gpus -2.0 is negative")]
    got = jobs(tmp_path / "lake")
    assert got["job_id"].to_list() == ["a", "c"]
    assert got["submitted_at"].to_list() == [at(1, 10, month=MARCH), at(1, 10, month=MARCH)]  # 12:00+02:00 is 10:00 UTC
    assert got["tenant"].to_list() == ["nlp", "research"]


def test_parquet_naive_timestamps_are_rejected(tmp_path):
    src = tmp_path / "naive.parquet"
    pl.DataFrame(
        {"job_id": ["a"], "gpus": [1], "submitted_at": [dt.datetime(2026, 3, 1, 10)], "status": ["pending"]}
    ).write_parquet(src)
    report = import_jobs_file(src, tmp_path / "lake", defaults())
    assert report.rejections == [
        Rejection(
            str(src),
            1,
            "submitted_at datetime.datetime(2026, 3, 1, 10, 0) has no time zone: write UTC times with Z or +00:00",
        )
    ]


def test_importing_the_same_file_twice_writes_the_same_files_and_rows(tmp_path):
    first = import_jobs_file(FIXTURES / "jobs_good.csv", tmp_path, defaults())
    before = jobs(tmp_path)
    files = sorted(table_files(tmp_path, "jobs"))
    second = import_jobs_file(FIXTURES / "jobs_good.csv", tmp_path, defaults())
    assert sorted(second.files) == sorted(first.files) == files
    assert sorted(table_files(tmp_path, "jobs")) == files  # replaced in place, nothing added
    assert jobs(tmp_path).equals(before)
    raw = pl.read_parquet([tmp_path / f for f in files], hive_partitioning=False)
    assert raw.height == 4  # the raw table, not only the latest-per-job view, holds each row once


# ---------------------------------------------------------------- Alibaba openb trace, hand-made


def tiny_lake(tmp_path, workload="default"):
    lake = tmp_path / "lake"
    report = import_alibaba_2023(TINY, lake, defaults(), workload=workload)
    return lake, report


# Worked out by hand from openb_tiny (see docs/imports.md for the policy). Free GPU milli at each arrival:
#  10 p1 1x500     a 2000, b 8000, c 1000      -> least free: c, gpu0 (c0 500)
#  20 p2 1x1000    c0 too small; a 2000 < b    -> a, gpu0
#  30 p3 1x500     a 1000, b 8000, c 500       -> c, gpu0 (c0 0)
#  40 p4 1x1000    a lacks CPU (6000 < 7000), c full -> b, gpu0
#  50 p5 2x1000 T4 a has one free GPU, c none -> unplaced
#  60 p3 leaves first, then p6 1x500 T4: a 1000, c 500 -> c, gpu0 (without departures-first it would be a)
#  80 p7 1x200 G2  b1..b7 all 1000           -> b, gpu1 (lowest index; b1 800)
#  90 p8 1x900 G2  b1 800 too small          -> b, gpu2 (b2 100)
#  95 p9 1x700 G2|V100M32: b1 800, b3 1000 fit -> b, gpu1 (least free that fits)
#  99 pm 2x1000    a one free, c one GPU; b3..b7 free -> b, gpus 3 and 4
# 100 pv 1x1000 V100M32                      -> unplaced: no such model
#     pp Pending: never scheduled             -> no node, no reason;  pc: CPU-only, skipped
EXPECTED_PLACEMENT = {
    "p1": ("n-c", ["n-c/gpu0"]),
    "p2": ("n-a", ["n-a/gpu0"]),
    "p3": ("n-c", ["n-c/gpu0"]),
    "p4": ("n-b", ["n-b/gpu0"]),
    "p5": (None, None),
    "p6": ("n-c", ["n-c/gpu0"]),
    "p7": ("n-b", ["n-b/gpu1"]),
    "p8": ("n-b", ["n-b/gpu2"]),
    "p9": ("n-b", ["n-b/gpu1"]),
    "pm": ("n-b", ["n-b/gpu3", "n-b/gpu4"]),
    "pv": (None, None),
    "pp": (None, None),
}


def test_placement_replay_on_a_tiny_trace(tmp_path):
    lake, report = tiny_lake(tmp_path)
    got = jobs(lake)
    assert {r["pod"]: (r["node"], r["gpu_uuids"]) for r in got.iter_rows(named=True)} == EXPECTED_PLACEMENT
    reasons = {
        r["pod"]: r["reason"] for r in got.iter_rows(named=True) if r["reason"] not in (None, "Deleted", "TraceEnded")
    }
    assert reasons == {
        "p5": "unplaced: no node had 2 GPU(s) of model T4 with 1000 milli free, 1000 CPU milli and 1024 MiB free "
        "at the scheduled time",
        "pv": "unplaced: no node has GPU model V100M32",
    }
    assert report.unplaced == 2
    assert (report.rows_read, report.rows_imported, report.rows_rejected, report.rows_skipped) == (13, 12, 0, 1)
    assert report.skipped == {"CPU-only pod (num_gpu 0): not a GPU job": 1}


def test_tiny_trace_rows_map_times_status_and_shares(tmp_path):
    lake, _ = tiny_lake(tmp_path)
    rows = {r["pod"]: r for r in jobs(lake).iter_rows(named=True)}
    o = DEFAULT_ORIGIN

    def s(n):
        return o + dt.timedelta(seconds=n)

    p3 = rows["p3"]
    assert p3["job_id"] == "alibaba-2023/default/p3"
    assert (p3["submitted_at"], p3["scheduled_at"], p3["finished_at"]) == (s(25), s(30), s(60))
    assert (p3["status"], p3["queue"], p3["tenant"], p3["gpu_model"]) == ("succeeded", "LS", None, "T4")
    assert (p3["gpus"], p3["gpu_sharing"], p3["source"]) == (0.5, "fraction", "import")
    assert (rows["pm"]["gpus"], rows["pm"]["gpu_sharing"]) == (2.0, "exclusive")
    assert rows["p2"]["status"] == "failed" and rows["p2"]["queue"] == "BE"
    # Running at the trace's last second (1000): still running then, closed there (a trace is history).
    assert (rows["p9"]["status"], rows["p9"]["reason"]) == ("running", "TraceEnded")
    assert (rows["p9"]["finished_at"], rows["p9"]["updated_at"]) == (s(1000), s(1000))
    assert rows["p9"]["gpu_model"] == "G2"  # the model of the node it was placed on
    # Running, or Pending, but deleted before the end: cancelled, as the k8s source records a deleted pod.
    assert (rows["p1"]["status"], rows["p1"]["reason"], rows["p1"]["finished_at"]) == ("cancelled", "Deleted", s(100))
    pp = rows["pp"]
    assert (pp["status"], pp["reason"], pp["scheduled_at"], pp["finished_at"], pp["node"]) == (
        "cancelled",
        "Deleted",
        None,
        s(500),
        None,
    )
    assert rows["p5"]["status"] == "cancelled"  # its reason stays the placement's (checked above)
    assert rows["p5"]["gpu_model"] == "T4" and rows["pv"]["gpu_model"] == "V100M32"  # unplaced: the one allowed


def test_tiny_trace_nodes(tmp_path):
    lake, report = tiny_lake(tmp_path)
    got = scan(lake, "nodes").collect().sort("node")
    assert report.nodes_imported == 4
    assert got.select("node", "gpu_model", "gpu_count").rows() == [
        ("n-a", "T4", 2),
        ("n-b", "G2", 8),
        ("n-c", "T4", 1),
        ("n-d", None, 0),
    ]
    assert got["labels"][1].to_list() == [
        {"key": "cpu_milli", "value": "64000"},
        {"key": "memory_mib", "value": "262144"},
    ]
    end = DEFAULT_ORIGIN + dt.timedelta(seconds=1000)
    assert set(got["first_seen"]) == {DEFAULT_ORIGIN} and set(got["last_seen"]) == {end}


def test_origin_moves_every_time(tmp_path):
    origin = dt.datetime(2024, 6, 1, tzinfo=UTC)
    import_alibaba_2023(TINY, tmp_path, defaults(), origin=origin)
    row = jobs(tmp_path).filter(pl.col("pod") == "p3").row(0, named=True)
    assert row["submitted_at"] == origin + dt.timedelta(seconds=25)
    with pytest.raises(UsageError, match="has no time zone"):
        import_alibaba_2023(TINY, tmp_path, defaults(), origin=dt.datetime(2024, 6, 1))


def test_trace_import_is_idempotent(tmp_path):
    lake, first = tiny_lake(tmp_path)
    before_jobs, before_nodes = jobs(lake), scan(lake, "nodes").collect().sort("node")
    files = sorted(table_files(lake, "jobs") + table_files(lake, "nodes") + table_files(lake, "pod_shapes"))
    _, second = tiny_lake(tmp_path)
    assert sorted(second.files) == sorted(first.files) == files
    assert sorted(table_files(lake, "jobs") + table_files(lake, "nodes") + table_files(lake, "pod_shapes")) == files
    assert jobs(lake).equals(before_jobs) and scan(lake, "nodes").collect().sort("node").equals(before_nodes)


BAD_PODS = [
    (3, "cpu_milli 'lots' is not an integer"),
    (4, "gpu_milli 0 is not in 1..1000 for a pod with 1 GPU(s)"),
    (5, "unknown pod_phase 'Evicted' (known: Pending, Running, Succeeded, Failed)"),
    (6, "scheduled_time is empty for a Running pod"),
    (7, "scheduled_time 10 is before creation_time 50"),
    (8, "deletion_time 5 is before scheduled_time 10"),
    (9, "pod 'ok1' listed twice (first on line 2)"),
    (10, "expected 11 fields, got 7"),
    (11, "num_gpu '-1' is negative"),
]


def test_bad_pod_rows_are_rejected_with_line_and_reason(tmp_path):
    lake, report = tiny_lake(tmp_path, workload="bad")
    path = str(TINY / "openb_pod_list_bad.csv")
    assert report.rejections == [Rejection(path, line, reason) for line, reason in BAD_PODS]
    assert (report.rows_read, report.rows_imported, report.rows_rejected) == (10, 1, len(BAD_PODS))
    assert jobs(lake)["job_id"].to_list() == ["alibaba-2023/bad/ok1"]


def test_trace_inputs_that_cannot_be_imported(tmp_path):
    with pytest.raises(ImportFileError, match=r"openb_pod_list_notimes\.csv:1: missing column\(s\) gpu_spec, qos, "):
        import_alibaba_2023(TINY, tmp_path, defaults(), workload="notimes")
    with pytest.raises(
        ImportFileError,
        match=r"openb_pod_list_nope\.csv: no such pod list; workloads in .*: "
        r"bad, default, notimes, open",
    ):
        import_alibaba_2023(TINY, tmp_path, defaults(), workload="nope")
    with pytest.raises(UsageError, match="workload '../default'"):
        import_alibaba_2023(TINY, tmp_path, defaults(), workload="../default")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ImportFileError, match="no node list: expected openb_node_list_all_node.csv or"):
        import_alibaba_2023(empty, tmp_path, defaults())
    broken = tmp_path / "broken"
    shutil.copytree(TINY, broken)
    (broken / "openb_node_list_all_node.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,8000,1024,2,\n")
    with pytest.raises(ImportFileError, match=r"openb_node_list_all_node\.csv:2: 2 GPUs but no model"):
        import_alibaba_2023(broken, tmp_path / "lake", defaults())
    assert not (tmp_path / "lake").exists()  # nothing written when the node list is bad


# ---------------------------------------------------------------- Alibaba openb trace, real data

real = pytest.mark.skipif(not OPENB.is_dir(), reason=f"{OPENB} is absent (research-use data, not in the repo)")


@pytest.fixture(scope="module")
def openb_lake(tmp_path_factory):
    if not OPENB.is_dir():
        pytest.skip(f"{OPENB} is absent")
    lake = tmp_path_factory.mktemp("openb") / "lake"
    t0 = time.perf_counter()
    report = import_alibaba_2023(OPENB, lake, defaults())
    print(f"openb default import: {time.perf_counter() - t0:.2f} s, {len(report.files)} files")
    return lake, report


@real
@pytest.mark.shared_data
def test_openb_nodes_from_the_lake(openb_lake):
    lake, report = openb_lake
    q = Lake(lake)
    n, gpu_nodes, gpus = q.execute(
        "SELECT count(*), count(*) FILTER (WHERE gpu_count > 0), sum(gpu_count)::BIGINT FROM nodes"
    ).rows[0]
    assert (n, gpu_nodes, gpus) == (1523, 1213, 6212)
    assert report.nodes_imported == 1523


@real
@pytest.mark.shared_data
def test_openb_default_pods_from_the_lake(openb_lake):
    lake, report = openb_lake
    assert (report.rows_read, report.rows_imported, report.rows_skipped, report.rows_rejected) == (8152, 7064, 1088, 0)
    q = Lake(lake)
    n, total, fraction = q.execute(
        "SELECT count(*), sum(gpus), count(*) FILTER (WHERE gpu_sharing = 'fraction') FROM jobs"
    ).rows[0]
    assert n == 7064 and fraction == 3078
    assert total == pytest.approx(6086.8)
    statuses = dict(q.execute("SELECT status, count(*) FROM jobs GROUP BY status").rows)
    # The README's phases (Running 5,193 / Failed 1,870 / Pending 897 / Succeeded 192) less CPU-only pods, with
    # the Running and Pending pods deleted before the trace's end (4,117 and 861) counted as cancelled.
    assert statuses == {"running": 32, "cancelled": 4117 + 861, "failed": 1869, "succeeded": 185}
    # Every scheduled GPU pod found a node: at most ~51 pods are alive at once on 6,212 GPUs.
    assert report.unplaced == 0
    assert q.execute("SELECT count(*) FROM jobs WHERE scheduled_at IS NOT NULL AND node IS NULL").rows[0][0] == 0


@real
@pytest.mark.shared_data
def test_openb_queue_delay_from_the_lake(openb_lake):
    lake, _ = openb_lake
    q = Lake(lake)
    n, p50, p90, p99 = q.execute(
        "SELECT count(*), quantile_disc(d, 0.5), quantile_disc(d, 0.9), quantile_disc(d, 0.99) "
        "FROM (SELECT epoch(scheduled_at - submitted_at) AS d FROM jobs WHERE scheduled_at IS NOT NULL)"
    ).rows[0]
    # Over the 6,203 scheduled GPU pods the lake holds. The trace README's 2 / 106 / 874 s are over all 7,255
    # scheduled pods, CPU-only ones included (checked from the trace itself below); those are not GPU jobs.
    assert (n, p50, p90, p99) == (6203, 2, 139, 1110)


@real
@pytest.mark.shared_data
def test_openb_readme_queue_figures_hold_for_all_scheduled_pods():
    from gpuledger.analytics.imports import ImportReport
    from gpuledger.analytics.imports.alibaba2023 import read_pods

    path = OPENB / "openb_pod_list_default.csv"
    pods = read_pods(path, path.read_bytes(), ImportReport(str(path)))
    d = pl.Series([p.scheduled_s - p.created_s for p in pods if p.scheduled_s is not None])
    assert d.len() == 7255
    assert [d.quantile(q, "nearest") for q in (0.5, 0.9, 0.99)] == [2, 106, 874]


@real
@pytest.mark.shared_data
def test_openb_placement_never_overfills_a_gpu(openb_lake):
    lake, _ = openb_lake
    placed = scan(lake, "jobs").filter(pl.col("node").is_not_null()).collect()
    share = placed.with_columns((pl.col("gpus") / pl.col("gpu_uuids").list.len() * 1000).round().alias("milli"))
    far = dt.datetime(2100, 1, 1, tzinfo=UTC)
    events = pl.concat(
        [
            share.select(pl.col("gpu_uuids"), pl.col("scheduled_at").alias("t"), pl.col("milli")),
            share.select(pl.col("gpu_uuids"), pl.col("finished_at").fill_null(far).alias("t"), -pl.col("milli")),
        ]
    ).explode("gpu_uuids")
    # Departures before arrivals at the same instant, as in the replay.
    peak = events.sort("gpu_uuids", "t", "milli").select(pl.col("milli").cum_sum().over("gpu_uuids").max()).item()
    assert 0 < peak <= 1000
    gpus_of = dict(scan(lake, "nodes").select("node", "gpu_count").collect().rows())
    idx = placed.explode("gpu_uuids").select("node", pl.col("gpu_uuids").str.extract(r"/gpu(\d+)$").cast(pl.Int32))
    assert all(i < gpus_of[node] for node, i in idx.rows())


# ---------------------------------------------------------------- Alibaba DLRM serving trace 2025


def test_dlrm_tiny_trace(tmp_path):
    import dataclasses

    cfg = dataclasses.replace(defaults(), tenants=(Tenant("ads", ("app_0",), 1.0, {}, None),))
    report = import_alibaba_2025(DLRM_TINY, tmp_path, cfg)
    path = str(DLRM_TINY / "disaggregated_DLRM_trace.csv")
    assert report.rejections == [
        Rejection(path, 7, "scheduled_time 400 is before creation_time 500"),
        Rejection(path, 8, "deletion_time 450 is before creation_time 500"),
        Rejection(path, 9, "gpu_request 'one' is not a number"),
        Rejection(path, 10, "creation_time '-5' is not a time in the trace window (seconds >= 0)"),
        Rejection(path, 11, "instance 'i-new' listed twice (first on line 3)"),
    ]
    assert (report.rows_read, report.rows_imported, report.rows_skipped) == (10, 4, 1)
    o = dt.datetime(2025, 1, 1, tzinfo=UTC)

    def s(n):
        return o + dt.timedelta(seconds=n)

    got = {r["pod"]: r for r in jobs(tmp_path).iter_rows(named=True)}
    cols = ("status", "reason", "submitted_at", "scheduled_at", "finished_at", "updated_at")
    assert {k: tuple(r[c] for c in cols) for k, r in got.items()} == {
        # Alive across the whole window: there from second 0, and closed at the window's last event (7,200.25 s).
        "i-always": ("running", "TraceEnded", s(0), s(0), s(7200.25), s(7200.25)),
        "i-new": ("running", "TraceEnded", s(100), s(160.5), s(7200.25), s(7200.25)),  # 100.0000000001 s: whole us
        "i-short": ("cancelled", "Deleted", s(200), s(200), s(3800), s(3800)),
        "i-old": ("cancelled", "Deleted", s(0), s(0), s(7200.25), s(7200.25)),  # there when the window began
    }
    assert {k: (r["namespace"], r["tenant"]) for k, r in got.items()} == {
        "i-always": ("app_0", "ads"),
        "i-new": ("app_0", "ads"),
        "i-short": ("app_1", None),
        "i-old": ("app_1", None),
    }
    assert {(r["gpus"], r["gpu_sharing"], r["node"], r["job_id"][:13]) for r in got.values()} == {
        (1.0, "exclusive", None, "alibaba-2025/")
    }
    again = import_alibaba_2025(DLRM_TINY, tmp_path, cfg)
    assert again.files == report.files and jobs(tmp_path).height == 4


@pytest.mark.skipif(not DLRM.is_dir(), reason=f"{DLRM} is absent (research-use data, not in the repo)")
@pytest.mark.shared_data
def test_dlrm_real_trace(tmp_path):
    report = import_alibaba_2025(DLRM, tmp_path, defaults())
    assert (report.rows_read, report.rows_imported, report.rows_skipped, report.rows_rejected) == (
        23871,
        7386,
        16485,
        0,
    )
    q = Lake(tmp_path)
    assert dict(q.execute("SELECT status, count(*) FROM jobs GROUP BY status").rows) == {
        "running": 3322,
        "cancelled": 4064,
    }
    n_apps, created_before = q.execute(
        "SELECT count(DISTINCT namespace), count(*) FILTER (WHERE submitted_at = TIMESTAMPTZ '2025-01-01 00:00Z') "
        "FROM jobs"
    ).rows[0]
    # README: 7,280 rows have no creation_time; 3,123 of them are GPU instances (the rest are CPU-node ones).
    assert (n_apps, created_before) == (156, 3123)
