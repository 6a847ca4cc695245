"""Efficiency, waste, cost and waits per workload class: job_hourly and job_stats carry the job's class, and the
class_daily view adds them up per cluster, tenant, class, model and day, on both stores.

Two H100s at $2 per GPU-hour, reporting every 5 minutes on Nov 2: G1 at 80 % utilization, G2 at 0 %. Jobs of
vision:
- T, training, on G1: submitted 09:30, scheduled 10:00, finished 14:00. Held 4 GPU-h, busy 4 x 0.8 = 3.2, idle 0
  (80 % is above the 5 % waste threshold), cost 4 x 2 = $8, waited 1,800 s.
- N, notebook, on G2: submitted and scheduled 10:00, finished 13:00. Held 3 GPU-h, busy 0, idle 3 (three whole
  hours below 5 %, a run of at least the 1 h window), cost $6, waited 0 s.
- O, a job written before classes (no workload_class), on G2 14:00-16:00: held 2, idle 2, cost $4: a null class.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from gpuledger.analytics.runner import run
from gpuledger.config import Rate, defaults
from gpuledger.query import Lake

from builders import H100, at, epoch_us, job_state, put_lake, write_rows

CFG = dataclasses.replace(defaults(), rates=(Rate("H100", 2.0, dt.date(2026, 1, 1)),))


def samples():
    rows, t = [], at(2)
    while t < at(3):
        for g, util in (("G1", 80.0), ("G2", 0.0)):
            rows.append(dict(cluster=CFG.cluster, node="n1", gpu_uuid=g, model=H100, util_gpu_pct=util, source="t"))
            rows[-1]["ts"] = epoch_us(t)
        t += dt.timedelta(minutes=5)
    return rows


def job(job_id, gpu, submitted, scheduled, finished, **cls):
    return job_state(
        job_id,
        "succeeded",
        finished,
        cluster=CFG.cluster,
        tenant="vision",
        namespace="vision-train",
        pod=f"pod-{job_id}",
        gpu_model=H100,
        gpus=1.0,
        gpu_sharing="none",
        submitted_at=submitted,
        scheduled_at=scheduled,
        started_at=scheduled,
        finished_at=finished,
        node="n1",
        gpu_uuids=[gpu],
        **cls,
    )


@pytest.fixture(scope="module")
def local_lake(tmp_path_factory):
    lake = tmp_path_factory.mktemp("classes") / "lake"
    write_rows(lake, "gpu_samples", samples())
    write_rows(
        lake,
        "jobs",
        [
            job("T", "G1", at(2, 9, 30), at(2, 10), at(2, 14), workload_class="training"),
            job("N", "G2", at(2, 10), at(2, 10), at(2, 13), workload_class="notebook"),
            job("O", "G2", at(2, 14), at(2, 14), at(2, 16)),
        ],
    )
    run(lake, until_s=at(3).timestamp(), cfg=CFG)
    return lake


def test_class_daily_gives_each_class_its_hours_waste_cost_and_waits(local_lake, store):
    lake = put_lake(local_lake, store)
    with Lake(lake) as q:
        rows = q.execute(
            "SELECT workload_class, day, jobs, allocated_gpu_hours, busy_gpu_hours, idle_gpu_hours, efficiency, "
            "cost_usd, jobs_scheduled, wait_p50_s, wait_p95_s FROM class_daily WHERE tenant = 'vision' "
            "ORDER BY workload_class NULLS LAST"
        ).rows
    nov2 = dt.date(2026, 11, 2)
    want = [
        ("notebook", nov2, 1, 3.0, 0.0, 3.0, 0.0, 6.0, 1, 0.0, 0.0),
        ("training", nov2, 1, 4.0, 3.2, 0.0, 0.8, 8.0, 1, 1800.0, 1800.0),
        (None, nov2, 1, 2.0, 0.0, 2.0, 0.0, 4.0, 1, 0.0, 0.0),
    ]
    assert len(rows) == len(want)
    for got, exp in zip(rows, want, strict=True):
        assert got[:3] == exp[:3]
        assert got[3:] == pytest.approx(exp[3:], abs=1e-9)


def test_job_tables_carry_the_class(local_lake):
    with Lake(local_lake) as q:
        stats = dict(q.execute("SELECT job_id, workload_class FROM job_stats").rows)
        hourly = q.execute("SELECT DISTINCT job_id, workload_class FROM job_hourly ORDER BY 1").rows
    assert stats == {"T": "training", "N": "notebook", "O": None}
    assert hourly == [("N", "notebook"), ("O", None), ("T", "training")]
