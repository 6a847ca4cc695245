"""Backfill a historical window of the simulated fleet into the lake as fast as the machine allows.

The job schedule is simulated once in the parent (cheap: events, not samples); the samples are generated per
node, one UTC day at a time, in worker processes (numpy, no Python loop per sample) and written straight to
their final partition files. File names carry the seed and the exact window, so re-running the same
command rewrites the same files: idempotent.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import signal
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import polars as pl

from gpuledger.collector.sim import state as sim_state
from gpuledger.collector.sim.fleet import Allocation, Fleet, NodeInfo
from gpuledger.collector.sim.telemetry import health_events, node_window
from gpuledger.config import Config
from gpuledger.lake import LakeWriter, Partition, conform, frame_from_rows

WARMUP_S = 86400  # the fleet starts empty; a day of warm-up reaches steady queues before the first sample
LABEL_KEYS = ("nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.memory", "gpuledger.io/simulated")


@dataclass
class BackfillReport:
    nodes: int = 0
    gpus: int = 0
    samples: int = 0
    processes: int = 0
    jobs: int = 0
    job_rows: int = 0
    health_events: int = 0
    files: int = 0


@dataclass(frozen=True)
class _NodeTask:
    lake: str
    node: NodeInfo
    allocs: list[Allocation]
    start_s: int
    end_s: int
    step_s: int
    seed: int
    cluster: str
    process_interval_s: float
    name: str
    coarse_until_s: int  # before this instant, samples every coarse_step_s (older history); from it, every step_s
    coarse_step_s: int


COARSE_WINDOW_S = 31 * 86400  # the coarse history is generated a month of a node at a time (65k samples at 300 s)


def _windows(task: _NodeTask) -> list[tuple[int, int, int]]:
    """(start, end, step) of each window to generate: the coarse history in spans of up to COARSE_WINDOW_S, then
    one window per UTC day."""
    fine_from = min(max(task.start_s, task.coarse_until_s), task.end_s)
    cuts = [*range(task.start_s, fine_from, COARSE_WINDOW_S), fine_from]
    cuts += [d * 86400 for d in range(fine_from // 86400 + 1, math.ceil(task.end_s / 86400))] + [task.end_s]
    out = []
    for t0, t1 in itertools.pairwise(sorted(set(cuts))):
        step = task.coarse_step_s if t0 < fine_from else task.step_s
        t0 = math.ceil(t0 / step) * step  # keep sample times on the step grid
        if t0 < t1:
            out.append((t0, t1, step))
    return out


def _run_node(task: _NodeTask) -> tuple[int, int, int, int]:
    """Generate and write every day of one node. Returns (samples, processes, health events, files)."""
    writer = LakeWriter(task.lake)
    node = task.node
    energy = None
    samples = procs = events = files = 0
    for t0, t1, step in _windows(task):
        process_every = max(int(task.process_interval_s), step)
        process_every -= process_every % step
        allocs = [a for a in task.allocs if a.end_s > t0 and a.start_s < t1]
        w = node_window(node, allocs, t0, t1, step, task.seed, task.cluster, process_every, energy)
        energy = w.energy_end_j
        name = f"{task.name}-{node.name}-{t0}-{t1}"  # one writer per node: its files never collide with another's
        samples += w.samples.height
        procs += w.processes.height
        ev = health_events(node, t0, t1, task.seed, task.cluster)
        if ev:
            files += len(writer.write("health_events", frame_from_rows("health_events", ev), name))
            events += len(ev)
        if t1 - t0 > 86400 or w.samples["ts"][0].date() != w.samples["ts"][-1].date():
            files += _write_days(writer, node, task.cluster, w.samples, w.processes, name)
            continue
        date = w.samples["ts"][0].date()
        writer.write_partition(Partition("gpu_samples", date), w.samples, name)
        files += 1
        if w.processes.height:
            writer.write_partition(Partition("gpu_processes", date), w.processes, name)
            files += 1
        files += len(writer.write("nodes", node_row(node, task.cluster, t0, t1 - step), name))
    return samples, procs, events, files


def _write_days(
    writer: LakeWriter, node: NodeInfo, cluster: str, samples: pl.DataFrame, processes: pl.DataFrame, name: str
) -> int:
    """A window of several days: a file per day and table, made durable with one sync per table (hundreds of
    small files otherwise cost an fsync each, which was most of the coarse history's time)."""
    days = samples.group_by(pl.col("ts").dt.date().alias("date")).agg(
        pl.col("ts").min().alias("a"), pl.col("ts").max().alias("b")
    )
    seen = pl.concat(
        [
            node_row(node, cluster, a.timestamp(), b.timestamp())
            for a, b in days.sort("date").select("a", "b").iter_rows()
        ]
    )
    files = 0
    for table, df in (("gpu_samples", samples), ("gpu_processes", processes), ("nodes", seen)):
        if df.height:
            files += len(writer.write_partitions(table, conform(table, df), name, workers=2))
    return files


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the parent, which cancels the pool and reports once (no traceback per worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def node_row(node: NodeInfo, cluster: str, first_s: float, last_s: float) -> pl.DataFrame:
    labels = [
        {"key": LABEL_KEYS[0], "value": node.spec.k8s_product},
        {"key": LABEL_KEYS[1], "value": str(node.gpu_count)},
        {"key": LABEL_KEYS[2], "value": str(node.spec.mem_bytes >> 20)},
        {"key": LABEL_KEYS[3], "value": "true"},
    ]
    return pl.DataFrame(
        {
            "cluster": [cluster],
            "node": [node.name],
            "gpu_model": [node.spec.name],
            "gpu_count": [node.gpu_count],
            "gpu_mem_bytes": [node.spec.mem_bytes],
            "labels": [labels],
            "first_seen": [int(first_s * 1e6)],
            "last_seen": [int(last_s * 1e6)],
            "source": ["sim"],
        }
    ).with_columns(pl.col("first_seen", "last_seen").cast(pl.Datetime("us", "UTC")))


def job_rows_in_window(rows: list[dict], start_s: float) -> list[dict]:
    """All rows of every job that is visible in the window (any state observed at or after its start)."""
    start_us = start_s * 1e6
    latest: dict[str, dict] = {}
    for r in rows:  # rows come in time order
        latest[r["job_id"]] = r
    visible = {r["job_id"] for r in rows if r["updated_at"] >= start_us}
    visible |= {j for j, r in latest.items() if r["status"] in ("pending", "running")}
    return [r for r in rows if r["job_id"] in visible]


def backfill(
    cfg: Config,
    lake: Path,
    start_s: float,
    end_s: float,
    step_s: int,
    *,
    nodes: int,
    gpus_per_node: int,
    models: tuple[str, ...],
    seed: int,
    load: float | None = None,
    workers: int | None = None,
    epoch_s: float | None = None,
    coarse_until_s: float | None = None,
    coarse_step_s: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> BackfillReport:
    """Write [start, end) of a simulated fleet into `lake`; `progress(n)` is called as nodes complete.

    `epoch_s` continues an earlier simulation (same seed and fleet) instead of starting a new one a warm-up
    day before `start`. Samples before `coarse_until_s` are every `coarse_step_s` (older history, for the
    daily figures and the forecast, at a fraction of the cost), from it every `step_s`; jobs are the same either way.
    """
    load = cfg.simulator.load if load is None else load
    coarse_until = math.ceil(coarse_until_s) if coarse_until_s is not None and coarse_step_s else None
    first_step = coarse_step_s if coarse_until is not None and start_s < coarse_until else step_s
    # Samples sit on the step grid, at or after `start_s` (which is exclusive of anything written before).
    start = math.ceil(start_s / first_step) * first_step
    end = math.ceil(end_s)
    epoch = start - WARMUP_S if epoch_s is None else epoch_s
    fleet = Fleet(cfg, epoch, nodes, gpus_per_node, models, seed, load)
    workers = workers or min(os.cpu_count() or 1, len(fleet.nodes))
    with contextlib.ExitStack() as stack:
        pool = None
        if workers > 1:
            # spawn, not fork: forking a process that already runs polars' thread pool can deadlock. Started before
            # the job schedule is simulated, so the workers' imports (~1 s) overlap it instead of following it.
            pool = stack.enter_context(
                ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_ignore_sigint)
            )
            for _ in range(workers):
                pool.submit(int)
        results = _simulate_and_write(
            cfg, lake, fleet, start, end, start_s, step_s, epoch_s, coarse_until, coarse_step_s, seed, pool, progress
        )
    report = BackfillReport(nodes=len(fleet.nodes), gpus=sum(n.gpu_count for n in fleet.nodes))
    report.files, report.job_rows, report.jobs = results.pop()
    for s, p, e, f in results:
        report.samples += s
        report.processes += p
        report.health_events += e
        report.files += f
    sim_state.save(
        lake, cfg.cluster, sim_state.SimState(seed, float(epoch), nodes, gpus_per_node, tuple(models), load, float(end))
    )
    return report


def _simulate_and_write(
    cfg: Config,
    lake: Path,
    fleet: Fleet,
    start: int,
    end: int,
    start_s: float,
    step_s: int,
    epoch_s: float | None,
    coarse_until: int | None,
    coarse_step_s: int | None,
    seed: int,
    pool: ProcessPoolExecutor | None,
    progress: Callable[[int], None] | None,
) -> list[tuple[int, int, int, int]]:
    """Run the job schedule, write the jobs, then every node's telemetry (in `pool` when given). Returns each
    node's (samples, processes, health events, files), then (job files, job rows, jobs)."""
    if epoch_s is None:  # a new fleet: bring the history of every job visible in the window
        rows = job_rows_in_window(fleet.advance(end), start)
    else:  # continuing: earlier rows are in the lake already
        rows = [r for r in fleet.advance(end) if r["updated_at"] >= start_s * 1e6]
    writer = LakeWriter(lake)
    writer.init()
    name = f"sim{seed}"
    job_files = job_rows = jobs_n = 0
    if rows:
        jobs = frame_from_rows("jobs", [r for r in rows if r["updated_at"] < end * 1_000_000])
        job_files = len(writer.write("jobs", jobs, f"{name}-{start}-{end}"))
        job_rows, jobs_n = jobs.height, jobs["job_id"].n_unique()
    tasks = [
        _NodeTask(
            str(lake),
            n,
            fleet.allocations[n.index],
            start,
            end,
            step_s,
            seed,
            cfg.cluster,
            cfg.collector.process_interval_s,
            name,
            start if coarse_until is None else coarse_until,
            coarse_step_s or step_s,
        )
        for n in fleet.nodes
    ]
    results = []
    for r in pool.map(_run_node, tasks, chunksize=1) if pool else map(_run_node, tasks):
        results.append(r)
        if progress:
            progress(1)
    return [*results, (job_files, job_rows, jobs_n)]


def backfill_history(
    cfg: Config,
    lake: Path,
    now_s: float,
    days: float | None = None,
    *,
    workers: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> BackfillReport:
    """The history `gpuledger up` gives an empty lake: the last `days` (simulator.backfill_days) every
    backfill_step_s, as the live collector samples, and simulator.history_days before them every history_step_s.

    The older days are coarse because what reads them (daily cost, the demand forecast's four weeks of daily
    demand) needs days, not 30 s samples: at 300 s they cost a tenth of the fine days per day.
    """
    sim = cfg.simulator
    days = sim.backfill_days if days is None else days
    return backfill(
        cfg,
        lake,
        now_s - (days + sim.history_days) * 86400,
        now_s,
        int(sim.backfill_step_s),
        nodes=sim.nodes,
        gpus_per_node=sim.gpus_per_node,
        models=sim.models,
        seed=sim.seed,
        workers=workers,
        coarse_until_s=now_s - days * 86400 if sim.history_days else None,
        coarse_step_s=int(sim.history_step_s),
        progress=progress,
    )
