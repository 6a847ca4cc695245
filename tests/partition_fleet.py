"""A small fleet of partitioned devices, as the collectors write them, for the fragmentation and what-if tests of
partitions (gpuledger/partitions.py's frames).

Cluster "c", samples every 10 minutes from Nov 2 10:00 to 12:00 (NOW):
- n1: an H100 in all-1g MIG (GPU-h100: a row of its own and 7 partition rows gi1..gi7, `1g.10gb`, as dcgm and nvml
  write them) and a whole H100 (GPU-w);
- n2: an MI300X in CPX mode: its 8 partitions MI-1/p0..p7 (`cpx.nps4`) and no row of the whole GPU, as the AMD
  exporter reports a CPX GPU;
- n3: an Ascend 310P chip NPU-0 with three vNPUs (vnpu-4c, vnpu-2c, vnpu-1c: 7 of its 8 AI cores, 7 AI CPUs);
- n4: 4 L4s in the nodes table only (no telemetry).
Jobs, as the k8s source records them (`gpus` = units x the resource's share, `mig_profile` the resource's profile):
- M1 and M2 hold gi1 and gi2 (1g.10gb, 1/7) from 09:30, M1 to 11:30, M2 still running; M3 holds gi3 from 10:30;
- C1 holds MI-1/p0 (amd.com/cpx_nps4, 1/8) from 09:00, running;
- V1 holds NPU-0/vnpu2 (huawei.com/Ascend310P-2c, 2/8) from 10:00 to 10:45;
- W1 holds GPU-w whole from 09:00 to 10:30.
"""

from __future__ import annotations

import datetime as dt

from builders import at, epoch_us, job_state, put_lake, write_rows

H100 = "NVIDIA H100 80GB HBM3"
MI300X = "AMD Instinct MI300X OAM"
ASCEND = "310P3"
L4 = "NVIDIA L4"
NOW = at(2, 12)
H10, H11 = at(2, 10), at(2, 11)
ALL_1G = ",".join(["1g.10gb"] * 7)
# gpu_uuid, node, parent, model, profile, share, vendor
DEVICES = (
    [("GPU-h100", "n1", None, H100, None, None, "nvidia")]
    + [(f"GPU-h100/gi{k}", "n1", "GPU-h100", H100, "1g.10gb", 1 / 7, "nvidia") for k in range(1, 8)]
    + [("GPU-w", "n1", None, H100, None, None, "nvidia")]
    + [(f"MI-1/p{k}", "n2", "MI-1", MI300X, "cpx.nps4", 1 / 8, "amd") for k in range(8)]
    + [("NPU-0", "n3", None, ASCEND, None, None, "huawei")]
    + [
        (f"NPU-0/vnpu{k}", "n3", "NPU-0", ASCEND, f"vnpu-{cores}c", cores / 8, "huawei")
        for k, cores in ((1, 4), (2, 2), (3, 1))
    ]
)


def samples() -> list[dict]:
    rows, t = [], H10
    while t < NOW:
        for uuid, node, parent, model, profile, share, vendor in DEVICES:
            rows.append(
                dict(cluster="c", node=node, gpu_uuid=uuid, parent_gpu_uuid=parent, model=model, mig_profile=profile)
                | dict(partition_share=share, vendor=vendor, util_gpu_pct=50.0, power_w=100.0, source="t")
                | dict(ts=epoch_us(t), pod=None)
            )
        t += dt.timedelta(minutes=10)
    return rows


# job_id, model, gpus, sharing, profile, gpu_uuid, node, scheduled, finished (None: running)
JOBS = [
    ("M1", H100, 1 / 7, "mig", "1g.10gb", "GPU-h100/gi1", "n1", at(2, 9, 30), at(2, 11, 30)),
    ("M2", H100, 1 / 7, "mig", "1g.10gb", "GPU-h100/gi2", "n1", at(2, 9, 30), None),
    ("M3", H100, 1 / 7, "mig", "1g.10gb", "GPU-h100/gi3", "n1", at(2, 10, 30), None),
    ("C1", MI300X, 1 / 8, "partition", "cpx.nps4", "MI-1/p0", "n2", at(2, 9), None),
    ("V1", ASCEND, 2 / 8, "partition", "Ascend310P-2c", "NPU-0/vnpu2", "n3", at(2, 10), at(2, 10, 45)),
    ("W1", H100, 1.0, "exclusive", None, "GPU-w", "n1", at(2, 9), at(2, 10, 30)),
]


def jobs() -> list[dict]:
    rows = []
    for job_id, model, gpus, sharing, profile, gpu, node, start, end in JOBS:
        cols = dict(tenant="t", namespace="t", pod=f"pod-{job_id}", gpu_model=model, gpus=gpus, gpu_sharing=sharing)
        cols |= dict(mig_profile=profile, node=node, gpu_uuids=[gpu], submitted_at=start, scheduled_at=start)
        cols |= dict(started_at=start)
        if end is None:
            rows.append(job_state(job_id, "running", start, **cols))
        else:
            rows.append(job_state(job_id, "succeeded", end, finished_at=end, **cols))
    return rows


def nodes() -> list[dict]:
    rows = []
    for node, model, count in (("n1", H100, 2), ("n2", MI300X, 1), ("n3", ASCEND, 1), ("n4", L4, 4)):
        rows.append(
            dict(cluster="c", node=node, gpu_model=model, gpu_count=count, labels=[], source="t")
            | dict(first_seen=epoch_us(at(2, 9)), last_seen=epoch_us(at(2, 11, 50)))
        )
    return rows


def build_lake(local, store=None):
    """The fleet's gpu_samples, jobs and nodes in a local lake, and on `store` if given (put_lake)."""
    write_rows(local, "gpu_samples", samples())
    write_rows(local, "jobs", jobs())
    write_rows(local, "nodes", nodes())
    return local if store is None else put_lake(local, store)
