"""Job figures on a hand-made day of jobs, every expected number worked out by hand in the comments."""

import polars as pl
import pytest

from gpuledger.analytics.allocation import allocations, gpu_of_pod
from gpuledger.analytics.jobs import job_stats, latest
from gpuledger.analytics.outcomes import failure_reasons, outcomes
from gpuledger.analytics.queue_time import queue_depth, queue_stats
from gpuledger.lake import conform, frame_from_rows

from builders import at, job_state

NOW = at(2, 13)

A = dict(tenant="vision", namespace="vision-train", pod="a", gpu_model="H100", gpus=2.0, submitted_at=at(2, 10))
B = dict(tenant="nlp", namespace="nlp", pod="b", gpu_model="H100", gpus=0.5, submitted_at=at(2, 11))
C = dict(
    tenant="vision",
    namespace="vision-dev",
    pod="c",
    gpu_model="H100",
    gpus=1 / 7,
    mig_profile="1g.10gb",
    gpu_sharing="mig",
    submitted_at=at(2, 9),
)
D = dict(tenant="nlp", namespace="nlp", pod="d", gpu_model="H100", gpus=1.0, submitted_at=at(2, 12))
E = dict(tenant="nlp", namespace="nlp", pod="p-e", gpu_model="H100", gpus=1.0, submitted_at=at(2, 12))
ROWS = [
    job_state("A", "pending", at(2, 10), **A),
    job_state(
        "A", "running", at(2, 10, 10), **A, scheduled_at=at(2, 10, 10), started_at=at(2, 10, 11), gpu_uuids=["G1", "G2"]
    ),
    job_state(
        "A",
        "succeeded",
        at(2, 12, 10),
        **A,
        scheduled_at=at(2, 10, 10),
        started_at=at(2, 10, 11),
        finished_at=at(2, 12, 10),
        gpu_uuids=["G1", "G2"],
        reason="Completed",
    ),
    job_state("B", "running", at(2, 11), **B, scheduled_at=at(2, 11), started_at=at(2, 11, 1), gpu_uuids=["G3"]),
    job_state(
        "B",
        "failed",
        at(2, 11, 31),
        **B,
        scheduled_at=at(2, 11),
        started_at=at(2, 11, 1),
        finished_at=at(2, 11, 31),
        gpu_uuids=["G3"],
        reason="OOMKilled",
    ),
    job_state("C", "running", at(2, 9, 30), **C, scheduled_at=at(2, 9, 30), gpu_uuids=["MIG-x"]),
    job_state("D", "pending", at(2, 12), **D),
    # E: no gpu_uuids in its row (k8s did not name them)
    job_state("E", "running", at(2, 12, 5), **E, scheduled_at=at(2, 12, 5), started_at=at(2, 12, 5)),
]


@pytest.fixture
def jobs():
    return conform("jobs", frame_from_rows("jobs", ROWS)).lazy()  # the shape scan(lake, "jobs") gives


def test_latest_state_per_job(jobs):
    got = latest(jobs).collect().sort("job_id")
    assert got["status"].to_list() == ["succeeded", "failed", "running", "pending", "running"]


def test_job_stats_by_hand(jobs):
    s = {r["job_id"]: r for r in job_stats(jobs, NOW).collect().iter_rows(named=True)}
    a = s["A"]
    assert a["queue_s"] == 600  # 10:10 - 10:00
    assert a["run_s"] == 7140  # 12:10 - 10:11
    assert a["held_s"] == 7200 and a["gpu_hours"] == pytest.approx(4.0)  # 2 GPUs x 2 h
    assert a["expansion"] == pytest.approx((600 + 7140) / 7140)
    assert s["B"]["gpu_hours"] == pytest.approx(0.5 * 1860 / 3600)  # half a GPU for 31 min
    assert s["B"]["size_bucket"] == "<1"
    c = s["C"]  # still running at 13:00: open intervals end at now
    assert c["held_s"] == 3.5 * 3600 and c["gpu_hours"] == pytest.approx(0.5)  # 1/7 of a GPU x 3.5 h
    assert c["run_s"] == 12600  # never reported started: run from binding
    assert s["D"]["queue_s"] == 3600 and s["D"]["gpu_hours"] is None  # pending: waited 1 h so far, no GPU yet


def test_queue_stats_by_tenant(jobs):
    q = {r["tenant"]: r for r in queue_stats(job_stats(jobs, NOW), by=("tenant",)).collect().iter_rows(named=True)}
    v = q["vision"]  # waits 600 (A) and 1800 (C)
    assert v["jobs"] == 2 and v["wait_mean_s"] == 1200 and v["wait_max_s"] == 1800
    assert v["wait_p50_s"] == 1200  # linear between the two
    assert v["wait_p90_s"] == pytest.approx(600 + 0.9 * 1200)
    n = q["nlp"]  # B waited 0, E 300; D is still pending and not counted
    assert n["jobs"] == 2 and n["wait_p50_s"] == 150 and n["wait_p99_s"] == pytest.approx(0.99 * 300)


