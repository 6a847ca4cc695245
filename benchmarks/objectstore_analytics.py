"""An analytics run on an object-store lake against the same run on a local lake, same raw files, same run: wall
seconds, rows written per second and the S3/local ratio, for a first run from scratch and for the run after one more
hour of raw data (incremental).

    python benchmarks/objectstore_analytics.py [--nodes 4] [--gpus 8] [--days 7] [--step-s 60] [--reps 3] [--tiny]
    (the defaults take about a minute on 2 shared cores; a larger lake: e.g. --nodes 16 --days 30; --tiny: 2 nodes
    x 2 GPUs for one day, one repetition, to check it runs)

The raw lake is simulated once, locally, ending at tests/builders.END, by the builders the tests use (make_lake: the
real simulator at a fixed seed); one more simulated hour is written into a folder of its own (as
analytics_run.py's `gpuledger simulate` of one hour writes it). Each repetition copies the raw lake into a fresh
local lake and uploads it (tests/s3_server.upload, not timed) under a fresh prefix of a bucket on moto's S3 server,
which runs on loopback as its own process (tests/s3_server.py), with a fresh XDG_STATE_HOME (the analytics' local copy
of an object-store lake's state): the first runs start from nothing on both sides. Then the hour lands on both sides
and the incremental runs follow, the S3 one with the local state copy its first run left (a Deployment's emptyDir).
Each run is `gpuledger.analytics.runner.run` in this process, local and S3 alternating so load on the shared host hits
both; the figures are medians over the repetitions. Rows are the sum of the run's RunReport rows (every derived table,
rows rewritten, not distinct rows): both sides must write the same number, or the benchmark stops.

On S3 the run also holds a lease and pulls and commits its state (gpuledger/store/s3_state.py): the time spent in
s3_state.pull and .push is measured by wrapping them, and the requests moto served during the run are counted
from its log (a line per request). moto is one Python process serving every request, so it, not the client, bounds
the S3 figures; a real store adds a network round trip per request but serves many at once.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from gpuledger.analytics import runner  # noqa: E402
from gpuledger.config import defaults  # noqa: E402
from gpuledger.store import open_store, s3_state  # noqa: E402

from builders import END, make_lake  # noqa: E402
from s3_server import MotoServer, upload  # noqa: E402

HOUR_S = 3600
# werkzeug colours some lines (a 206 or a 404) with ANSI escapes inside the quotes.
REQUEST = re.compile(rb'"(?:\x1b\[[0-9;]*m)*(GET|PUT|HEAD|POST|DELETE) (\S*)')


class StateTimer:
    """Seconds spent in s3_state.pull and .push: `session` calls them through the module's globals, so
    replacing those attributes times every call a run makes."""

    def __init__(self):
        self.s = {"pull": 0.0, "push": 0.0}

    @contextlib.contextmanager
    def installed(self):
        saved = {name: getattr(s3_state, name) for name in self.s}

        def timed(name):
            def call(*args, **kw):
                t0 = time.perf_counter()
                try:
                    return saved[name](*args, **kw)
                finally:
                    self.s[name] += time.perf_counter() - t0

            return call

        for name in self.s:
            setattr(s3_state, name, timed(name))
        try:
            yield self
        finally:
            for name, f in saved.items():
                setattr(s3_state, name, f)


def log_size(srv: MotoServer) -> int:
    return os.fstat(srv.log.fileno()).st_size


def requests_since(srv: MotoServer, offset: int) -> collections.Counter:
    """Requests moto logged after byte `offset` of its log, by method (a GET with list-type= is a LIST; a POST here
    is a batch DELETE). pread: the server shares the file's offset (it inherited the descriptor), so a seek here
    would move where it writes."""
    data = os.pread(srv.log.fileno(), log_size(srv) - offset, offset)
    return collections.Counter(
        "LIST" if m == b"GET" and b"list-type=" in path else m.decode() for m, path in REQUEST.findall(data)
    )


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def analyze(lake, until_s: float, srv: MotoServer | None) -> dict:
    """One analytics run: wall seconds, rows written, per-job seconds; on S3 also pull/push seconds and requests."""
    timer, offset = StateTimer(), log_size(srv) if srv else 0
    moto0 = cpu_s(srv.proc.pid) if srv else 0.0
    with timer.installed():
        t0 = time.perf_counter()
        reports = runner.run(lake, until_s=until_s, cfg=defaults())
        wall = time.perf_counter() - t0
    return {
        "s": wall,
        "rows": sum(r.rows for r in reports),
        "jobs": {r.job: r.seconds for r in reports},
        "pull_s": timer.s["pull"],
        "push_s": timer.s["push"],
        "requests": requests_since(srv, offset) if srv else collections.Counter(),
        "moto_cpu_s": cpu_s(srv.proc.pid) - moto0 if srv else 0.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    ap.add_argument("--days", type=float, default=7)
    ap.add_argument("--step-s", type=int, default=60, help="seconds between samples")
    ap.add_argument("--reps", type=int, default=3, help="repetitions; the figures are their medians")
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    if a.tiny:
        a.nodes, a.gpus, a.days, a.reps = 2, 2, 1, 1
    tmp = Path(tempfile.mkdtemp(prefix="gl-s3analytics-"))
    raw, hour = tmp / "raw", tmp / "hour"
    fleet = dict(nodes=a.nodes, gpus=a.gpus, step_s=a.step_s)
    t0 = time.perf_counter()
    made = make_lake(raw, days=a.days, **fleet)
    make_lake(hour, days=HOUR_S / 86400, end_s=END + HOUR_S, **fleet)
    print(
        f"{a.nodes} nodes x {a.gpus} GPUs, {a.days:g} day(s) at {a.step_s} s: {made.samples:,} GPU samples, "
        f"{made.jobs:,} jobs, {made.files} raw files, simulated in {time.perf_counter() - t0:.0f} s; one more hour in "
        f"{sum(1 for p in hour.rglob('*') if p.is_file())} files",
        flush=True,
    )
    runs: dict[tuple[str, str], list[dict]] = collections.defaultdict(list)
    loads = [os.getloadavg()]
    try:
        with MotoServer() as srv:
            srv.create_bucket("lake-bench")
            os.environ.update(srv.env())
            for k in range(a.reps):
                local, s3 = tmp / f"local-{k}", open_store(f"s3://lake-bench/rep{k}")
                os.environ["XDG_STATE_HOME"] = str(tmp / f"state-{k}")
                shutil.copytree(raw, local)
                up_s = time.perf_counter()
                n = upload(raw, s3)
                up_s = time.perf_counter() - up_s
                order = [("local", local, None), ("s3", s3, srv)]
                order = order if k % 2 == 0 else order[::-1]  # alternate, so both see the same load
                for kind, until_s, src in (("first", END, None), ("incremental", END + HOUR_S, hour)):
                    if src is not None:
                        shutil.copytree(src, local, dirs_exist_ok=True)
                        upload(src, s3)
                    for name, lake, server in order:
                        runs[(kind, name)].append(analyze(lake, until_s, server))
                    loads.append(os.getloadavg())
                r = {key: v[-1] for key, v in runs.items()}
                print(
                    f"rep {k + 1}: uploaded {n} files in {up_s:.1f} s; first local {r['first', 'local']['s']:.1f} s, "
                    f"s3 {r['first', 's3']['s']:.1f} s; incremental local {r['incremental', 'local']['s']:.1f} s, "
                    f"s3 {r['incremental', 's3']['s']:.1f} s; load {loads[-1][0]:.1f}",
                    flush=True,
                )
                for kind in ("first", "incremental"):
                    lr, sr = r[kind, "local"]["rows"], r[kind, "s3"]["rows"]
                    if lr != sr:
                        sys.exit(f"{kind} run of rep {k + 1}: {sr:,} rows written on S3, {lr:,} on the local lake")
                shutil.rmtree(local)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = statistics.median
    print(f"\nmedian of {a.reps} repetition(s); `runner.run` in this process; moto on loopback")
    head = ("run", "rows", "local s", "local rows/s", "S3 s", "S3 rows/s", "S3/local", "pull s", "push s", "requests")
    head += ("moto CPU s",)
    print("{:12s} {:>8s} {:>8s} {:>13s} {:>7s} {:>10s} {:>9s} {:>7s} {:>7s} {:>9s} {:>11s}".format(*head))
    for kind in ("first", "incremental"):
        lo, s3 = runs[kind, "local"], runs[kind, "s3"]
        rows = lo[0]["rows"]
        t_l, t_s = med(x["s"] for x in lo), med(x["s"] for x in s3)
        reqs = med(sum(x["requests"].values()) for x in s3)
        print(
            f"{kind:12s} {rows:>8,} {t_l:>8.2f} {rows / t_l:>13,.0f} {t_s:>7.2f} {rows / t_s:>10,.0f} "
            f"{t_s / t_l:>8.2f}x {med(x['pull_s'] for x in s3):>7.2f} {med(x['push_s'] for x in s3):>7.2f} "
            f"{reqs:>9,.0f} {med(x['moto_cpu_s'] for x in s3):>11.2f}"
        )
        by_method = collections.Counter()
        for x in s3:
            by_method.update(x["requests"])
        methods = ", ".join(f"{m} {c / len(s3):,.0f}" for m, c in by_method.most_common())
        # Where the S3 run spends its extra time: the jobs whose median seconds grew the most.
        extra = {
            job: med(x["jobs"].get(job, 0.0) for x in s3) - med(x["jobs"].get(job, 0.0) for x in lo)
            for job in lo[0]["jobs"]
        }
        top = sorted(extra.items(), key=lambda kv: -kv[1])[:4]
        print(f"    requests per run: {methods}; most S3 extra: " + ", ".join(f"{j} +{s:.2f} s" for j, s in top))
    print(
        "load average (1 min) from {:.1f} to {:.1f}, max {:.1f}; {} CPUs".format(
            loads[0][0], loads[-1][0], max(x[0] for x in loads), os.cpu_count()
        )
    )


if __name__ == "__main__":
    main()
