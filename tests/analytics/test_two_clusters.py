"""Two clusters in one lake, by hand: a job id and a node name in both, and one analysis that computes both.

Cluster a: node n1 with H100s A-0 (1% busy: idle) and A-1 (60%); job J1 (vision) holds A-0 from 10:00, and J2 (nlp,
2 GPUs) waits from 11:00. Cluster b: node n1 with one H100 B-0 (60%); its own job J1 (vision) holds it from 10:00.
Telemetry every 10 minutes, Nov 2 10:00 to 13:00; the analysis runs at 13:00 with idle capacity charged to nobody,
so a tenant's cost is its GPU-hours x 2.49 USD.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import polars as pl
import pytest

from gpuledger.analytics.queue_time import queue_depth
from gpuledger.analytics.runner import run
from gpuledger.analytics.utilization import job_hourly
from gpuledger.config import defaults
from gpuledger.lake import scan

from builders import H100, allocation, allocations, at, epoch_us, job_state, write_rows

GPUS = {"a": {"A-0": 1.0, "A-1": 60.0}, "b": {"B-0": 60.0}}  # cluster -> GPU -> util %
PODS = {"A-0": "pod-J1", "B-0": "pod-J1"}  # the pod telemetry sees on a GPU (allocated in gpu_hourly)
NOW = at(2, 13)


def _samples() -> list[dict]:
    rows, t = [], at(2, 10)
    while t < NOW:
        for cluster, gpus in GPUS.items():
            for gpu, util in gpus.items():
                rows.append(
                    dict(cluster=cluster, node="n1", gpu_uuid=gpu, model=H100, util_gpu_pct=util, power_w=300.0)
                    | dict(pod=PODS.get(gpu), source="t", ts=epoch_us(t))
                )
        t += dt.timedelta(minutes=10)
    return rows


def _job(cluster, job_id, tenant, gpus, gpu=None, **times):
    status = "running" if gpu else "pending"
    return job_state(
        job_id,
        status,
        times["submitted_at"],
        cluster=cluster,
        tenant=tenant,
        namespace=tenant,
        pod=f"pod-{job_id}",
        gpu_model=H100,
        gpus=gpus,
        gpu_sharing="none",
        node="n1" if gpu else None,
        gpu_uuids=[gpu] if gpu else None,
        **times,
    )


def _config(cluster: str):
    cfg = defaults()
    return dataclasses.replace(cfg, cluster=cluster, analytics=dataclasses.replace(cfg.analytics, idle_policy="none"))


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    lake = tmp_path_factory.mktemp("two") / "lake"
    write_rows(lake, "gpu_samples", _samples())
    ran = dict(submitted_at=at(2, 10), scheduled_at=at(2, 10))
    jobs = [
        _job("a", "J1", "vision", 1.0, "A-0", **ran),
        _job("a", "J2", "nlp", 2.0, submitted_at=at(2, 11)),
        _job("b", "J1", "vision", 1.0, "B-0", **ran),
    ]
    write_rows(lake, "jobs", jobs)
    run(lake, until_s=NOW.timestamp(), cfg=_config("b"))  # any cluster's config: every cluster is computed
    return lake


def _read(lake, table) -> pl.DataFrame:
    return scan(lake, table).collect()


def test_job_hourly_keeps_a_shared_job_id_apart():
    held = allocations(
        allocation("J1", "vision", "A-0", 1.0, at(2, 10), at(2, 12), cluster="a"),
        allocation("J1", "vision", "B-0", 1.0, at(2, 10), at(2, 12), cluster="b"),
    )
    hourly = pl.LazyFrame(
        {
            "gpu_uuid": ["A-0", "A-0", "B-0", "B-0"],
            "hour": [at(2, 10), at(2, 11)] * 2,
            "util_gpu_pct_mean": [1.0, 1.0, 60.0, 60.0],
            "sm_active_ratio_mean": [None] * 4,
            "mem_used_bytes_max": [0] * 4,
            "model": [H100] * 4,
        },
        schema_overrides={"hour": pl.Datetime("us", "UTC"), "sm_active_ratio_mean": pl.Float64},
    )
    got = job_hourly(held, hourly, threshold_pct=5, window_h=2).collect()
    idle = {(r["cluster"], r["hour"].hour): r["idle_gpu_hours"] for r in got.iter_rows(named=True)}
    # a's J1 idled two hours (a run of the window: waste); b's J1 was busy (its id's idle hours are not its own).
    assert idle == {("a", 10): 1.0, ("a", 11): 1.0, ("b", 10): 0.0, ("b", 11): 0.0}


def test_queue_depth_per_cluster():
    stats = pl.LazyFrame(
        {
            "cluster": ["a", "b"],
            "job_id": ["J1", "J1"],
            "gpu_model": [H100, H100],
            "gpus": [2.0, 1.0],
            "submitted_at": [at(2, 10), at(2, 10, 5)],
            "scheduled_at": [at(2, 10, 20), at(2, 10, 15)],
            "finished_at": [None, None],
        },
        schema_overrides={c: pl.Datetime("us", "UTC") for c in ("submitted_at", "scheduled_at", "finished_at")},
    )
    got = queue_depth(stats, at(2, 10), at(2, 10, 30), by=("cluster", "gpu_model")).collect()
    rows = [(r["ts"].minute, r["cluster"], r["pending_jobs"], r["pending_gpus"]) for r in got.iter_rows(named=True)]
    # a's job waits 10:00-10:20 (ticks 0, 5, 10, 15), b's 10:05-10:15 (ticks 5, 10): as of each tick, inclusive.
    assert rows == [
        (0, "a", 1, 2.0),
        (5, "a", 1, 2.0),
        (5, "b", 1, 1.0),
        (10, "a", 1, 2.0),
        (10, "b", 1, 1.0),
        (15, "a", 1, 2.0),
    ]


def test_a_run_computes_each_cluster_of_the_lake(lake):
    hourly = _read(lake, "job_hourly")
    idle = hourly.group_by("cluster").agg(pl.col("idle_gpu_hours").sum()).sort("cluster")
    assert idle.rows() == [("a", 3.0), ("b", 0.0)]  # 10:00-13:00 on A-0 idle; B-0 busy
    queue = _read(lake, "queue_depth")
    assert set(queue["cluster"]) == {"a"} and queue.height == 24  # J2's ticks 11:00-12:55, in a only
    assert set(queue["pending_gpus"]) == {2.0}
    fleet = {(r["cluster"], r["hour"].hour): r for r in _read(lake, "fleet_hourly").iter_rows(named=True)}
    assert (fleet[("a", 11)]["gpus"], fleet[("a", 11)]["pending_gpus"], fleet[("a", 11)]["demand_gpus"]) == (2, 2, 3)
    assert (fleet[("b", 11)]["gpus"], fleet[("b", 11)]["pending_gpus"], fleet[("b", 11)]["demand_gpus"]) == (1, 0, 1)
    frag = {(r["cluster"], r["ts"].hour): r for r in _read(lake, "fragmentation").iter_rows(named=True)}
    # n1 of a: A-1 free, A-0 held; n1 of b: B-0 held. One node "n1" of three GPUs would be a mix of both.
    assert (frag[("a", 11)]["gpus"], frag[("a", 11)]["free_gpus"]) == (2, 1.0)
    assert (frag[("b", 11)]["gpus"], frag[("b", 11)]["free_gpus"]) == (1, 0.0)
    holds = _read(lake, "idle_holds")
    assert holds.select("cluster", "job_id", "gpu_uuid").rows() == [("a", "J1", "A-0")]


def test_decisions_per_cluster_with_a_budget_across_clusters(lake):
    d = {
        (r["cluster"], r["tenant"]): r
        for r in _read(lake, "decisions").filter(pl.col("gpu_model").is_null()).iter_rows(named=True)
    }
    assert {c for c, _ in d} == {"a", "b"}
    for c in ("a", "b"):
        vision = d[(c, "vision")]
        # Each cluster's webhook caps its own GPUs: J1 holds one in each, of vision's "*" quota of 64.
        assert (vision["allocated_gpus"], vision["headroom_gpus"]) == (1.0, 63.0)
        assert vision["idle_gpus_now"] == (1.0 if c == "a" else 0.0)
        # The budget is money: 3 GPU-hours in each cluster, 6 x 2.49 USD, against 40,000 USD.
        assert vision["spent_gpu_h"] == pytest.approx(6.0)
        assert vision["spent_usd"] == pytest.approx(6 * 2.49)
        assert vision["budget_left_usd"] == pytest.approx(40_000 - 6 * 2.49)
        assert vision["usage_share"] == 1.0  # fair share within the cluster: vision used all of its GPU-hours
        assert d[(c, "nlp")]["allocated_gpus"] == 0.0


def test_tenants_once_per_cluster(lake):
    tenants = _read(lake, "tenants")
    names = [t.name for t in defaults().tenants]
    assert sorted(tenants.select("cluster", "tenant").rows()) == sorted((c, n) for c in "ab" for n in names)


def test_another_clusters_config_changes_nothing(lake):
    tables = ("job_hourly", "queue_depth", "fleet_hourly", "fragmentation", "decisions", "tenants", "idle_holds")
    before = {t: _read(lake, t) for t in tables}
    run(lake, until_s=NOW.timestamp(), cfg=_config("a"))
    for t in tables:
        a, b = before[t], _read(lake, t)
        assert a.sort(a.columns[:6], nulls_last=True).equals(b.sort(b.columns[:6], nulls_last=True)), t
