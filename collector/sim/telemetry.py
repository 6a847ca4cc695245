"""Per-GPU telemetry of the simulated fleet, vectorised over time.

Every value is a pure function of (seed, GPU, job, time), so a single instant (live) and a whole day
(backfill) agree. Utilization follows the jobs on the GPU: each job contributes its profile's level times
its share of the GPU (time slicing); sm_active, memory, power, temperature, clocks and throttle reasons are
derived from that, so they stay physically consistent (no power above the limit, no memory when idle).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from gpuledger.collector.sim import noise
from gpuledger.collector.sim.fleet import Allocation, NodeInfo
from gpuledger.collector.sim.workload import service_load, weighted_index

US = 1_000_000
MIB = 1 << 20
CONTEXT_BYTES = 512 * MIB  # CUDA context + allocator slack that NVML counts per process
GPU_IDLE, SW_POWER_CAP, SW_THERMAL = 0x1, 0x4, 0x20  # NVML clocks event reason bits
THROTTLE_TEMP_C = 80.0
SIM_DRIVER = "sim-590.48.01"  # says what produced the row; the version is the one of the captures we model

# Rare health events per GPU-day, and the Xid codes seen most in fleets (NVIDIA Xid catalog).
P_XID, P_ECC, P_LOST = 0.004, 0.003, 0.0003
XIDS = (
    (13, 0.25, "Graphics Engine Exception"),
    (31, 0.30, "GPU memory page fault"),
    (43, 0.15, "GPU stopped processing"),
    (45, 0.10, "Preemptive cleanup, due to previous errors"),
    (48, 0.05, "Double Bit ECC Error"),
    (63, 0.05, "Row remapping pending"),
    (74, 0.05, "NVLink error"),
    (94, 0.05, "Contained ECC error"),
)


@dataclass
class Window:
    samples: pl.DataFrame
    processes: pl.DataFrame
    energy_end_j: np.ndarray  # per GPU, to continue the energy counter in the next window


def _const(value, n: int, dtype: pl.DataType) -> pl.Series:
    """`n` copies of `value`. pl.repeat(eager=True) runs a query each call (3 ms; 16 a node and window were most of a
    worker's time at 3600 s); this is ~10 us."""
    return pl.Series([value], dtype=dtype).new_from_index(0, n)


def _ms(t: np.ndarray) -> np.ndarray:
    """Noise is keyed by the integer millisecond, so live scrapes at any instant match the backfill."""
    return np.round(np.asarray(t, dtype=np.float64) * 1000).astype(np.int64)


def _level(a: Allocation, g: int, tt: np.ndarray, seed: int, stream: int = 10, key: int | None = None) -> np.ndarray:
    j = a.job
    u = noise.uniform(seed, stream, j.n * 64 + g if key is None else key, _ms(tt))
    if j.profile == "steady":
        lvl = j.level + (u - 0.5) * 12.0
    elif j.profile == "bursty":  # training in phases: data loading and checkpoints between busy stretches
        phase = ((tt - a.run_s) % j.period_s) / j.period_s
        lvl = np.where(phase < j.duty, j.level + (u - 0.5) * 10.0, u * 8.0)
    elif j.profile == "diurnal":  # a service: its traffic by the hour, with the jitter of requests
        lvl = j.level * service_load(tt, j.peak_hour) * (0.8 + 0.4 * u)
    elif j.profile == "parks":  # a notebook: cells run now and then while a person works, then nothing at all
        since = tt - a.run_s
        busy = (since < j.active_s) & ((since % j.period_s) / j.period_s < j.duty)
        lvl = np.where(busy, j.level + (u - 0.5) * 10.0, 0.0)
    else:  # stalls: a training run busy until it hangs (a deadlock, a dead data loader), then 0 % until killed
        lvl = np.where(tt - a.run_s < j.active_s, j.level + (u - 0.5) * 12.0, 0.0)
    return np.clip(lvl, 0.0, 100.0)


def node_window(
    node: NodeInfo,
    allocs: list[Allocation],
    t0_s: float,
    t1_s: float,
    step_s: float,
    seed: int,
    cluster: str,
    process_every_s: int | None,
    energy0_j: np.ndarray | None = None,
) -> Window:
    """Samples at t0, t0+step, ... < t1 for every GPU of `node`.

    Process rows are emitted at sample times that are multiples of `process_every_s` (integer seconds);
    0 means at every sample, None never. A partitioned node (`node.layout`) has a row per instance besides each
    GPU's (`_Instances`).
    """
    spec = node.spec
    G = node.gpu_count
    ts = np.arange(t0_s, t1_s, step_s, dtype=np.float64)
    n = len(ts)
    util = np.zeros((G, n))
    sm = np.zeros((G, n))
    tensor = np.zeros((G, n))
    membw = np.zeros((G, n))
    mem = np.zeros((G, n), dtype=np.int64)
    best_share = np.zeros((G, n))
    best_job = np.full((G, n), -1, dtype=np.int32)
    jobs: list = []
    proc_parts: list[dict] = []
    parts = _Instances(node, n) if node.layout is not None else None
    for a in allocs:
        if a.end_s <= t0_s or a.start_s >= t1_s:
            continue
        i0, r0, i1 = np.searchsorted(ts, [a.start_s, a.run_s, a.end_s], side="left")
        if i0 == i1:
            continue
        jobs.append(a.job)
        ji = len(jobs) - 1
        share = a.milli / 1000.0
        j = a.job
        if a.instances:
            parts.hold(a, ji, i0, r0, i1, ts, seed, process_every_s, proc_parts, (util, sm, tensor, membw, mem))
            held = slice(i0, i1)
            for g in set(a.gpus):  # the GPU's owner: the job holding most of it (as for shares)
                held_share = share * a.gpus.count(g)
                better = held_share > best_share[g, held]
                best_share[g, held] = np.where(better, held_share, best_share[g, held])
                best_job[g, held] = np.where(better, ji, best_job[g, held])
            continue
        for g in a.gpus:
            held = slice(i0, i1)
            better = share > best_share[g, held]
            best_share[g, held] = np.where(better, share, best_share[g, held])
            best_job[g, held] = np.where(better, ji, best_job[g, held])
            if r0 >= i1:
                continue
            run = slice(r0, i1)
            lvl = _level(a, g, ts[run], seed)
            util[g, run] += lvl * share
            s = lvl / 100.0 * j.efficiency * share
            sm[g, run] += s
            tensor[g, run] += s * j.tensor
            membw[g, run] += lvl * j.membw * share
            used = int(j.mem_frac * spec.mem_bytes * share) + CONTEXT_BYTES
            mem[g, run] += used
            if process_every_s is not None:
                pt = ts[run]
                keep = np.ones(len(pt), bool) if process_every_s == 0 else (_ms(pt) % (process_every_s * 1000) == 0)
                if keep.any():
                    proc_parts.append(
                        {
                            "ts": pt[keep],
                            "gpu": g,
                            "job": ji,
                            "used": used,
                            "sm_util_pct": (lvl * share)[keep].astype(np.float32),
                        }
                    )
    util = np.round(np.minimum(util, 100.0))  # NVML and DCGM report whole percents
    sm = np.minimum(sm, 1.0)
    mem = np.minimum(mem, spec.mem_bytes)
    gkeys = (node.index * 64 + np.arange(G, dtype=np.int64))[:, None]
    u2 = noise.uniform(seed, 11, gkeys, _ms(ts)[None, :])
    span = spec.power_limit_w - spec.idle_w
    power = spec.idle_w + span * (0.3 * util / 100.0 + 0.7 * sm) * (0.97 + 0.06 * u2)
    power = np.minimum(power, spec.power_limit_w)
    temp = 27.0 + 48.0 * power / spec.power_limit_w + 2.0 * (u2 - 0.5)
    busy = util > 0
    sm_clock = np.where(busy, spec.sm_clock_max_mhz, spec.sm_clock_idle_mhz)
    hot = temp > THROTTLE_TEMP_C
    sm_clock = np.where(hot, (sm_clock * 0.9).astype(np.int64), sm_clock)
    throttle = (
        np.where(busy, 0, GPU_IDLE)
        | np.where(hot, SW_THERMAL, 0)
        | np.where(power >= 0.98 * spec.power_limit_w, SW_POWER_CAP, 0)
    )
    e0 = energy0_j if energy0_j is not None else np.zeros(G)
    energy = e0[:, None] + np.cumsum(power * step_s, axis=1)
    ecc_base = (noise.uniform(seed, 12, gkeys[:, 0], 0) < 0.05) * np.floor(noise.uniform(seed, 13, gkeys[:, 0], 0) * 20)

    def flat(x: np.ndarray) -> np.ndarray:
        return x.ravel(order="F")  # time-major: all GPUs at ts[0], then ts[1], ...

    pods = pl.Series([j.pod for j in jobs], dtype=pl.String)
    nss = pl.Series([j.namespace for j in jobs], dtype=pl.String)
    bj = flat(best_job)
    owner = pl.Series(bj).replace(-1, None)
    uuids = pl.Series(node.gpu_uuids, dtype=pl.String)
    gidx = np.tile(np.arange(G, dtype=np.int32), n)
    samples = pl.DataFrame(
        {
            "ts": pl.Series(np.repeat(_ms(ts) * 1000, G)).cast(pl.Datetime("us", "UTC")),
            "cluster": _const(cluster, n * G, pl.String),
            "node": _const(node.name, n * G, pl.String),
            "gpu_uuid": uuids.gather(gidx),
            "gpu_index": gidx,
            "model": _const(spec.name, n * G, pl.String),
            "vendor": _const(spec.vendor, n * G, pl.String),
            "pci_bus_id": pl.Series([f"00000000:{0x18 + 0x10 * g:02X}:00.0" for g in range(G)], dtype=pl.String).gather(
                gidx
            ),
            "driver_version": _const(SIM_DRIVER, n * G, pl.String),
            "util_gpu_pct": flat(util).astype(np.float32),
            "util_mem_pct": flat(np.round(np.minimum(membw, 100.0))).astype(np.float32),
            "sm_active_ratio": flat(sm).astype(np.float32),
            "tensor_active_ratio": flat(tensor).astype(np.float32),
            "mem_used_bytes": flat(mem),
            "mem_total_bytes": _const(spec.mem_bytes, n * G, pl.Int64),
            "mem_reserved_bytes": _const(spec.mem_bytes // 100, n * G, pl.Int64),
            "power_w": flat(np.round(power, 2)).astype(np.float32),
            "power_limit_w": _const(spec.power_limit_w, n * G, pl.Float32),
            "energy_j": flat(np.round(energy, 3)),
            "temp_c": flat(np.round(temp)).astype(np.float32),
            "sm_clock_mhz": flat(sm_clock).astype(np.int32),
            "mem_clock_mhz": _const(spec.mem_clock_mhz, n * G, pl.Int32),
            "throttle_reasons": flat(throttle).astype(np.int64),
            "ecc_corrected_total": np.tile(ecc_base.astype(np.int64), n),
            "ecc_uncorrected_total": _const(0, n * G, pl.Int64),
            "source": _const("sim", n * G, pl.String),
            "pod": pods.gather(owner) if len(jobs) else _const(None, n * G, pl.String),
            "namespace": nss.gather(owner) if len(jobs) else _const(None, n * G, pl.String),
        }
    ).with_columns(container=pl.when(pl.col("pod").is_null()).then(None).otherwise(pl.lit("main")))
    if parts is not None:
        children = parts.frame(samples, jobs, n, G, cluster)
        samples = pl.concat([samples, children], how="diagonal_relaxed").sort("ts", maintain_order=True)
    return Window(samples, _processes(node, jobs, proc_parts, cluster, seed), energy[:, -1] if n else e0)


class _Instances:
    """The instances of a partitioned node: per instance (GPU g, slot s: row g x slots + s) what its job does, and
    their rows. An instance's utilization is its own (the share of its engines busy, as DCGM reports a MIG
    instance's GR_ENGINE_ACTIVE and the exporters a partition's or vNPU's); its GPU's row adds each instance's
    times its share, as time-sliced shares add. Memory: the instance's share of the GPU's is its total. Power,
    energy, temperature, clocks and ECC are the physical GPU's: on its row only."""

    def __init__(self, node: NodeInfo, n: int):
        lay = node.layout
        self.node = node
        self.slots = len(lay.types)
        c = node.gpu_count * self.slots
        self.util = np.zeros((c, n))
        self.sm = np.zeros((c, n))
        self.tensor = np.zeros((c, n))
        self.membw = np.zeros((c, n))
        self.mem = np.zeros((c, n), dtype=np.int64)
        self.job = np.full((c, n), -1, dtype=np.int32)
        self.total = np.array([int(node.spec.mem_bytes * sh) for sh in lay.shares] * node.gpu_count, dtype=np.int64)

    def hold(
        self,
        a: Allocation,
        ji: int,
        i0: int,
        r0: int,
        i1: int,
        ts: np.ndarray,
        seed: int,
        process_every_s,
        proc_parts: list[dict],
        gpu: tuple[np.ndarray, ...],
    ) -> None:
        j = a.job
        util, sm, tensor, membw, mem = gpu
        for g, slot in a.instances:
            c = g * self.slots + slot
            share = self.node.layout.shares[slot]  # exact (a.milli is rounded: 1g is 143)
            self.job[c, i0:i1] = ji
            if r0 >= i1:
                continue
            run = slice(r0, i1)
            lvl = _level(a, g, ts[run], seed, 15, j.n * 128 + c % 128)
            s = lvl / 100.0 * j.efficiency
            used = int(j.mem_frac * self.total[c]) + CONTEXT_BYTES
            self.util[c, run] = lvl
            self.sm[c, run] = s
            self.tensor[c, run] = s * j.tensor
            self.membw[c, run] = lvl * j.membw
            self.mem[c, run] = used
            util[g, run] += lvl * share
            sm[g, run] += s * share
            tensor[g, run] += s * j.tensor * share
            membw[g, run] += lvl * j.membw * share
            mem[g, run] += used
            if process_every_s is not None:
                pt = ts[run]
                keep = np.ones(len(pt), bool) if process_every_s == 0 else (_ms(pt) % (process_every_s * 1000) == 0)
                if keep.any():
                    # gpu: past the node's GPUs, the instance's uuid (_processes)
                    sm_pct = (lvl * share)[keep].astype(np.float32)
                    proc_parts.append(
                        {"ts": pt[keep], "gpu": self.node.gpu_count + c, "job": ji, "used": used, "sm_util_pct": sm_pct}
                    )

    def frame(self, gpus: pl.DataFrame, jobs: list, n: int, G: int, cluster: str) -> pl.DataFrame:
        node, lay, c = self.node, self.node.layout, self.util.shape[0]
        cidx = np.tile(np.arange(c, dtype=np.int32), n)
        parent = cidx // self.slots

        def flat(x: np.ndarray) -> np.ndarray:
            return x.ravel(order="F")

        owner = pl.Series(flat(self.job)).replace(-1, None)
        first = gpus.head(G)  # the GPUs' rows at the first sample (their PCI ids)
        return pl.DataFrame(
            {
                "ts": gpus["ts"].gather(np.arange(n, dtype=np.int64).repeat(c) * G),
                "cluster": _const(cluster, n * c, pl.String),
                "node": _const(node.name, n * c, pl.String),
                "gpu_uuid": pl.Series([u for kids in node.child_uuids for u in kids], dtype=pl.String).gather(cidx),
                "gpu_index": parent,
                "parent_gpu_uuid": pl.Series(node.gpu_uuids, dtype=pl.String).gather(parent),
                "mig_profile": pl.Series(list(lay.sample_profiles) * G, dtype=pl.String).gather(cidx),
                "partition_share": pl.Series(list(lay.shares) * G, dtype=pl.Float64).gather(cidx),
                "model": _const(node.spec.name, n * c, pl.String),
                "vendor": _const(node.spec.vendor, n * c, pl.String),
                "pci_bus_id": first["pci_bus_id"].gather(parent),
                "driver_version": _const(SIM_DRIVER, n * c, pl.String),
                "util_gpu_pct": flat(np.round(np.minimum(self.util, 100.0))).astype(np.float32),
                "util_mem_pct": flat(np.round(np.minimum(self.membw, 100.0))).astype(np.float32),
                "sm_active_ratio": flat(np.minimum(self.sm, 1.0)).astype(np.float32),
                "tensor_active_ratio": flat(self.tensor).astype(np.float32),
                "mem_used_bytes": flat(np.minimum(self.mem, self.total[:, None])),
                "mem_total_bytes": np.tile(self.total, n),
                "source": _const("sim", n * c, pl.String),
                "pod": pl.Series([j.pod for j in jobs], dtype=pl.String).gather(owner)
                if jobs
                else _const(None, n * c, pl.String),
                "namespace": pl.Series([j.namespace for j in jobs], dtype=pl.String).gather(owner)
                if jobs
                else _const(None, n * c, pl.String),
            }
        ).with_columns(container=pl.when(pl.col("pod").is_null()).then(None).otherwise(pl.lit("main")))


def _processes(node: NodeInfo, jobs: list, parts: list[dict], cluster: str, seed: int) -> pl.DataFrame:
    if not parts:
        return pl.DataFrame()
    ts = np.concatenate([p["ts"] for p in parts])
    lens = [len(p["ts"]) for p in parts]
    gpu = np.repeat([p["gpu"] for p in parts], lens)
    ji = np.repeat([p["job"] for p in parts], lens)
    pids = pl.Series([1000 + int(noise.uniform(seed, 14, j.n, 0)[()] * 4_000_000) for j in jobs], dtype=pl.Int64)
    m = len(ts)
    df = pl.DataFrame(
        {
            "ts": pl.Series(_ms(ts) * 1000).cast(pl.Datetime("us", "UTC")),
            "cluster": _const(cluster, m, pl.String),
            "node": _const(node.name, m, pl.String),
            "gpu_uuid": pl.Series(_uuids(node), dtype=pl.String).gather(gpu),
            "pid": pids.gather(ji),
            "process_name": _const("python3", m, pl.String),
            "used_mem_bytes": np.repeat([p["used"] for p in parts], lens).astype(np.int64),
            "sm_util_pct": np.concatenate([p["sm_util_pct"] for p in parts]),
            "container": _const("main", m, pl.String),
            "pod": pl.Series([j.pod for j in jobs], dtype=pl.String).gather(ji),
            "namespace": pl.Series([j.namespace for j in jobs], dtype=pl.String).gather(ji),
            "source": _const("sim", m, pl.String),
        }
    )
    return df.sort("ts", "gpu_uuid", maintain_order=True)


def _uuids(node: NodeInfo) -> tuple[str, ...]:
    """The node's GPUs' uuids, then its instances' (a process on an instance names its index past the GPUs)."""
    if not node.child_uuids:
        return node.gpu_uuids
    return node.gpu_uuids + tuple(u for kids in node.child_uuids for u in kids)


def health_events(node: NodeInfo, t0_s: float, t1_s: float, seed: int, cluster: str) -> list[dict]:
    """Rare Xid, ECC and lost-GPU events in [t0, t1), drawn per GPU and UTC day (at whole seconds)."""
    rows = []
    days = np.arange(int(t0_s // 86400), int(t1_s // 86400) + 1)
    gpus = np.arange(node.gpu_count)
    for kind, p, stream in (("xid", P_XID, 21), ("ecc", P_ECC, 22), ("lost", P_LOST, 23)):
        # Every (GPU, day) draw at once (a month of the coarse history is 3 x 224 draws a node), then the rare hits.
        hit = noise.uniform(seed, stream, node.index * 64 + gpus[:, None], days[None, :]) < p
        for g, d in zip(*np.nonzero(hit), strict=True):
            g, day = int(g), int(days[d])
            key = node.index * 64 + g
            u = noise.uniform(seed, 20, key, day)[()]
            t = day * 86400 + int(noise.uniform(seed, stream + 10, key, day)[()] * 86400)
            if not t0_s <= t < t1_s:
                continue
            code, detail = None, None
            if kind == "xid":
                code, _, detail = XIDS[weighted_index([w for _, w, _ in XIDS], u)]
            elif kind == "ecc":
                detail = f"{1 + int(u * 50)} single-bit ECC errors corrected"
            else:
                code, detail = 79, "GPU has fallen off the bus"
            rows.append(
                {
                    "ts": t * US,
                    "cluster": cluster,
                    "node": node.name,
                    "gpu_uuid": node.gpu_uuids[g],
                    "kind": kind,
                    "code": code,
                    "detail": detail,
                    "source": "sim",
                }
            )
    return sorted(rows, key=lambda r: (r["ts"], r["gpu_uuid"], r["kind"]))
