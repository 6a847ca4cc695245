"""AMD and Ascend exporter pages: the collector's parser (parse_fast) against prometheus_client's on the same pages,
in the same run, and the pages to lake rows by each vendor's table (collector/vendors/).

    python benchmarks/vendor_parse.py [--scrapes 5] [--rounds 7] [--tiny]
    (--tiny: one page, one round, the fast parser once a round, so the test suite runs this script)

Pages (tests/fixtures/accelerators/SOURCES.md says which are real):
* AMD: `--scrapes` scrapes of the SYNTHETIC 8 x MI300X page (the real Kaiwo label set, 56 series a GPU, HELP and
  TYPE per family), each with fresh values; then the REAL AMD lines and pages as they are.
* Ascend: `--scrapes` scrapes of Huawei's GOLDEN 8-NPU page (mind-cluster's test page: 7 labels, a millisecond
  timestamp on every chip sample), fresh values each; then the REAL 8 x 910A capture.

Each round parses every page once with each parser, alternating (dcgm_parse.measure), and the median round is
reported. Both parsers must return the same samples or the script stops. "prometheus_client alone" is its parser
without our rules, the floor under the reference.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import time
from pathlib import Path

from dcgm_parse import checked_samples, measure

from gpuledger.collector.dcgm.exposition import parse_fast
from gpuledger.collector.vendors.amd import AMD
from gpuledger.collector.vendors.ascend import ASCEND
from gpuledger.collector.vendors.rows import VendorRows

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "accelerators"
# A sample line's value, and its timestamp when it has one
VALUE = re.compile(r"(?m)^([a-z][^ ]*\}) (\S+)( \d+)?$")


def revalued(text: str, rng: random.Random) -> str:
    """The page with a fresh value on every labelled sample (integers stay integers), timestamps kept."""

    def fresh(m: re.Match) -> str:
        old = m.group(2)
        new = (
            str(rng.randrange(0, 10 ** rng.randrange(1, 7)))
            if old.lstrip("-").isdigit()
            else f"{rng.uniform(0, 1e9):.9e}"
        )
        return f"{m.group(1)} {new}{m.group(3) or ''}"

    return VALUE.sub(fresh, text)


def report(title: str, pages: list[str], vendor, rounds: int, fast_repeat: int) -> float:
    n = checked_samples(title, pages)
    t = measure(pages, rounds, fast_repeat)
    # A later scrape of the same target: its last page's label strings already parsed (what the sources keep)
    later = []
    for _ in range(rounds):
        spent = 0.0
        for _ in range(fast_repeat):
            for text in pages:
                known: dict = {}
                parse_fast(text, known)  # its previous scrape: the same label strings (values do not matter)
                t0 = time.perf_counter()
                parse_fast(text, known)
                spent += time.perf_counter() - t0
        later.append(spent / fast_repeat)
    t_later = statistics.median(later)
    builder = VendorRows(vendor, "c")
    rows_s = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for text in pages:
            builder.rows(parse_fast(text), 0, default_node="node")
        rows_s.append(time.perf_counter() - t0)
    rows_s.sort()
    kb = sum(len(p.encode()) for p in pages) / 1000
    print(f"{title}: {len(pages)} pages, {n:,} samples, {kb:,.0f} kB; outputs identical")
    print(f"  parse_reference          {n / t['reference']:>11,.0f} samples/s")
    print(f"  parse_fast               {n / t['fast']:>11,.0f} samples/s")
    print(f"  ratio                    {t['reference'] / t['fast']:>11.1f}x   (dcgm node pages: 47.6x)")
    print(
        f"  prometheus_client alone  {n / t['prometheus_client']:>11,.0f} samples/s   "
        f"(parse_fast is {t['prometheus_client'] / t['fast']:.1f}x that)"
    )
    print(
        f"  parse_fast, a later scrape {n / t_later:>9,.0f} samples/s   "
        f"(ratio {t['reference'] / t_later:.1f}x; the target's last label strings known)"
    )
    print(f"  parse_fast + {vendor.source} table   {n / rows_s[len(rows_s) // 2]:>11,.0f} samples/s to lake rows")
    return t["reference"] / t["fast"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scrapes", type=int, default=5, help="scrapes of each full page, fresh values each [5]")
    ap.add_argument("--rounds", type=int, default=7, help="timed rounds; the median is reported [7]")
    ap.add_argument("--tiny", action="store_true", help="one page, one round: checks it runs")
    a = ap.parse_args()
    fast_repeat = 40  # one pass of the fast parser is too short for the clock: 40 a round
    if a.tiny:
        a.scrapes, a.rounds, fast_repeat = 1, 1, 1
    rng = random.Random(42)
    print(f"median of {a.rounds} rounds")
    amd = (FIXTURES / "synthetic-amd-mi300x-x8-spx.prom").read_text()
    report(
        "AMD 8 x MI300X pages (synthetic)", [revalued(amd, rng) for _ in range(a.scrapes)], AMD, a.rounds, fast_repeat
    )
    real = [p.read_text() for p in sorted(FIXTURES.glob("amd-dme-*.prom"))]
    report("AMD real lines and pages", real, AMD, a.rounds, fast_repeat)
    golden = (FIXTURES / "ascend-npu-exporter-golden-mock-8npu-podlabels.prom").read_text()
    report(
        "Ascend 8-NPU pages (golden)", [revalued(golden, rng) for _ in range(a.scrapes)], ASCEND, a.rounds, fast_repeat
    )
    capture = (FIXTURES / "ascend-npu-exporter-910a-x8-docs-capture.prom").read_text()
    report("Ascend real 910A capture", [capture], ASCEND, a.rounds, fast_repeat)


if __name__ == "__main__":
    main()
