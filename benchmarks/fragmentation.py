"""FGD fragmentation: the vectorised metric against a literal Python loop, and the placement replay on openb.

    python benchmarks/fragmentation.py [--nodes 5000] [--gpus 8] [--types 50] [--rounds 5] [--seed 42]
        [--whatif-days 7] [--tiny]
    (--tiny: 50 nodes x 10 task types, one round, the replay on openb's first 30 nodes and the what-if on a 2-node
    day, so the test suite runs this script)

Metric: a synthetic fleet of `--nodes` nodes with `--gpus` GPUs each (free milli drawn from 0, 1000 and
partial shares) against `--types` task types (CPU-only, sharing and whole-GPU, two models). node_fragmentation
is timed over `--rounds` rounds (median); the baseline is FRAGMENTATION.md written as a Python loop over nodes
and task types, run once on the same input. Both must agree or the script stops.

Replay (when ../shared/data/traces/alibaba-gpu-v2023 is present): the openb default workload inflated to 130%
on the 1,213 GPU nodes, under FGD and BestFit, with the fragmented and allocated % of GPUs at 100% arrived.
Its baseline is one node_fragmentation of the whole fleet per pod, timed once and multiplied by the pod count:
what only logging the metric after each pod would cost if recomputed from scratch.

What-if (`gpuledger whatif placement`, analytics/placement_whatif.py): `gpuledger up`'s default simulated fleet (12
nodes x 8 GPUs of H100, A100 and L40S, seed 42) over `--whatif-days` days at 300 s, analysed, then the period's jobs
replayed under each policy against the measured fragmentation; the fleet's GPUs, GPU-hours and USD freed (built-in
rate card), and the what-if's time beside the `gpuledger analyze` run that measured it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from gpuledger.analytics.fragmentation import (
    arrival_bins,
    inflate_workload,
    node_fragmentation,
    replay,
    typical_task_types,
)

OPENB = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces" / "alibaba-gpu-v2023"
MODELS = ("A100", "H100")


def synthetic(nodes: int, gpus: int, types: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    free = rng.choice([0, 1000, 1000, 1000, 250, 500, 700, 900], size=(nodes, gpus))
    state = pl.DataFrame(
        {
            "node": [f"n{i:05d}" for i in range(nodes)],
            "model": rng.choice(MODELS, size=nodes).tolist(),
            "cpu_free_milli": rng.integers(0, 128, size=nodes) * 1000,
            "gpu_free_milli": free.tolist(),
        }
    )
    kind = rng.choice(["cpu", "share", "whole"], size=types)
    task_types = pl.DataFrame(
        {
            "cpu_milli": rng.integers(1, 33, size=types) * 1000,
            "gpu_milli": np.where(
                kind == "cpu", 0, np.where(kind == "share", rng.integers(1, 10, size=types) * 100, 1000)
            ),
            "num_gpu": np.where(kind == "cpu", 0, np.where(kind == "share", 1, rng.choice([1, 2, 4, 8], size=types))),
            "gpu_spec": rng.choice(["", "", "A100", "H100", "A100|H100"], size=types).tolist(),
            "count": rng.integers(1, 500, size=types),
        }
    )
    return state, task_types


def literal(state: pl.DataFrame, task_types: pl.DataFrame) -> list[float]:
    """F_n(M) per node, exactly as FRAGMENTATION.md states it."""
    rows = task_types.rows()
    weight = sum(r[4] for r in rows)
    out = []
    for _, model, cpu, free in state.iter_rows():
        total = sum(free)
        f = 0
        for cpu_m, milli, k, spec, count in rows:
            wanted = {m for m in spec.split("|") if m}
            runs = (
                milli * k > 0
                and (not wanted or model in wanted)
                and cpu >= cpu_m
                and sum(r >= milli for r in free) >= k
            )
            f += count * (sum(r for r in free if r < milli) if runs else total)
        out.append(f / weight)
    return out


def bench_metric(a) -> None:
    state, task_types = synthetic(a.nodes, a.gpus, a.types, a.seed)
    times = []
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        got = node_fragmentation(state, task_types)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    want = literal(state, task_types)
    base = time.perf_counter() - t0
    if not np.allclose(got["frag_milli"].to_numpy(), want):
        raise SystemExit("node_fragmentation and the literal loop disagree")
    fast = statistics.median(times)
    print(f"metric: {a.nodes} nodes x {a.gpus} GPUs x {a.types} task types")
    print(f"  node_fragmentation, median of {a.rounds}: {fast * 1000:.1f} ms")
    print(f"  baseline, literal Python loop:        {base * 1000:.1f} ms")
    print(f"  ratio: {base / fast:.1f}x")


def bench_replay(a) -> None:
    if not OPENB.is_dir():
        print(f"replay: skipped, {OPENB} is absent")
        return
    pods = pl.read_csv(OPENB / "openb_pod_list_default.csv")
    nodes = pl.read_csv(OPENB / "openb_node_list_gpu_node.csv").rename({"sn": "node", "gpu": "gpus"})
    if a.tiny:
        nodes = nodes.head(30)
    capacity = int(nodes["gpus"].sum())
    t0 = time.perf_counter()
    task_types = typical_task_types(pods)
    print(f"replay: openb default, {pods.height} pods, {nodes.height} nodes, {capacity} GPUs")
    print(f"  typical_task_types: {task_types.height} types in {(time.perf_counter() - t0) * 1000:.1f} ms")
    inflated = inflate_workload(pods, capacity, 1.3, a.seed)
    empty = nodes.select(
        "node",
        "model",
        pl.col("cpu_milli").alias("cpu_free_milli"),
        pl.int_ranges(pl.col("gpus")).list.eval(pl.lit(1000)).alias("gpu_free_milli"),
    )
    t0 = time.perf_counter()
    node_fragmentation(empty, task_types)
    one = time.perf_counter() - t0
    for policy in ("fgd", "bestfit"):
        t0 = time.perf_counter()
        result = replay(nodes, inflated, task_types, policy, a.seed)
        took = time.perf_counter() - t0
        at = arrival_bins(result.log, capacity).filter(pl.col("arrived_pct") == 100).row(0, named=True)
        print(
            f"  {policy:7s}: {inflated.height} pods in {took:.2f} s ({inflated.height / took:,.0f} pods/s); "
            f"at 100% arrived: {at['frag_pct']:.2f}% of GPUs fragmented, {at['alloc_pct']:.2f}% allocated"
        )
    print(f"  baseline, one node_fragmentation of the fleet per pod: {one * inflated.height:.2f} s")


def bench_whatif(a) -> None:
    from gpuledger.analytics.placement_whatif import placement_whatif
    from gpuledger.analytics.runner import run
    from gpuledger.collector.sim.backfill import backfill
    from gpuledger.config import defaults

    cfg = defaults()
    sim = cfg.simulator
    nodes, gpus, days = (2, 4, 1.0) if a.tiny else (sim.nodes, sim.gpus_per_node, a.whatif_days)
    end = dt.datetime(2026, 11, 2, tzinfo=dt.timezone.utc)
    start = end - dt.timedelta(days=days)
    with tempfile.TemporaryDirectory() as tmp:
        lake = Path(tmp) / "lake"
        backfill(
            cfg,
            lake,
            start.timestamp(),
            end.timestamp(),
            300,
            nodes=nodes,
            gpus_per_node=gpus,
            models=sim.models,
            seed=sim.seed,
            workers=1,
        )
        t0 = time.perf_counter()
        run(lake, until_s=end.timestamp())
        analyze_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        got = placement_whatif(lake, cfg.rates, cfg.cluster, start, end)
        took = time.perf_counter() - t0
    fleet = got.summary.filter(pl.col("gpu_model").is_null())
    measured = fleet.row(0, named=True)
    print(
        f"whatif placement: {nodes} nodes x {gpus} GPUs, {days:g} days of simulated jobs in {took:.2f} s "
        f"(the analyze that measured them: {analyze_s:.1f} s)"
    )
    print(
        f"  measured: {measured['fragmented_gpus']:.2f} GPUs fragmented ({measured['frag_pct']:.1f}% of "
        f"{measured['free_gpus']:.1f} free) at a mean load of {measured['load_gpus']:.1f} GPUs"
    )
    for row in fleet.filter(pl.col("policy") != "measured").iter_rows(named=True):
        print(
            f"  {row['policy']:7s} frees {row['freed_gpus']:.2f} GPUs, {row['freed_gpu_hours']:,.0f} GPU-hours, "
            f"{row['freed_usd']:,.0f} USD; {row['fragmented_gpus']:.2f} GPUs fragmented at the same load; "
            f"{row['placed_pct']:.1f}% of demand placed at capacity, {row['pods_unplaced']} pods unplaced"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--types", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--whatif-days", type=float, default=7.0, help="days of the simulated fleet the what-if replays")
    ap.add_argument("--tiny", action="store_true", help="50 nodes, one round, a 30-node replay: checks it runs")
    a = ap.parse_args()
    if a.tiny:
        a.nodes, a.types, a.rounds = 50, 10, 1
    bench_metric(a)
    bench_replay(a)
    bench_whatif(a)


if __name__ == "__main__":
    main()