def test_queue_depth(jobs):
    d = queue_depth(job_stats(jobs, NOW), at(2, 9), NOW, "5m", by=()).collect()
    by_ts = {r["ts"]: r for r in d.iter_rows(named=True)}
    assert by_ts[at(2, 9, 0)]["pending_jobs"] == 1  # C waits 09:00-09:30
    assert by_ts[at(2, 10, 5)]["pending_jobs"] == 1  # A waits 10:00-10:10
    assert at(2, 10, 10) not in by_ts  # A bound at 10:10: nobody waits
    assert by_ts[at(2, 12, 0)]["pending_jobs"] == 2  # D and E
    assert by_ts[at(2, 12, 5)]["pending_gpus"] == 1.0  # E bound at 12:05; D waits
    per_model = queue_depth(job_stats(jobs, NOW), at(2, 9), NOW, "5m").collect()
    assert per_model.drop("gpu_model").equals(d) and set(per_model["gpu_model"]) == {"H100"}  # one model here


def test_outcomes(jobs):
    o = {r["tenant"]: r for r in outcomes(job_stats(jobs, NOW), by=("tenant",)).collect().iter_rows(named=True)}
    assert (o["vision"]["jobs"], o["vision"]["succeeded"], o["vision"]["succeeded_rate"]) == (1, 1, 1.0)
    assert o["nlp"]["failed"] == 1 and o["nlp"]["failed_gpu_hours"] == pytest.approx(0.5 * 1860 / 3600)
    (r,) = failure_reasons(job_stats(jobs, NOW)).collect().iter_rows(named=True)
    assert (r["tenant"], r["reason"], r["jobs"]) == ("nlp", "OOMKilled", 1)


def test_allocations_whole_fraction_mig_and_telemetry(jobs):
    samples = pl.LazyFrame(
        {"cluster": ["c", "c"], "namespace": ["nlp", "nlp"], "pod": ["p-e", "p-e"], "gpu_uuid": ["G4", "G4"]}
    )
    a = allocations(jobs, NOW, gpu_of_pod(samples)).collect()
    rows = sorted((r["job_id"], r["gpu_uuid"], round(r["share"], 6), r["open"]) for r in a.iter_rows(named=True))
    assert rows == [
        ("A", "G1", 1.0, False),
        ("A", "G2", 1.0, False),  # 2 whole GPUs: 1.0 of each
        ("B", "G3", 0.5, False),  # half of G3 (fraction)
        ("C", "MIG-x", round(1 / 7, 6), True),  # a 1g MIG slice: 1/7, still held
        ("E", "G4", 1.0, True),  # no gpu_uuids in its job row: telemetry saw pod p-e on G4
    ]
    # Without telemetry E keeps one row with no GPU, so its GPU-hours still count for nlp.
    bare = allocations(jobs, NOW).collect().filter(pl.col("job_id") == "E")
    assert bare["gpu_uuid"].to_list() == [None] and bare["share"].to_list() == [1.0]


def test_time_sliced_replicas_split_their_gpu_moment_by_moment():
    # Two time-sliced pods on G9 (one replica each): T1 10:00-12:00, T2 11:00-13:00. Alone T1 holds all of G9
    # (10-11), together each holds half (11-12), then T2 alone holds all of it (12-13).
    ts = dict(tenant="nlp", namespace="nlp", gpu_model="H100", gpus=1.0, gpu_sharing="time-sliced")
    rows = [
        job_state(
            "T1",
            "succeeded",
            at(2, 12),
            **ts,
            pod="t1",
            submitted_at=at(2, 10),
            scheduled_at=at(2, 10),
            finished_at=at(2, 12),
            gpu_uuids=["G9"],
        ),
        job_state(
            "T2",
            "succeeded",
            at(2, 13),
            **ts,
            pod="t2",
            submitted_at=at(2, 11),
            scheduled_at=at(2, 11),
            finished_at=at(2, 13),
            gpu_uuids=["G9"],
        ),
    ]
    a = allocations(conform("jobs", frame_from_rows("jobs", rows)).lazy(), NOW).collect()
    got = [
        (r["job_id"], r["start"].hour, r["end"].hour, r["share"])
        for r in a.sort("job_id", "start").iter_rows(named=True)
    ]
    assert got == [("T1", 10, 11, 1.0), ("T1", 11, 12, 0.5), ("T2", 11, 12, 0.5), ("T2", 12, 13, 1.0)]
    # GPU-hours: T1 1 + 0.5 = 1.5; T2 0.5 + 1 = 1.5; together exactly the 3 hours G9 was busy
    hours = a.with_columns(((pl.col("end") - pl.col("start")).dt.total_hours() * pl.col("share")).alias("h"))
    assert hours.group_by("job_id").agg(pl.col("h").sum()).sort("job_id")["h"].to_list() == [1.5, 1.5]
