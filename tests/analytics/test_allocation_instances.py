"""gpu_allocations' share per named device (analytics/allocation.py): a partition ask naming its instances holds one
instance's share on each, as a whole-GPU job holds 1.0 on each of its GPUs."""

import datetime as dt

import pytest

from gpuledger.analytics.allocation import allocations
from gpuledger.lake import conform, frame_from_rows

T0 = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
US = 1_000_000


def job(job_id, gpus, sharing, uuids, profile=None):
    t = int(T0.timestamp() * US)
    return {
        "updated_at": t,
        "cluster": "c",
        "job_id": job_id,
        "status": "running",
        "gpus": gpus,
        "gpu_sharing": sharing,
        "mig_profile": profile,
        "submitted_at": t,
        "scheduled_at": t,
        "gpu_uuids": uuids,
        "source": "k8s",
    }


def test_each_instance_holds_one_instances_share():
    rows = [
        job("two-1g", 2 / 7, "mig", ["MIG-a", "MIG-b"], "1g.10gb"),  # nvidia.com/mig-1g.10gb: 2
        job("four-cpx", 0.5, "partition", ["S/p0", "S/p1", "S/p2", "S/p3"], "cpx.nps4"),  # amd.com/cpx_nps4: 4
        job("one-vnpu", 0.25, "partition", ["C/vnpu100"], "Ascend910-5c"),
        job("half", 0.5, "fraction", ["GPU-h"]),  # a share: its request on its one GPU, as before
        job("two-gpus", 2.0, "exclusive", ["GPU-x", "GPU-y"]),
        job("mig-unnamed", 1 / 7, "mig", [], "1g.10gb"),  # no device named: one row with the whole request
    ]
    frame = conform("jobs", frame_from_rows("jobs", rows))
    got = allocations(frame.lazy(), T0 + dt.timedelta(hours=1)).collect()
    share = {(r["job_id"], r["gpu_uuid"]): r["share"] for r in got.iter_rows(named=True)}
    assert share == {
        ("two-1g", "MIG-a"): pytest.approx(1 / 7),  # 2/7 over 2 instances; it was 2/7 on each (4/7 in all)
        ("two-1g", "MIG-b"): pytest.approx(1 / 7),
        **{("four-cpx", f"S/p{i}"): pytest.approx(1 / 8) for i in range(4)},  # 0.5 over 4 partitions
        ("one-vnpu", "C/vnpu100"): pytest.approx(0.25),
        ("half", "GPU-h"): pytest.approx(0.5),
        ("two-gpus", "GPU-x"): pytest.approx(1.0),
        ("two-gpus", "GPU-y"): pytest.approx(1.0),
        ("mig-unnamed", None): pytest.approx(1 / 7),
    }
