"""The simulated job stream: who submits what kind of work, when, how big, for how long, and how it will behave.

Every job has a workload class (docs/workload-classes.md, "Simulated fleet"), and each class its own shape:
- training: batch runs of 1/4 to 8 GPUs, minutes to days, busy throughout or in phases; a few stall (busy, then
  hung at 0 % for hours until killed);
- inference: services of 1/2 to 8 GPUs that run for days, busy by day (UTC business hours) and near idle at night
  and at weekends;
- notebook: interactive sessions of 1 GPU, active in bursts, then parked (held, 0 %) for hours until ended;
- evaluation: bursts of short, busy jobs a training run starts when it succeeds (the fleet submits them when the
  run ends, `Workload.evaluations`);
- other: short cron-style jobs.

Each tenant has a mix of GPU-hours by class (CLASS_MIX) and a share of all GPU-hours by its weight. Arrivals are a
non-homogeneous Poisson process (thinning) with a daily and weekly cycle; each arrival is a (tenant, class) pair
drawn so that, in expectation, GPU-hours split as those shares say, and the mean rate is set so that the offered
load is `load` x fleet GPU capacity: the GPU-hours jobs hold (from binding to release, start-up included, as the
jobs table records them; evaluation bursts included) over the GPU-hours the fleet has, in expectation over a week.
Services last days, so a fleet that started empty would hold too few of them for a week: the stream opens with
the services a fleet in its steady state runs, each for what is left of it (`_running_services`).

Draws happen strictly in job order from one numpy Generator (and an evaluation burst from a generator of its own,
keyed by the run that starts it), so the stream does not depend on how the fleet's clock is advanced.
"""

from __future__ import annotations

import functools
import hashlib
import math
import struct
import uuid
from collections import deque
from dataclasses import dataclass, fields, replace
from statistics import NormalDist

import numpy as np

from gpuledger.classes import WORKLOAD_CLASSES
from gpuledger.collector.sim import noise
from gpuledger.collector.sim.partitioned import CONVERT_STREAM, SimLayout, ask, per_node
from gpuledger.config import Tenant

# Outcomes: (probability, the share of the drawn duration it runs: uniform on this range) and failure reasons.
FAILED_RUN, CANCELLED_RUN = (0.05, 0.9), (0.1, 0.9)
FAIL_REASONS = (("Error", 0.55), ("OOMKilled", 0.3), ("Evicted", 0.15))
STARTUP_S = (10.0, 90.0)  # image pull and container start: the GPU is held, not yet busy (uniform)
MIN_DURATION_S = 60.0  # no job runs less than this, whatever its outcome


@dataclass(frozen=True)
class Shape:
    """How one class's jobs are drawn: request sizes in GPUs (fractional sizes are time-sliced shares of one GPU)
    with their shares, a lognormal run time (its median per size, sigma, clipped to [min_s, max_s]), the outcomes'
    probabilities, and the range of the mean utilization when busy."""

    sizes: tuple[float, ...]
    size_p: tuple[float, ...]
    median_s: tuple[float, ...]
    sigma: float
    min_s: float
    max_s: float
    failed_p: float
    cancelled_p: float
    level: tuple[float, float]

    @property
    def run_share(self) -> float:
        """The mean share of its drawn duration a job runs over the outcomes (a failed or cancelled run stops early)."""
        return (
            1
            - self.failed_p
            - self.cancelled_p
            + self.failed_p * sum(FAILED_RUN) / 2
            + self.cancelled_p * sum(CANCELLED_RUN) / 2
        )


