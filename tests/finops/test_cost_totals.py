"""Every cost figure agrees to the cent: cost_daily, chargeback_monthly, tenant_daily, cost_allocation, the FOCUS
view, job_stats and the dashboards' overview and tenants numbers, over a hand-built lake whose telemetry starts
mid-day, has a silent day, and a job on a GPU nobody names.

Two H100s (G1, G2) at $2 per GPU-hour. Telemetry: Nov 2 12:00-24:00, nothing on Nov 3, Nov 4 00:00-12:00 (the
analysis runs to Nov 4 12:00). Jobs:
- A, vision: all of G1, Nov 2 04:00-18:00 (began 8 h before telemetry did);
- B, nlp: all of G2, Nov 3 00:00 - Nov 4 06:00 (through the silent day);
- D, research: one H100 nobody named, Nov 4 00:00-02:00.

By hand, hour by hour a GPU is there when it reports or when a job holds it; idle is the reported time no job held:
- Nov 2: A 14 h ($28). G1 there 04:00-24:00, held 04:00-18:00: idle 6 h; G2 reported 12 h, idle 12 h: 18 h ($36),
  all vision's (the only tenant on H100 that day). Day: $64.
- Nov 3: B 24 h ($48); nothing reported, nothing idle. Day: $48.
- Nov 4: B 6 h ($12), D 2 h ($4); G1 idle 12 h, G2 idle 6 h: 18 h ($36), shared by cost 12 : 4: nlp $27,
  research $9. D's GPU is not G1 or G2, so it takes nothing from their idle time. Day: $52.
Month: $164 = vision 64 + nlp 87 + research 13; jobs alone $92.

Before cost_daily was made from cost_allocation, cost_daily said Nov 2 = $48 (idle = 24 reported - 14 held: A's
8 h before telemetry counted against G2's idle hours) and Nov 4 = $48 (D's 2 h taken from G1's and G2's idle), the
FOCUS view $52 for Nov 2 (G1's origin max(12 reported, 14 held)), $152 for the month.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

import pytest

from gpuledger.analytics.runner import run
from gpuledger.config import Rate, defaults
from gpuledger.dashboards.data import DashData
from gpuledger.dashboards.filters import Filters
from gpuledger.dashboards.pages import overview, tenants
from gpuledger.query import Lake

from builders import H100, at, epoch_us, finished_job, write_rows

NOV = dt.date(2026, 11, 1)
CFG = dataclasses.replace(defaults(), rates=(Rate("H100", 2.0, dt.date(2026, 1, 1)),))
DAYS = {dt.date(2026, 11, 2): 64.0, dt.date(2026, 11, 3): 48.0, dt.date(2026, 11, 4): 52.0}
TENANTS = {"vision": 64.0, "nlp": 87.0, "research": 13.0}


def samples(start, end):
    """G1 and G2 every 5 minutes in [start, end)."""
    rows, t = [], start
    while t < end:
        for g in ("G1", "G2"):
            row = dict(cluster=CFG.cluster, node="n1", gpu_uuid=g, model=H100, util_gpu_pct=50.0, source="t")
            rows.append(row | {"ts": epoch_us(t)})
        t += dt.timedelta(minutes=5)
    return rows


job = finished_job  # tests/builders.py


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    lake = tmp_path_factory.mktemp("totals") / "lake"
    reported = samples(at(2, 12), at(3, 0)) + samples(at(4, 0), at(4, 12))  # Nov 3 is silent
    write_rows(lake, "gpu_samples", reported)
    jobs = [
        job("A", "vision", "G1", at(2, 4), at(2, 18)),
        job("B", "nlp", "G2", at(3, 0), at(4, 6)),
        job("D", "research", None, at(4, 0), at(4, 2)),
    ]
    write_rows(lake, "jobs", jobs)
    run(lake, until_s=at(4, 12).timestamp(), cfg=CFG)
    return lake


def one(lake, sql):
    with Lake(lake) as q:
        return q.execute(sql).rows


def test_each_day_costs_what_the_hand_computation_says_in_every_table(lake):
    per_day = {
        "cost_daily": "SELECT date, sum(cost_usd + idle_share_usd) FROM cost_daily GROUP BY 1",
        "tenant_daily": "SELECT day, sum(cost_usd + idle_share_usd) FROM tenant_daily GROUP BY 1",
        "cost_allocation": "SELECT date, sum(cost_usd) FROM cost_allocation GROUP BY 1",
        "focus_cost": "SELECT CAST(ChargePeriodStart AS DATE), sum(BilledCost) FROM focus_cost GROUP BY 1",
    }
    for name, sql in per_day.items():
        got = {d: float(v) for d, v in one(lake, sql)}
        assert got == pytest.approx(DAYS, abs=0.005), name


def test_each_tenant_and_the_month_agree_to_the_cent(lake):
    month = sum(DAYS.values())
    ((focus,),) = one(lake, "SELECT sum(BilledCost) FROM focus_cost WHERE BillingPeriodStart = '2026-11-01'")
    assert focus == Decimal("164")  # exact: 82 GPU-hours at $2
    charged = dict(one(lake, "SELECT tenant, total_usd FROM chargeback_monthly WHERE month = '2026-11-01'"))
    assert charged == pytest.approx(TENANTS, abs=0.005)
    ((jobs,),) = one(lake, "SELECT sum(cost_usd) FROM job_stats")
    assert jobs == pytest.approx(28 + 48 + 12 + 4, abs=0.005)
    data = DashData(lake)
    try:
        f = Filters(dt.date(2026, 11, 1), dt.date(2026, 11, 30))
        assert overview.month_cost(data, f, NOV) == pytest.approx(month, abs=0.005)
        page = {r["tenant"]: r["total_usd"] for r in tenants.cost(data, f).iter_rows(named=True)}
        assert page == pytest.approx(TENANTS, abs=0.005)
        for t, usd in TENANTS.items():
            assert overview.month_cost(data, Filters(f.start, f.end, tenant=t), NOV) == pytest.approx(usd, abs=0.005)
    finally:
        data.close()


def test_the_silent_day_charges_the_job_that_held_a_gpu_and_no_idle_time(lake):
    rows = one(
        lake,
        "SELECT job_id, gpu_uuid, gpu_hours FROM cost_allocation WHERE date = '2026-11-03' ORDER BY job_id NULLS LAST",
    )
    assert [(j, g, round(h, 9)) for j, g, h in rows] == [("B", "G2", 24.0), (None, "G2", 0.0)]
