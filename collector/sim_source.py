"""Source `sim`: the simulated fleet in real time.

It continues the history that `gpuledger simulate` / `gpuledger up` backfilled (the fleet state is kept in
the lake), so live rows follow the backfilled ones without a jump; with no history it starts a fresh fleet.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import polars as pl

from gpuledger.collector.sim import state as sim_state
from gpuledger.collector.sim.backfill import WARMUP_S, node_row
from gpuledger.collector.sim.fleet import Fleet
from gpuledger.collector.sim.telemetry import health_events, node_window
from gpuledger.collector.source import Batch
from gpuledger.config import Config
from gpuledger.store import LakeRef, open_store

log = logging.getLogger(__name__)
NODES_EVERY_S = 3600  # how often the node inventory is re-reported


class SimSource:
    name = "sim"

    def __init__(self, cfg: Config, lake: LakeRef, now_s: float):
        self.cfg = cfg
        self.lake = open_store(lake)
        st = sim_state.load(self.lake, cfg.cluster)
        sim = cfg.simulator
        if st is None:
            st = sim_state.SimState(
                sim.seed, now_s - WARMUP_S, sim.nodes, sim.gpus_per_node, sim.models, sim.load, now_s
            )
            if sim.partitions:
                st = replace(st, partitions=dict(sim.partitions), partitioned_node_share=sim.partitioned_node_share)
            log.info("sim: no simulated history in the lake; starting a fresh fleet (seed %d)", st.seed)
            sim_state.save(self.lake, cfg.cluster, st)  # fix the epoch now, so a restart continues this fleet
        else:
            log.info("sim: continuing the simulated fleet in the lake (seed %d, %d nodes)", st.seed, st.nodes)
            asked = (sim.seed, sim.nodes, sim.gpus_per_node, tuple(sim.models), dict(sim.partitions))
            if asked != (st.seed, st.nodes, st.gpus_per_node, tuple(st.models), st.partitions):
                log.warning(
                    "sim: the config asks for a different fleet (seed %d, %d x %d GPUs, %s) than the one in the "
                    "lake; continuing the lake's. Delete %s to start a new one.",
                    sim.seed,
                    sim.nodes,
                    sim.gpus_per_node,
                    ",".join(sim.models),
                    self.lake.url(sim_state.key(cfg.cluster)),
                )
        self.state = st
        self.fleet = Fleet(
            cfg,
            st.epoch_s,
            st.nodes,
            st.gpus_per_node,
            st.models,
            st.seed,
            st.load,
            st.partitions,
            st.partitioned_node_share,
        )
        self.fleet.advance(st.written_until_s)  # replay the history silently: the lake has those rows
        self.last_s = st.written_until_s - 0.001  # the last instant already written (ms resolution)
        self.started_s = now_s
        self.energy = {n.index: np.zeros(n.gpu_count) for n in self.fleet.nodes}
        self.last_process_s = -1.0
        self.last_nodes_s = -1.0

    def collect(self, now_s: float) -> Iterator[Batch]:
        t = round(now_s, 3)
        if t <= self.last_s:
            return
        seed, cluster = self.state.seed, self.cfg.cluster
        rows = [r for r in self.fleet.advance(t) if r["updated_at"] > self.last_s * 1_000_000]
        if rows:
            yield Batch.from_rows("jobs", rows)
        procs = t - self.last_process_s >= self.cfg.collector.process_interval_s
        samples, processes, events = [], [], []
        for node in self.fleet.nodes:
            # One sample at t; the step is the time since the last scrape, so the energy counter integrates it.
            step = max(t - self.last_s, 0.001)
            w = node_window(
                node,
                self.fleet.allocations[node.index],
                t,
                t + step / 2,
                step,
                seed,
                cluster,
                0 if procs else None,
                self.energy[node.index],
            )
            self.energy[node.index] = w.energy_end_j
            samples.append(w.samples)
            if w.processes.height:
                processes.append(w.processes)
            events += [
                e
                for e in health_events(node, self.last_s, t + 1, seed, cluster)
                if self.last_s * 1e6 < e["ts"] <= t * 1e6
            ]
        if procs:
            self.last_process_s = t
        same = all(s.columns == samples[0].columns for s in samples)  # a partitioned node's have partition columns
        frame = pl.concat(samples, how="vertical" if same else "diagonal_relaxed")
        yield Batch.from_frame("gpu_samples", frame)
        if processes:
            yield Batch.from_frame("gpu_processes", pl.concat(processes))
        if events:
            yield Batch.from_rows("health_events", events)
        if t - self.last_nodes_s >= NODES_EVERY_S:
            self.last_nodes_s = t
            yield Batch.from_frame(
                "nodes", pl.concat([node_row(n, cluster, self.started_s, t) for n in self.fleet.nodes])
            )
        self.last_s = t
        self.fleet.prune(t - 86400)

    def checkpoint(self) -> None:
        """Record in the lake how far the live fleet has written (called after a flush)."""
        sim_state.save(self.lake, self.cfg.cluster, replace(self.state, written_until_s=self.last_s + 0.001))

    def close(self) -> None:
        pass


def from_config(cfg: Config, lake: LakeRef, now_s: float, urls: tuple[str, ...]) -> SimSource:
    """Entry point `sim` (collector/source.py SourceFactory): the simulated fleet, resumed from the lake's state."""
    return SimSource(cfg, lake, now_s)