DAY_S, HOUR_S = 86400.0, 3600.0
SHAPES = {
    # As the simulator drew every job before the classes: most jobs small and short, a tail of 8-GPU runs of days.
    "training": Shape(
        (0.25, 0.5, 1.0, 2.0, 4.0, 8.0),
        (0.08, 0.12, 0.42, 0.16, 0.12, 0.10),
        (1200, 1800, 2400, 3600, 5400, 7200),
        1.1,
        MIN_DURATION_S,
        3 * DAY_S,
        0.10,
        0.04,
        (55.0, 98.0),
    ),
    # A service is deployed and replaced after days (a new model version, a scale-down); a small model shares a GPU.
    "inference": Shape(
        (0.5, 1.0, 2.0, 4.0, 8.0),
        (0.15, 0.55, 0.20, 0.08, 0.02),
        (2 * DAY_S,) * 5,
        0.5,
        12 * HOUR_S,
        6 * DAY_S,
        0.02,
        0.0,
        (50.0, 95.0),
    ),
    # The notebook's active part (a person at the keyboard); the parked part is drawn apart (PARK_H).
    "notebook": Shape((1.0,), (1.0,), (2700,), 0.7, 300, 6 * HOUR_S, 0.03, 0.0, (30.0, 95.0)),
    # One benchmark or test split of a checkpoint: minutes, busy throughout; a large model's needs a few GPUs.
    "evaluation": Shape(
        (0.5, 1.0, 2.0, 4.0), (0.15, 0.45, 0.28, 0.12), (1500,) * 4, 0.6, 120, 2 * HOUR_S, 0.03, 0.0, (75.0, 98.0)
    ),
    # Cron jobs: index rebuilds, embedding refreshes, data checks.
    "other": Shape((0.5, 1.0), (0.5, 0.5), (2700,) * 2, 0.7, MIN_DURATION_S, 4 * HOUR_S, 0.05, 0.0, (20.0, 70.0)),
}
assert set(SHAPES) == set(WORKLOAD_CLASSES)
# The classes that arrive on their own; evaluation follows training (Workload.evaluations).
ARRIVING = ("training", "inference", "notebook", "other")

# Each tenant's GPU-hours by class. The built-in tenants (gpuledger/config.py DEFAULT_TENANTS): vision trains, nlp
# and recsys also serve, research trains and works in notebooks, platform runs the shared notebook hub, a few
# services and the cron jobs. Any other tenant gets DEFAULT_CLASS_MIX.
CLASS_MIX = {
    "vision": {"training": 0.82, "inference": 0.0, "notebook": 0.08, "evaluation": 0.07, "other": 0.03},
    "nlp": {"training": 0.55, "inference": 0.32, "notebook": 0.05, "evaluation": 0.06, "other": 0.02},
    "recsys": {"training": 0.48, "inference": 0.40, "notebook": 0.04, "evaluation": 0.05, "other": 0.03},
    "research": {"training": 0.57, "inference": 0.0, "notebook": 0.30, "evaluation": 0.10, "other": 0.03},
    "platform": {"training": 0.0, "inference": 0.30, "notebook": 0.62, "evaluation": 0.0, "other": 0.08},
}
DEFAULT_CLASS_MIX = {"training": 0.62, "inference": 0.20, "notebook": 0.10, "evaluation": 0.05, "other": 0.03}

# Training: the share that is bursty (busy in phases: data loading, checkpoints) and the share that stalls (busy,
# then hung at 0 % for STALL_H hours until someone kills it: the waste the training idle rule is for).
BURSTY_P, STALL_P, STALL_H = 0.3, 0.05, (2.0, 10.0)
# Notebooks: the share parked for PARK_H hours after their active part (the case reclaim exists for); the others
# are closed by their user within CLOSE_H hours of the last activity.
PARK_P, PARK_H, CLOSE_H = 0.75, (1.5, 10.0), (0.05, 0.75)
# Inference: the hour (UTC) a service is busiest, give or take its own offset (users in nearby time zones), its
# utilization at night as a share of its peak, and the share at weekends.
PEAK_HOUR_UTC, PEAK_SHIFT_H, NIGHT_FLOOR, WEEKEND = 13.5, (-1.5, 1.5), 0.02, 0.5
# Evaluation: a burst is this many jobs (uniform), the first this long after the run ends, the next ones this far
# apart (uniform); job numbers of a burst start at EVAL_N0, clear of the stream's.
BURST_JOBS, BURST_DELAY_S, BURST_GAP_S, EVAL_N0 = (4, 16), (60.0, 600.0), (2.0, 30.0), 1 << 32
OPENING_S = 600.0  # the services running when the fleet starts are deployed over its first 10 minutes
POD_WORD = {"training": "train", "inference": "serve", "notebook": "notebook", "evaluation": "eval", "other": "cron"}


