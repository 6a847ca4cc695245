"""A tiny hand-built lake for the placement what-if (analytics/placement_whatif.py), with every figure of its
replay derived by hand: shared by tests/analytics/test_placement_whatif.py and tests/core/test_whatif_cli.py.

The lake (cluster "c", one day, 2026-11-02): node a with 2 T4 GPUs, node b with 4; five T4 jobs and one A100 job;
24 measured fragmentation rows.
"""

import datetime as dt

import polars as pl

from gpuledger.analytics import placement_whatif as pw
from gpuledger.config import Rate

from builders import at, epoch_us, job_state, write_rows

T4 = "T4"
DAY = dt.date(2026, 11, 2)
START, END = pw.period(DAY, DAY)
# 2 USD per GPU-hour, 4 from noon: one GPU held over the day costs 12 x 2 + 12 x 4 = 72 USD.
RATES = (Rate(T4, 2.0, at(1)), Rate(T4, 4.0, at(2, 12)))


def build_lake(lake):
    """The hand-built lake of this module's docstring."""

    def node(name, gpus):
        return dict(
            cluster="c",
            node=name,
            gpu_model=T4,
            gpu_count=gpus,
            first_seen=epoch_us(at(30, month=10)),
            last_seen=epoch_us(at(3)),
            source="t",
        )

    write_rows(lake, "nodes", [node("a", 2), node("b", 4)])
    jobs = [
        # j0 finished before the period: not replayed, but part of the workload M (every job the lake holds).
        job_state("j0", "succeeded", at(1, 5), gpu_model=T4, gpus=2.0, submitted_at=at(1, 1), finished_at=at(1, 5)),
        # j1 runs from before the period: replayed first.
        job_state("j1", "running", at(1, 22), gpu_model=T4, gpus=1.0, submitted_at=at(1, 22)),
        job_state("j2", "succeeded", at(2, 3), gpu_model=T4, gpus=2.0, submitted_at=at(2, 1), finished_at=at(2, 3)),
        job_state("j3", "running", at(2, 2), gpu_model=T4, gpus=2.0, submitted_at=at(2, 2)),
        job_state("j4", "pending", at(2, 3), gpu_model=T4, gpus=2.0, submitted_at=at(2, 3)),
        # No A100 node: no placement question.
        job_state("jx", "running", at(2, 4), gpu_model="A100", gpus=1.0, submitted_at=at(2, 4)),
    ]
    write_rows(lake, "jobs", jobs)
    # Measured: 12 hours with 2 free GPUs (0.5 fragmented), 12 with 4 (1.5): means 3 free, load 6 - 3 = 3, 1.0.
    frag = [
        dict(
            ts=epoch_us(at(2, h)),
            cluster="c",
            gpu_model=T4,
            gpus=6,
            free_gpus=2.0 if h < 12 else 4.0,
            fragmented_gpus=0.5 if h < 12 else 1.5,
            frag_rate=0.25 if h < 12 else 0.375,
            stranded_1gpu=0,
            stranded_2gpu=0,
            stranded_4gpu=0,
            stranded_8gpu=0,
        )
        for h in range(24)
    ]
    write_rows(lake, "fragmentation", frag)
    return lake


# The replay, by hand. Pods in arrival order: j1 (1 GPU), j2, j3, j4 (2 GPUs each); capacity 6 GPUs.
# M (T4's jobs, j0 included): 2 GPUs x 4 jobs, 1 GPU x 1 job (weight 5). On an empty fleet F = 0.
# - BestFit (no CPU request, so the node left with the least free GPU milli): j1 -> a = [0, 1000]; j2 cannot use
#   a (one whole GPU) -> b = [0, 0, 1000, 1000]; j3 -> b = [0, 0, 0, 0]; j4 finds no node.
# - FGD: j1 on a would leave a's one GPU useless to the 2-GPU type (delta F = 4 x 1000, score int(100 sigmoid(-0.8))
#   = 31) against 0 on b (score 50): b = [0, 1000, 1000, 1000]; j2 on a changes nothing (a = [0, 0], 50) but on b
#   leaves one GPU (delta 4000): a; j3 -> b = [0, 0, 0, 1000]; j4 finds no node.
# At the measured load (3 GPUs: after j1 and j2):
# - BestFit: a = [0, 1000] is fragmented for the 2-GPU type: F = 4 x 1000 / 5 = 800 milli = 0.8 GPUs of 3 free.
# - FGD: a = [0, 0], b = [0, 1000, 1000, 1000]: F = 0.
# At capacity (6 GPUs; demand 1, 3, 5, 7 after each pod: reached at j4): 7 arrived, 5 placed, j4 unplaced.
# Freed against the measured 1.0 GPU: BestFit 0.2 (x 24 h = 4.8 GPU-hours, x 72 = 14.4 USD), FGD 1.0 (24, 72).
EXPECTED = pl.DataFrame(
    {
        "policy": ["measured", "fgd", "bestfit"] * 2,
        "gpu_model": [T4] * 3 + [None] * 3,
        "gpus": [6] * 6,
        "load_gpus": [3.0] * 6,
        "free_gpus": [3.0] * 6,
        "fragmented_gpus": [1.0, 0.0, 0.8] * 2,
        "frag_pct": [100 / 3, 0.0, 80 / 3] * 2,
        "arrived_gpus": [None, 7.0, 7.0] * 2,
        "allocated_gpus": [None, 5.0, 5.0] * 2,
        "placed_pct": [None, 500 / 7, 500 / 7] * 2,
        "pods_unplaced": [None, 1, 1] * 2,
        "freed_gpus": [None, 1.0, 0.2] * 2,
        "freed_gpu_hours": [None, 24.0, 4.8] * 2,
        "freed_usd": [None, 72.0, 14.4] * 2,
    },
    schema=pw.SUMMARY_SCHEMA,
)

# The rate card above as a config file, for the CLI.
CONFIG = """
cluster = "c"

[[rates]]
gpu_model = "T4"
usd_per_gpu_hour = 2.0
effective_from = 2026-11-01

[[rates]]
gpu_model = "T4"
usd_per_gpu_hour = 4.0
effective_from = 2026-11-02T12:00:00Z
"""
