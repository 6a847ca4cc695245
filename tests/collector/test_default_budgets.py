"""The default tenants' budgets mean something on the default simulated fleet: in a whole month one tenant
overruns its budget and the others use 30-90 % of theirs (before: 19-37 % at month end, 1.5-3 % on the 3rd, so
the budget pages were flat and the budget policy never fired)."""

import datetime as dt
from collections import defaultdict

from gpuledger.collector.sim.fleet import Fleet
from gpuledger.config import DEFAULT_RATES, defaults

from builders import at


def month_charges_usd(start: dt.datetime, end: dt.datetime) -> dict[str, float]:
    """Each tenant's charge for [start, end) on the default fleet, as chargeback_monthly computes it with the
    default idle policy (proportional): the fleet's whole cost per model (every GPU-hour at the rate card), shared
    among tenants in proportion to the cost of the GPU time their jobs held on that model."""
    cfg = defaults()
    m0, m1 = start.timestamp(), end.timestamp()
    fleet = Fleet(cfg, m0 - 7 * 86400)  # a week of history first: the month starts with queues, as in a real one
    fleet.advance(m1)
    rate = {r.gpu_model: r.usd_per_gpu_hour for r in DEFAULT_RATES}
    held = defaultdict(float)  # (tenant, model) -> USD of GPU time held in the month
    supply = defaultdict(float)  # model -> USD of every GPU-hour in the month
    for node in fleet.nodes:
        model = node.spec.name
        supply[model] += node.gpu_count * (m1 - m0) / 3600 * rate[model]
        for a in fleet.allocations[node.index]:
            hours = max(0.0, min(a.end_s, m1) - max(a.start_s, m0)) / 3600
            held[(a.job.tenant, model)] += a.job.gpus * hours * rate[model]
    held_by_model = defaultdict(float)
    for (_, model), usd in held.items():
        held_by_model[model] += usd
    charged = defaultdict(float)
    for (tenant, model), usd in held.items():
        charged[tenant] += supply[model] * usd / held_by_model[model]
    return dict(charged)


def test_one_tenant_overruns_its_budget_and_the_others_use_30_to_90_percent():
    charged = month_charges_usd(at(1), at(1, month=12))
    used_pct = {
        t.name: 100 * charged.get(t.name, 0.0) / t.budget_usd_per_month
        for t in defaults().tenants
        if t.budget_usd_per_month
    }
    over = [t for t, pct in used_pct.items() if pct >= 100]
    assert len(over) == 1, used_pct
    assert all(30 <= pct <= 90 for t, pct in used_pct.items() if t not in over), used_pct