@dataclass(frozen=True)
class JobSpec:
    n: int
    job_id: str
    tenant: str
    namespace: str
    workload_class: str
    queue: str
    pod: str
    model_key: str
    gpus: float
    submitted_s: float
    duration_s: float  # how long it runs once started (until its outcome)
    outcome: str  # succeeded, failed, cancelled
    reason: str | None
    profile: str  # steady, bursty, stalls, parks, diurnal (telemetry._level)
    level: float  # mean utilization when busy (diurnal: at the daily peak), percent
    period_s: float  # bursty, parks: cycle length
    duty: float  # bursty, parks: busy fraction of the cycle
    efficiency: float  # sm_active per unit of utilization
    tensor: float  # tensor_active per unit of sm_active
    mem_frac: float  # share of the GPU's memory it holds
    membw: float  # memory utilization per unit of utilization
    active_s: float = math.inf  # stalls, parks: seconds after the start it is active; 0 % from then on
    peak_hour: float = PEAK_HOUR_UTC  # diurnal: the UTC hour it is busiest
    evaluates: bool = False  # training: when it succeeds, an evaluation burst follows
    # No partition ask (PartitionAsk is one): class attributes, not fields, so that a job of a fleet without
    # partitions is built as it was (the stream draws ~3,000 a day of 1,000 GPUs).
    partition = None
    instances = 0

    @property
    def whole(self) -> int:
        return int(self.gpus) if self.gpus >= 1 else 0

    @property
    def milli(self) -> int:
        """Per-GPU share in thousandths (1000 for whole GPUs); a partition ask's: one instance's."""
        if self.partition is not None:
            return int(round(self.gpus / self.instances * 1000))
        return 1000 if self.gpus >= 1 else int(round(self.gpus * 1000))

    @property
    def gpu_count(self) -> int:
        return max(1, self.whole)


@dataclass(frozen=True)
class PartitionAsk(JobSpec):
    """A job asking `instances` instances of one canonical type (collector/sim/partitioned.py); its gpus are
    instances x one instance's share."""

    partition: str | None = None
    instances: int = 0


