"""The dashboards' per-node GPU counts read a GPU known by its partitions only as one GPU (gpu_hourly.physical's
rule in SQL, dashboards/filters.py PHYSICAL_SQL): the fleet page's node table (drilldown.node_use) and the
fragmentation page's worst nodes.

The hour by hand (Nov 2 10:00 UTC, cluster c, every row 12 samples):
- n1: S1, an MI300X in CPX written as its 8 partitions only, 2 of them held (allocated_ratio 1), partition 0 at
  util 40 % and the others with no activity reading (the exporter reports it on partition 0); G1, a whole MI300X,
  held (allocated 1, util 100 %).
- n2: GPU-h, an H100 with its own row (held) and its 7 MIG instances (free), and G2, a whole H100, free.
"""

from __future__ import annotations

import datetime as dt

import pytest

from gpuledger.dashboards import drilldown
from gpuledger.dashboards.data import DashData
from gpuledger.dashboards.filters import Filters
from gpuledger.dashboards.pages.fragmentation import worst_nodes

from builders import at, epoch_us, write_rows

H = at(2, 10)
MI300X, H100 = "AMD Instinct MI300X OAM", "NVIDIA H100 80GB HBM3"


def _row(node, uuid, parent, model, alloc, util=None):
    return dict(
        cluster="c",
        node=node,
        gpu_uuid=uuid,
        parent_gpu_uuid=parent,
        hour=epoch_us(H),
        model=model,
        samples=12,
        allocated_ratio=alloc,
        busy_ratio=None if util is None else float(util > 0),
        util_gpu_pct_mean=util,
        date=H.date(),
    )


ROWS = (
    [_row("n1", f"S1/p{i}", "S1", MI300X, 1.0 if i < 2 else 0.0, 40.0 if i == 0 else None) for i in range(8)]
    + [_row("n1", "G1", None, MI300X, 1.0, 100.0)]
    + [_row("n2", "GPU-h", None, H100, 1.0, 50.0)]
    + [_row("n2", f"GPU-h/gi{i}", "GPU-h", H100, 0.0, 0.0) for i in range(1, 8)]
    + [_row("n2", "G2", None, H100, 0.0, 0.0)]
)


@pytest.fixture
def data(tmp_path):
    lake = tmp_path / "lake"
    write_rows(lake, "gpu_hourly", ROWS)
    # the hour worst_nodes reads is fleet_hourly's latest (its figures play no part here)
    fleet = dict(hour=epoch_us(H), cluster="c", gpu_model=MI300X, gpus=2, allocated_gpus=1.25, busy_gpus=1.0)
    fleet |= dict(pending_gpus=0.0, pending_gpus_max=0.0, pending_jobs_max=0, demand_gpus=1.25, energy_kwh=0.0)
    write_rows(lake, "fleet_hourly", [fleet])
    return DashData(lake)


F = Filters(dt.date(2026, 11, 2), dt.date(2026, 11, 2))


def test_node_use_counts_a_partition_only_gpu_once_at_its_partitions_mean(data):
    out = drilldown.node_use(data, F, "c")
    n1, n2 = out.rows(named=True)
    # n1: S1 and G1. S1's day: its partitions' mean, 2 x 12 held samples / 8 = 3 of 12; util: partition 0's 40 % x 12
    # (the others know none). G1: 12 of 12 at 100 %. allocated (3 + 12) / 24 = 62.5 %; util (480 + 1200) / 24 = 70
    assert (n1["node"], n1["gpus_reporting"]) == ("n1", 2)
    assert (n1["allocated_pct"], n1["util_gpu_pct_mean"]) == pytest.approx((62.5, 70.0))
    # n2: GPU-h's own row (its instances are inside it) and G2: 12 of 24 held, (50 x 12 + 0) / 24 = 25 %
    assert (n2["node"], n2["gpus_reporting"]) == ("n2", 2)
    assert (n2["allocated_pct"], n2["util_gpu_pct_mean"]) == pytest.approx((50.0, 25.0))


def test_worst_nodes_count_physical_gpus(data):
    out = worst_nodes(data, F)
    # n1: S1 held 2/8 = 0.25 (< 0.5: free) and G1 held: 1 free of 2. n2: GPU-h held, G2 free (not 8 free of 9 with
    # GPU-h's instances): 1 free of 2. Ties by node name.
    assert out.select("node", "gpu_model", "gpus", "free_gpus").rows() == [("n1", MI300X, 2, 1), ("n2", H100, 2, 1)]
