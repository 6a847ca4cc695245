"""The simulated job stream: who submits what, when, how big, for how long, and how it will behave.

Arrivals are a non-homogeneous Poisson process (thinning) with a daily and weekly cycle; the mean rate is
set so that the offered load is `load` x fleet GPU capacity: the GPU-hours jobs hold (from binding to release,
start-up included, as the jobs table records them) over the GPU-hours the fleet has, in expectation over a week.
Draws happen strictly in job order from one numpy Generator, so the stream does not depend on how the fleet's
clock is advanced.
"""

from __future__ import annotations

import functools
import hashlib
import math
import struct
import uuid
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from gpuledger.config import Tenant

# Request sizes in GPUs and their shares; fractional sizes are time-sliced shares of one GPU.
SIZES = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
SIZE_P = (0.08, 0.12, 0.42, 0.16, 0.12, 0.10)
MEDIAN_S = {0.25: 1200, 0.5: 1800, 1.0: 2400, 2.0: 3600, 4.0: 5400, 8.0: 7200}
DURATION_SIGMA = 1.1
MAX_DURATION_S = 3 * 86400
PROFILES = ("steady", "bursty", "idle")
# Interactive/platform tenants park GPUs more often; these are the waste the analytics must find.
IDLE_P = {"platform": 0.45, "research": 0.2}
DEFAULT_IDLE_P = 0.07
FAIL_REASONS = (("Error", 0.55), ("OOMKilled", 0.3), ("Evicted", 0.15))
MIN_DURATION_S = 60.0
# Outcomes: (name, probability, the share of the drawn duration it runs: uniform on this range).
FAILED_P, FAILED_RUN = 0.10, (0.05, 0.9)
CANCELLED_P, CANCELLED_RUN = 0.04, (0.1, 0.9)
IDLE_HOLD_H = (2.0, 10.0)  # a parked notebook holds its GPU at least this long (uniform)
STARTUP_S = (10.0, 90.0)  # image pull and container start: the GPU is held, not yet busy (uniform)


@dataclass(frozen=True)
class JobSpec:
    n: int
    job_id: str
    tenant: str
    namespace: str
    queue: str
    pod: str
    model_key: str
    gpus: float
    submitted_s: float
    duration_s: float  # how long it runs once started (until its outcome)
    outcome: str  # succeeded, failed, cancelled
    reason: str | None
    profile: str
    level: float  # mean utilization when busy, percent
    period_s: float  # bursty: cycle length
    duty: float  # bursty: busy fraction of the cycle
    efficiency: float  # sm_active per unit of utilization
    tensor: float  # tensor_active per unit of sm_active
    mem_frac: float  # share of the GPU's memory it holds
    membw: float  # memory utilization per unit of utilization

    @property
    def whole(self) -> int:
        return int(self.gpus) if self.gpus >= 1 else 0

    @property
    def milli(self) -> int:
        """Per-GPU share in thousandths (1000 for whole GPUs)."""
        return 1000 if self.gpus >= 1 else int(round(self.gpus * 1000))

    @property
    def gpu_count(self) -> int:
        return max(1, self.whole)


