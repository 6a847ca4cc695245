"""Every analytics job over a simulated fleet, against one DuckDB GROUP BY gpu_uuid, hour over the same Parquet.

    python benchmarks/analytics_run.py [--lake DIR] [--rounds N]
    (default: builds 7 days x 1,000 GPUs at 10 s in a temp dir; 3 rounds)

Each round times the baseline (one DuckDB group-by over every gpu_samples file) and then the full analytics run
(`gpuledger analyze` from an empty set of derived tables, a fresh process, peak RSS of the process), back to back,
so both see the same machine load. Prints every round, the ratio of each round, and the median ratio: this
machine's speed swings 20-40% from minute to minute, so one round's ratio can say more about the neighbours than
about the code. Then an incremental run after one more hour of samples lands in the lake.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _proc import gpuledger as gl  # noqa: E402

END = "2026-11-30T00:00:00Z"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpuledger.schema import DERIVED_TABLES  # noqa: E402

BASELINE = (
    "SELECT count(*), sum(n) FROM (SELECT gpu_uuid, date_trunc('hour', ts) AS h, avg(util_gpu_pct), "
    "count(*) AS n FROM read_parquet(?, hive_partitioning = true) GROUP BY 1, 2)"
)


def simulate(lake: Path, days: float, end: str) -> None:
    """The benchmark fleet (125 nodes x 8 GPUs at 10 s) over `days` ending at `end`."""
    gl(
        "simulate",
        "--lake",
        str(lake),
        "--nodes",
        "125",
        "--gpus-per-node",
        "8",
        "--days",
        str(days),
        "--step-s",
        "10",
        "--end",
        end,
    )


def clear_derived(lake: Path) -> None:
    for t in DERIVED_TABLES:
        shutil.rmtree(lake / t.name, ignore_errors=True)
    shutil.rmtree(lake / "_state" / "analytics", ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lake", type=Path, default=None)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    tmp = None
    lake = a.lake
    if lake is None:
        tmp = Path(tempfile.mkdtemp(prefix="gl-analytics-"))
        lake = tmp / "lake"
        simulate(lake, 7, END)
    import duckdb

    rounds = []
    for _ in range(a.rounds):
        clear_derived(lake)
        con = duckdb.connect()
        t0 = time.perf_counter()
        groups, samples = con.execute(BASELINE, [str(lake / "gpu_samples" / "*" / "*" / "*.parquet")]).fetchone()
        base_s = time.perf_counter() - t0
        con.close()
        full_s, full_rss, out = gl("analyze", "--lake", str(lake), "--to", END)
        rounds.append((base_s, full_s, full_rss))
    # One more hour arrives (a simulated hour written after END), then the incremental run.
    simulate(lake, 1 / 24, "2026-11-30T01:00:00Z")
    inc_s, inc_rss, _ = gl("analyze", "--lake", str(lake), "--to", "2026-11-30T01:00:00Z")
    print(f"analytics over {samples:,} GPU samples ({groups:,} GPU-hours), 7 days x 1,000 GPUs at 10 s")
    print(f"  DuckDB {duckdb.__version__}; each round: the baseline, then `gpuledger analyze` (a whole process)")
    for k, (base_s, full_s, rss) in enumerate(rounds, 1):
        print(
            f"  round {k}: baseline {base_s:5.1f} s   all analytics {full_s:5.1f} s   ratio {full_s / base_s:.2f}x"
            f"   peak RSS {rss / 1e9:.2f} GB"
        )
    ratios = [f / b for b, f, _ in rounds]
    print(f"  median ratio                                     {statistics.median(ratios):.2f}x", end="")
    print(f" (max {max(ratios):.2f}x)")
    print(f"  median all analytics                             {statistics.median(r[1] for r in rounds):.1f} s")
    print(f"  peak RSS, largest                                {max(r[2] for r in rounds) / 1e9:.2f} GB")
    print(f"  incremental run, one new hour                    {inc_s:.1f} s, peak RSS {inc_rss / 1e9:.2f} GB")
    print("  (the analytics runs are whole processes: interpreter start-up and imports included)")
    for line in out.splitlines():
        print("   ", line)
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
