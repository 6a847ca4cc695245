"""Every analytics job over a simulated fleet, against one DuckDB GROUP BY gpu_uuid, hour over the same Parquet.

    python benchmarks/analytics_run.py [--lake DIR] [--rounds N] [--tiny]
    (default: builds 7 days x 1,000 GPUs at 10 s in a temp dir; 3 rounds. --tiny: 2 nodes x 2 GPUs for one day at
    60 s and one round, seconds in all, so the test suite runs this script and its baseline cannot rot)

Each round times the baseline (one DuckDB group-by over every gpu_samples file, as `gpuledger.lake.table_files`
lists them: a glob written here went stale when the lake's layout changed) and then the full analytics run
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
from gpuledger.lake import table_files  # noqa: E402
from gpuledger.schema import DERIVED_TABLES  # noqa: E402

BASELINE = (
    "SELECT count(*), sum(n) FROM (SELECT gpu_uuid, date_trunc('hour', ts) AS h, avg(util_gpu_pct), "
    "count(*) AS n FROM read_parquet(?, hive_partitioning = true) GROUP BY 1, 2)"
)
# (nodes, GPUs per node, days, step in seconds) of the fleet: the size, and the test suite's.
FULL = (125, 8, 7, 10)
TINY = (2, 2, 1, 60)


def simulate(lake: Path, fleet: tuple[int, int, float, int], days: float, end: str) -> None:
    """The benchmark fleet (`fleet`: nodes, GPUs per node, step) over `days` ending at `end`."""
    nodes, gpus, _, step_s = fleet
    gl(
        "simulate",
        "--lake",
        str(lake),
        "--nodes",
        str(nodes),
        "--gpus-per-node",
        str(gpus),
        "--days",
        str(days),
        "--step-s",
        str(step_s),
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
    ap.add_argument("--rounds", type=int, default=None, help="[3; 1 with --tiny]")
    ap.add_argument("--tiny", action="store_true", help="a 4-GPU fleet for a day, one round: checks it runs")
    a = ap.parse_args()
    fleet = TINY if a.tiny else FULL
    rounds_n = a.rounds or (1 if a.tiny else 3)
    tmp = None
    lake = a.lake
    if lake is None:
        tmp = Path(tempfile.mkdtemp(prefix="gl-analytics-"))
        lake = tmp / "lake"
        simulate(lake, fleet, fleet[2], END)
    import duckdb

    rounds = []
    for _ in range(rounds_n):
        clear_derived(lake)
        files = [str(Path(lake, k)) for k in table_files(lake, "gpu_samples")]
        if not files:
            sys.exit(f"{lake}: no gpu_samples files")
        con = duckdb.connect()
        t0 = time.perf_counter()
        groups, samples = con.execute(BASELINE, [files]).fetchone()
        base_s = time.perf_counter() - t0
        con.close()
        full_s, full_rss, out = gl("analyze", "--lake", str(lake), "--to", END)
        rounds.append((base_s, full_s, full_rss))
    # One more hour arrives (a simulated hour written after END), then the incremental run.
    simulate(lake, fleet, 1 / 24, "2026-11-30T01:00:00Z")
    inc_s, inc_rss, _ = gl("analyze", "--lake", str(lake), "--to", "2026-11-30T01:00:00Z")
    nodes, gpus, days, step_s = fleet
    print(f"analytics over {samples:,} GPU samples ({groups:,} GPU-hours), ", end="")
    print(f"{days:g} days x {nodes * gpus:,} GPUs at {step_s} s" if a.lake is None else str(lake))
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