def diurnal(t_s: float) -> float:
    """Relative arrival rate at time t: peaks mid-afternoon UTC, quieter at night and on weekends."""
    hour = (t_s % 86400) / 3600
    weekday = int(t_s // 86400 + 3) % 7  # 1970-01-01 was a Thursday (3 with Monday = 0)
    day = 1.0 + 0.35 * math.sin(2 * math.pi * (hour - 9) / 24)
    return day * (0.65 if weekday >= 5 else 1.14)


DIURNAL_MAX = 1.35 * 1.14


def service_load(t_s: np.ndarray, peak_hour: float) -> np.ndarray:
    """A service's utilization as a share of its peak at times t: a raised cosine squared around `peak_hour` UTC
    (1 there, 0.25 six hours away, 0 twelve hours away) above a night floor, halved at weekends."""
    hour = (t_s % 86400) / 3600
    bump = ((1 + np.cos(2 * np.pi * (hour - peak_hour) / 24)) / 2) ** 2
    weekday = (t_s // 86400 + 3) % 7
    return (NIGHT_FLOOR + (1 - NIGHT_FLOOR) * bump) * np.where(weekday >= 5, WEEKEND, 1.0)


def weighted_index(weights: list[float], u: float) -> int:
    """The index u in [0, 1) falls on when [0, 1) is cut into pieces of the given weights (summing to 1)."""
    acc = 0.0
    for i, w in enumerate(weights):
        acc += w
        if u < acc:
            return i
    return len(weights) - 1


def clipped_lognormal_mean(median: float, sigma: float, lo: float, hi: float) -> float:
    """E[min(max(X, lo), hi)] for X lognormal with this median and sigma, exactly:
    lo P(X < lo) + E[X; lo <= X <= hi] + hi P(X > hi), where E[X; X <= c] = median e^(sigma^2 / 2) Phi(z_c - sigma)."""
    phi = NormalDist().cdf
    a, b = math.log(lo / median) / sigma, math.log(hi / median) / sigma
    body = median * math.exp(sigma * sigma / 2) * (phi(b - sigma) - phi(a - sigma))
    return lo * phi(a) + body + hi * (1 - phi(b))


def _uniform_mean(lo_hi: tuple[float, float]) -> float:
    return (lo_hi[0] + lo_hi[1]) / 2


@functools.lru_cache(maxsize=64)
def mean_hold_s(cls: str, size: float) -> float:
    """Expected seconds a job of class `cls` and `size` GPUs holds them (start-up + run), with every clip, outcome
    and idle stretch `Workload` draws. Closed forms: a clipped lognormal's mean, the outcomes' mean share, uniform
    means. (A failed notebook ends in its active part, so it parks no more.)"""
    shape = SHAPES[cls]
    run = clipped_lognormal_mean(shape.median_s[shape.sizes.index(size)], shape.sigma, shape.min_s, shape.max_s)
    run *= shape.run_share
    if cls == "training":
        run += STALL_P * _uniform_mean(STALL_H) * HOUR_S
    elif cls == "notebook":
        park = PARK_P * _uniform_mean(PARK_H) + (1 - PARK_P) * _uniform_mean(CLOSE_H)
        run += (1 - shape.failed_p) * park * HOUR_S
    return _uniform_mean(STARTUP_S) + run


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


def class_namespaces(tenant: Tenant) -> dict[str, tuple[str, ...]]:
    """The tenant's namespaces each class runs in, by their names: notebooks in one that says `notebook`, else one
    ending `-dev`, else one not marked for batch work (`train`, `batch`); services in one that says `serv` or
    `infer`, else one not marked `train`, `batch`, `dev` or `notebook`; the batch classes in any but the
    notebook and serving ones. Whatever finds none takes all of the tenant's namespaces."""
    nss = tenant.namespaces or (tenant.name,)

    def marked(ns: str, *words: str) -> bool:
        return any(w in ns for w in words)

    notebook = (
        tuple(n for n in nss if marked(n, "notebook"))
        or tuple(n for n in nss if n.endswith("-dev"))
        or tuple(n for n in nss if not marked(n, "train", "batch"))
        or nss
    )
    serving = tuple(n for n in nss if marked(n, "serv", "infer"))
    inference = serving or tuple(n for n in nss if not marked(n, "train", "batch", "dev", "notebook")) or nss
    batch = tuple(n for n in nss if n not in serving and not marked(n, "notebook")) or nss
    return {"training": batch, "evaluation": batch, "other": batch, "notebook": notebook, "inference": inference}


class _ClassDraw:
    """One class's size distribution on this fleet (sizes above a node's GPUs left out) and its mean GPU-seconds."""

    def __init__(self, cls: str, gpus_per_node: int):
        shape = SHAPES[cls]
        keep = [i for i, s in enumerate(shape.sizes) if s <= gpus_per_node] or [0]
        self.shape = shape
        self.sizes = [shape.sizes[i] for i in keep]
        self.medians = [shape.median_s[i] for i in keep]
        p = np.array([shape.size_p[i] for i in keep])
        self.cum = np.cumsum(p / p.sum())
        self.mean_gpu_s = float(sum(s * q * mean_hold_s(cls, s) for s, q in zip(self.sizes, p / p.sum(), strict=True)))


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
        partitions: dict[str, tuple[SimLayout, float]] | None = None,
    ):
        """`partitions`: per model with partitioned nodes, its layout and the share of its GPUs partitioned."""
        self.rng = np.random.default_rng([seed, 1])
        self.tenants = tenants
        self.models = sorted(model_capacity)
        cap = np.array([model_capacity[m] for m in self.models], dtype=float)
        self.model_p = cap / cap.sum()
        self.draws = {c: _ClassDraw(c, gpus_per_node) for c in WORKLOAD_CLASSES}
        self.namespaces = [class_namespaces(t) for t in tenants]
        # A tenant's share of all GPU-hours is its weight's; within it, its class mix. An arrival of class c brings
        # draws[c].mean_gpu_s on average, so (tenant, class) arrives in proportion to its GPU-hours over that.
        weights = np.array([t.weight for t in tenants], dtype=float)
        share = weights / weights.sum()
        ev = self.draws["evaluation"].mean_gpu_s * _uniform_mean(BURST_JOBS)
        succeeded = 1 - SHAPES["training"].failed_p - SHAPES["training"].cancelled_p
        pairs, arrivals, self.evaluate_p = [], [], []
        for i, t in enumerate(tenants):
            mix = CLASS_MIX.get(t.name, DEFAULT_CLASS_MIX)
            for c in ARRIVING:
                if mix[c] > 0:
                    pairs.append((i, c))
                    arrivals.append(share[i] * mix[c] / self.draws[c].mean_gpu_s)
            # The evaluation GPU-hours per training GPU-hour the mix asks for, as the chance a successful run
            # starts a burst (at most 1: a mix asking for more evaluation than that gets less).
            train = mix["training"] * succeeded * ev
            p_eval = mix["evaluation"] * self.draws["training"].mean_gpu_s / train if train else 0.0
            self.evaluate_p.append(min(1.0, p_eval))
        p = np.array(arrivals) / sum(arrivals)
        self.pairs = pairs
        # Mean GPU-seconds an arrival brings: its own, and for a training run the evaluation burst it may start.
        self.mean_gpu_s = float(
            sum(
                q * (self.draws[c].mean_gpu_s + (c == "training") * succeeded * self.evaluate_p[i] * ev)
                for (i, c), q in zip(pairs, p, strict=True)
            )
        )
        # The diurnal and weekly factors average 1 over any whole week, so this is the mean arrival rate.
        self.rate_per_s = load * cap.sum() / self.mean_gpu_s
        # Cumulative weights: a searchsorted per draw is ~20x cheaper than Generator.choice(p=...).
        self.pair_cum = np.cumsum(p)
        self.pair_p = p
        self.model_cum = np.cumsum(self.model_p)
        self.t = start_s
        self.n = 0
        self.seed = seed
        self.cluster = cluster
        # Per model with partitioned nodes: (layout, instances per node by type, per type the chance a small job
        # mapped to it asks it).
        self.partitions = {
            m: (lay, per_node(lay, gpus_per_node), self._convert_p(lay, gpus_per_node, share, pairs, p, ev, succeeded))
            for m, (lay, share) in (partitions or {}).items()
        }
        self.opening = tuple(self._running_services(start_s))  # the services running when the fleet starts
        self._opening = deque(self.opening)
        self._arrival: JobSpec | None = None  # the next arrival, drawn ahead to merge with the opening services

    def _convert_p(
        self, lay: SimLayout, gpus_per_node: int, share: float, pairs: list, p: np.ndarray, ev: float, succeeded: float
    ) -> dict[str, float]:
        """Per instance type, the chance a small job of the model that `ask` maps to it asks it, so that each type
        is offered the fleet's load on its part of the partitioned GPUs: share (of the model's GPUs partitioned) x
        the type's part of a layout (count x its share of the GPU) x the GPU-seconds an arrival brings
        (`mean_gpu_s`), over the GPU-seconds an arrival would bring as asks of that type if every such small job
        made them (instances' shares x hold; a training run's evaluation burst counted as `mean_gpu_s` counts it).
        At most 1: a type its small jobs cannot fill runs below the fleet's load."""
        most = per_node(lay, gpus_per_node)

        def as_partitions(c: str) -> dict[str, float]:
            d = self.draws[c]
            out: dict[str, float] = {}
            for size, q in zip(d.sizes, np.diff(d.cum, prepend=0.0), strict=True):
                a = ask(lay, c, size, most)
                if a is not None:
                    out[a[0]] = out.get(a[0], 0.0) + q * a[1] * lay.share_of[a[0]] * mean_hold_s(c, size)
            return out

        per_class = {c: as_partitions(c) for c in WORKLOAD_CLASSES}
        burst = _uniform_mean(BURST_JOBS)
        x: dict[str, float] = {}
        for (i, c), q in zip(pairs, p, strict=True):
            for t, v in per_class[c].items():
                x[t] = x.get(t, 0.0) + q * v
            if c == "training":
                for t, v in per_class["evaluation"].items():
                    x[t] = x.get(t, 0.0) + q * succeeded * self.evaluate_p[i] * burst * v
        part = {t: sum(sh for u, sh in zip(lay.types, lay.shares, strict=True) if u == t) for t in lay.share_of}
        whole = sum(part.values())
        return {t: float(min(1.0, share * part[t] / whole * self.mean_gpu_s / x[t])) if x.get(t) else 0.0 for t in part}

    def _partition(self, job: JobSpec) -> JobSpec:
        """The job as a partition ask, when it is a small job of a model with partitioned nodes and its draw (a
        stream of its own, keyed by the job's number: the other jobs' draws do not change) falls under the
        model's chance for the type it would ask; else the job."""
        lay, most, chance = self.partitions[job.model_key]
        a = ask(lay, job.workload_class, job.gpus, most)
        if a is None or noise.uniform1(self.seed, CONVERT_STREAM, job.n, 0) >= chance[a[0]]:
            return job
        t, k = a
        same = {f.name: getattr(job, f.name) for f in fields(JobSpec)}
        return PartitionAsk(**(same | {"gpus": k * lay.share_of[t]}), partition=t, instances=k)

    def _running_services(self, start_s: float) -> list[JobSpec]:
        """The services a fleet in its steady state runs at `start_s`, each for what is left of it, (re)deployed as
        the fleet starts: submitted in its first OPENING_S seconds, in submit order.

        Services arrive at rate lambda and last D: in the steady state (M/G/infinity) the number running is Poisson
        with mean lambda E[D], and each one's remaining time is its length-biased duration (a long service is more
        likely to be running at a given instant) times a uniform share. Length bias by rejection: a drawn duration
        is kept with probability D / max. They are submitted after `start_s`, not as long before it as they have
        run, because nothing of the fleet predates its start: a lake's first day would otherwise show days of
        demand before it made of the services alone."""
        r = self.rng
        out = []
        for (ti, c), q in zip(self.pairs, self.pair_p, strict=True):
            if c != "inference":
                continue
            d = self.draws[c]
            mean_s = sum(q_ * mean_hold_s(c, s) for s, q_ in zip(d.sizes, np.diff(d.cum, prepend=0.0), strict=True))
            for _ in range(int(r.poisson(self.rate_per_s * q * mean_s))):
                while True:
                    job = self._spec(ti, c, start_s, self.models[_pick(self.model_cum, r.random())])
                    if r.random() * SHAPES[c].max_s <= job.duration_s:
                        break
                    self.n -= 1  # the rejected draw takes no job number
                left = max(MIN_DURATION_S, r.random() * job.duration_s)
                t = start_s + r.random() * OPENING_S
                new_id = job_id(self.seed, self.cluster, t, job.n, 0)
                out.append(replace(job, submitted_s=t, duration_s=left, job_id=new_id))
        return sorted(out, key=lambda j: j.submitted_s)

    def next_job(self) -> JobSpec:
        """The next job in submit order: the opening services merged with the arrivals."""
        if self._arrival is None:
            self._arrival = self._next_arrival()
        if self._opening and self._opening[0].submitted_s <= self._arrival.submitted_s:
            return self._opening.popleft()
        job, self._arrival = self._arrival, None
        return job

    def _next_arrival(self) -> JobSpec:
        r = self.rng
        # Thinning: candidates at the peak rate, accepted with probability rate(t) / peak.
        while True:
            self.t += r.exponential(1.0 / (self.rate_per_s * DIURNAL_MAX))
            if r.random() * DIURNAL_MAX <= diurnal(self.t):
                break
        ti, c = self.pairs[_pick(self.pair_cum, r.random())]
        return self._spec(ti, c, self.t, self.models[_pick(self.model_cum, r.random())])

    def evaluations(self, run: JobSpec, end_s: float) -> list[JobSpec]:
        """The evaluation burst that follows training run `run` ending at `end_s`: jobs of its tenant, namespace
        and GPU model, submitted a few seconds apart. From a generator of its own keyed by the run, so the burst
        does not depend on when the fleet asks (and the main stream does not depend on the bursts)."""
        r = np.random.default_rng([self.seed, 3, run.n])
        k = int(r.integers(BURST_JOBS[0], BURST_JOBS[1] + 1))
        t = end_s + r.uniform(*BURST_DELAY_S)
        ti = next(i for i, tenant in enumerate(self.tenants) if tenant.name == run.tenant)
        out = []
        for i in range(k):
            if i:
                t += r.uniform(*BURST_GAP_S)
            n = EVAL_N0 + run.n * 64 + i
            pod = f"{run.tenant}-eval-{run.n:06d}-{i:02d}"
            out.append(self._spec(ti, "evaluation", t, run.model_key, r, n, pod, run.namespace))
        return out

    def _spec(
        self,
        ti: int,
        cls: str,
        t: float,
        model: str,
        r: np.random.Generator | None = None,
        n: int | None = None,
        pod: str | None = None,
        namespace: str | None = None,
    ) -> JobSpec:
        """Draw one job of class `cls` for tenant `ti`, submitted at t. Its uniforms come in one call (a call per
        value was most of the stream's time), in a fixed order whatever the class."""
        if r is None:
            r = self.rng
        if n is None:
            self.n += 1
            n = self.n
        z = r.standard_normal()
        (u_ns, u_size, u_out, u_reason, u_share, u_kind, u_amount, u_eval, *u_look, u_salt) = r.random(16).tolist()
        tenant = self.tenants[ti]
        if namespace is None:
            nss = self.namespaces[ti][cls]
            namespace = nss[int(u_ns * len(nss))]
        d = self.draws[cls]
        shape = d.shape
        k = _pick(d.cum, u_size)
        size = d.sizes[k]
        duration = min(max(d.medians[k] * math.exp(shape.sigma * z), shape.min_s), shape.max_s)
        outcome, reason = "succeeded", "Completed"
        if u_out < shape.failed_p:
            outcome = "failed"
            reason = FAIL_REASONS[weighted_index([p for _, p in FAIL_REASONS], u_reason)][0]
            duration *= _lin(u_share, FAILED_RUN)
        elif u_out < shape.failed_p + shape.cancelled_p:
            outcome, reason = "cancelled", "Cancelled"
            duration *= _lin(u_share, CANCELLED_RUN)
        duration = max(duration, MIN_DURATION_S)
        profile, active_s, peak_hour, evaluates = "steady", math.inf, PEAK_HOUR_UTC, False
        duty = (0.3, 0.7)
        if cls == "training":
            if u_kind < STALL_P:  # busy for what it was drawn, then hung until killed
                profile, active_s = "stalls", duration
                duration += _lin(u_amount, STALL_H) * HOUR_S
            elif u_kind < STALL_P + BURSTY_P:
                profile = "bursty"
            evaluates = outcome == "succeeded" and u_eval < self.evaluate_p[ti]
        elif cls == "notebook":
            profile, active_s, duty = "parks", duration, (0.15, 0.5)
            if outcome != "failed":  # a kernel that died ends the session; otherwise it is left parked or closed
                duration += _lin(u_amount, PARK_H if u_kind < PARK_P else CLOSE_H) * HOUR_S
        elif cls == "inference":
            profile, peak_hour = "diurnal", PEAK_HOUR_UTC + _lin(u_amount, PEAK_SHIFT_H)
        level, period, duty_u, eff, tensor, mem, membw = u_look
        salt = int(u_salt * 2**53)
        job = JobSpec(
            n=n,
            job_id=job_id(self.seed, self.cluster, t, n, salt),
            tenant=tenant.name,
            namespace=namespace,
            workload_class=cls,
            queue=QUEUE[cls],
            pod=pod or f"{tenant.name}-{POD_WORD[cls]}-{n:06d}",
            model_key=model,
            gpus=size,
            submitted_s=t,
            duration_s=duration,
            outcome=outcome,
            reason=reason,
            profile=profile,
            level=_lin(level, shape.level),
            period_s=_lin(period, (300, 1800)),
            duty=_lin(duty_u, duty),
            efficiency=_lin(eff, (0.45, 0.95)),
            tensor=_lin(tensor, (0.05, 0.7)),
            mem_frac=_lin(mem, (0.25, 0.95)),
            membw=_lin(membw, (0.25, 0.8)),
            active_s=active_s,
            peak_hour=peak_hour,
            evaluates=evaluates,
        )
        return self._partition(job) if self.partitions and model in self.partitions else job


def _lin(u: float, lo_hi: tuple[float, float]) -> float:
    """u in [0, 1) mapped onto [lo, hi)."""
    return lo_hi[0] + (lo_hi[1] - lo_hi[0]) * u


QUEUE = {
    "training": "batch",
    "evaluation": "batch",
    "other": "batch",
    "inference": "serving",
    "notebook": "interactive",
}