def diurnal(t_s: float) -> float:
    """Relative arrival rate at time t: peaks mid-afternoon UTC, quieter at night and on weekends."""
    hour = (t_s % 86400) / 3600
    weekday = int(t_s // 86400 + 3) % 7  # 1970-01-01 was a Thursday (3 with Monday = 0)
    day = 1.0 + 0.35 * math.sin(2 * math.pi * (hour - 9) / 24)
    return day * (0.65 if weekday >= 5 else 1.14)


DIURNAL_MAX = 1.35 * 1.14


def weighted_index(weights: list[float], u: float) -> int:
    """The index u in [0, 1) falls on when [0, 1) is cut into pieces of the given weights (summing to 1)."""
    acc = 0.0
    for i, w in enumerate(weights):
        acc += w
        if u < acc:
            return i
    return len(weights) - 1


@functools.lru_cache(maxsize=4)
def _normal_quantiles(points: int) -> np.ndarray:
    nd = NormalDist()
    return np.array([nd.inv_cdf((i + 0.5) / points) for i in range(points)])


@functools.lru_cache(maxsize=256)
def mean_hold_s(size: float, idle_p: float, points: int = 20_000) -> float:
    """Expected seconds a job of `size` GPUs holds them (start-up + run), with every clip, outcome and idle
    stretch `next_job` applies; `idle_p` is the chance a job is a parked notebook.

    Quadrature, not a closed form: the duration is a clipped lognormal scaled by the outcome's share, and an
    idle job holds max(duration, H) with H uniform. Midpoint quantiles of the normal (20,000 of them) and of the
    uniforms (64): the error is the lognormal's top cell, 0.03 % (0.17 % with 2,000), far inside the sampling
    noise of any simulated window. Cached: every Workload asks for the same few (size, idle_p).
    """
    z = _normal_quantiles(points)
    d = np.clip(MEDIAN_S[size] * np.exp(DURATION_SIGMA * z), MIN_DURATION_S, MAX_DURATION_S)
    mid = (np.arange(64) + 0.5) / 64
    shares = [(np.ones(1), 1 - FAILED_P - CANCELLED_P)] + [
        (lo + (hi - lo) * mid, p) for p, (lo, hi) in ((FAILED_P, FAILED_RUN), (CANCELLED_P, CANCELLED_RUN))
    ]
    a, b = IDLE_HOLD_H[0] * 3600, IDLE_HOLD_H[1] * 3600
    busy = idle = 0.0
    for share, p in shares:
        x = np.outer(d, share).ravel()
        busy += p * x.mean()
        # E[max(x, H)] for H uniform on [a, b], exactly.
        y = np.clip(x, a, b)
        idle += p * np.mean(np.where(x >= b, x, (y * (y - a) + (b * b - y * y) / 2) / (b - a)))
    return sum(STARTUP_S) / 2 + (1 - idle_p) * busy + idle_p * idle


def job_id(seed: int, cluster: str, submitted_s: float, n: int, salt: int) -> str:
    """A UUID (v4 form) hashed from everything that tells a job apart, its submit time included.

    The stream restarts from the seed whenever a fleet is new (every `gpuledger simulate`), and its diurnal and
    weekly cycle repeats: a run that starts a whole week after another draws the same numbers and the same job
    counter, so an id made of those alone (as it was) named two jobs of one lake alike. The exact submit time
    (the start plus the drawn gaps) differs between such runs and is the same on a re-run or a continued fleet,
    which replays the stream from its epoch: ids are unique across runs into one lake and still deterministic.
    """
    key = struct.pack("<qdqq", seed, submitted_s, n, salt) + cluster.encode()
    return str(uuid.UUID(bytes=hashlib.blake2b(key, digest_size=16).digest(), version=4))


def _pick(cum: np.ndarray, u: float) -> int:
    return min(int(np.searchsorted(cum, u, side="right")), len(cum) - 1)


class Workload:
    def __init__(
        self,
        seed: int,
        tenants: tuple[Tenant, ...],
        model_capacity: dict[str, int],
        gpus_per_node: int,
        load: float,
        start_s: float,
        cluster: str = "default",
    ):
        self.rng = np.random.default_rng([seed, 1])
        self.tenants = tenants
        self.models = sorted(model_capacity)
        cap = np.array([model_capacity[m] for m in self.models], dtype=float)
        self.model_p = cap / cap.sum()
        w = np.array([t.weight for t in tenants], dtype=float)
        self.tenant_p = w / w.sum()
        sizes = [(s, p) for s, p in zip(SIZES, SIZE_P, strict=True) if s <= gpus_per_node]
        self.sizes = np.array([s for s, _ in sizes])
        self.size_p = np.array([p for _, p in sizes]) / sum(p for _, p in sizes)
        idle_p = float(sum(p * IDLE_P.get(t.name, DEFAULT_IDLE_P) for t, p in zip(tenants, self.tenant_p, strict=True)))
        self.mean_gpu_s = sum(
            s * p * mean_hold_s(float(s), idle_p) for s, p in zip(self.sizes, self.size_p, strict=True)
        )
        # The diurnal and weekly factors average 1 over any whole week, so this is the mean arrival rate.
        self.rate_per_s = load * cap.sum() / self.mean_gpu_s
        # Cumulative weights: a searchsorted per draw is ~20x cheaper than Generator.choice(p=...).
        self.tenant_cum = np.cumsum(self.tenant_p)
        self.size_cum = np.cumsum(self.size_p)
        self.model_cum = np.cumsum(self.model_p)
        self.t = start_s
        self.n = 0
        self.seed = seed
        self.cluster = cluster

    def next_job(self) -> JobSpec:
        r = self.rng
        # Thinning: candidates at the peak rate, accepted with probability rate(t) / peak.
        while True:
            self.t += r.exponential(1.0 / (self.rate_per_s * DIURNAL_MAX))
            if r.random() * DIURNAL_MAX <= diurnal(self.t):
                break
        self.n += 1
        ti = _pick(self.tenant_cum, r.random())
        tenant = self.tenants[ti]
        namespaces = tenant.namespaces or (tenant.name,)
        ns = namespaces[int(r.integers(len(namespaces)))]
        size = float(self.sizes[_pick(self.size_cum, r.random())])
        duration = min(MEDIAN_S[size] * math.exp(DURATION_SIGMA * r.standard_normal()), MAX_DURATION_S)
        duration = max(duration, MIN_DURATION_S)
        u = r.random()
        outcome, reason = "succeeded", "Completed"
        if u < FAILED_P:
            outcome = "failed"
            reason = FAIL_REASONS[weighted_index([p for _, p in FAIL_REASONS], r.random())][0]
            duration *= r.uniform(*FAILED_RUN)
        elif u < FAILED_P + CANCELLED_P:
            outcome, reason = "cancelled", "Cancelled"
            duration *= r.uniform(*CANCELLED_RUN)
        idle_p = IDLE_P.get(tenant.name, DEFAULT_IDLE_P)
        v = r.random()
        profile = "idle" if v < idle_p else ("bursty" if v < idle_p + 0.3 else "steady")
        if profile == "idle":
            duration = max(duration, r.uniform(*IDLE_HOLD_H) * 3600)  # parked notebooks hold GPUs for hours
        model = self.models[_pick(self.model_cum, r.random())]
        salt = int(r.integers(0, 2**63))  # drawn as before, so every later draw of the stream stays the same
        return JobSpec(
            n=self.n,
            job_id=job_id(self.seed, self.cluster, self.t, self.n, salt),
            tenant=tenant.name,
            namespace=ns,
            queue="interactive" if profile == "idle" else "batch",
            pod=f"{tenant.name}-job-{self.n:06d}",
            model_key=model,
            gpus=size,
            submitted_s=self.t,
            duration_s=duration,
            outcome=outcome,
            reason=reason,
            profile=profile,
            level=float(r.uniform(55, 98)),
            period_s=float(r.uniform(300, 1800)),
            duty=float(r.uniform(0.3, 0.7)),
            efficiency=float(r.uniform(0.45, 0.95)),
            tensor=float(r.uniform(0.05, 0.7)),
            mem_frac=float(r.uniform(0.25, 0.95)),
            membw=float(r.uniform(0.25, 0.8)),
        )
