"""dcgm-exporter page parsing: parse_fast against parse_reference on the same pages, in the same run.

    python benchmarks/dcgm_parse.py [--scrapes 5] [--fields 40] [--rounds 7] [--tiny]
    (--tiny: one page, one round, the fast parser once a round, so the test suite runs this script)

Pages: `--scrapes` scrapes of an 8-GPU node as dcgm-exporter 4.x writes them (HELP and TYPE before each family,
then one line per GPU), for the first `--fields` metric fields of tests/fixtures/dcgm/default-counters.csv
(enabled or commented out, in file order). The label sets are the H100 capture's eight, and four GPUs run pods
with the container/namespace/pod/pod_uid labels the capture shows on its one busy GPU. Then the 11 real
captures of tests/fixtures/dcgm as they are.

Each round parses every page once with each parser, alternating, and the median round is reported. Both
parsers must return the same samples (NaN equal to NaN) or the script stops. Also shown: prometheus_client's
own parser alone on the same pages, the floor under parse_reference (which adds our rules and undoes its
counter renaming).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from gpuledger.collector.dcgm.exposition import parse_fast, parse_reference

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "dcgm"
CAPTURE = "h100x8-eks-gpu-operator-1pod-a.prom"
PODS = {2: "vllm-agg-0-vllmdecodeworker-dkb9q", 3: "trainer-7f9c-0", 5: "notebook-ana-0", 6: "trainer-7f9c-1"}
# dcgm-exporter prints these fields with %f; every other field is an integer.
FLOAT_FIELDS = ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_PROF_")


def fields(n: int) -> list[tuple[str, str, str]]:
    """(name, type, help) of the first n numeric fields of default-counters.csv, commented out or not."""
    out: dict[str, tuple[str, str, str]] = {}
    for raw in (FIXTURES / "default-counters.csv").read_text().splitlines():
        row = raw.strip().lstrip("#").strip()
        if row.startswith("DCGM_FI_"):
            name, typ, help_ = (p.strip() for p in row.split(",", 2))
            if typ != "label":
                out.setdefault(name, (name, typ, help_))
    return list(out.values())[:n]


def label_sets() -> list[str]:
    """The capture's eight GPU label strings, with pod labels on the GPUs of PODS."""
    sets = []
    for line in (FIXTURES / CAPTURE).read_text().splitlines():
        if line.startswith("DCGM_FI_DEV_GPU_TEMP{"):
            labels = line[line.index("{") + 1 : line.rindex("}")]
            base = labels.split(',container="')[0]  # the capture's busy GPU: keep only the GPU's own labels
            gpu = len(sets)
            if gpu in PODS:
                base += f',container="main",namespace="ml-prod",pod="{PODS[gpu]}",pod_uid=""'
            sets.append(base)
    assert len(sets) == 8
    return sets


def scrape(fields_: list[tuple[str, str, str]], sets: list[str], rng: random.Random) -> str:
    out = []
    for name, typ, help_ in fields_:
        out.append(f"# HELP {name} {help_}\n# TYPE {name} {typ}\n")
        for labels in sets:
            if name.startswith(FLOAT_FIELDS):
                value = f"{rng.uniform(0, 700):f}"
            else:
                value = str(rng.randrange(0, 10 ** rng.randrange(1, 12)))
            out.append(f"{name}{{{labels}}} {value}\n")
    return "".join(out)


def comparable(samples) -> list:
    return [(s.name, dict(s.labels), "NaN" if math.isnan(s.value) else s.value, s.timestamp) for s in samples]


def prometheus_client_alone(text: str) -> list:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def measure(pages: list[str], rounds: int, fast_repeat: int) -> dict[str, float]:
    """Median seconds to parse all pages once, per parser; rounds alternate so drift hits all alike."""
    runs: dict[str, list[float]] = {"reference": [], "fast": [], "prometheus_client": []}
    for _ in range(rounds):
        for key, fn, repeat in (
            ("reference", parse_reference, 1),
            ("fast", parse_fast, fast_repeat),
            ("prometheus_client", prometheus_client_alone, 1),
        ):
            t0 = time.perf_counter()
            for _ in range(repeat):
                for text in pages:
                    fn(text)
            runs[key].append((time.perf_counter() - t0) / repeat)
    return {key: statistics.median(ts) for key, ts in runs.items()}


def checked_samples(title: str, pages: list[str]) -> int:
    """The samples of `pages`, once both parsers are seen to return the same (the script stops otherwise)."""
    n = 0
    for text in pages:
        fast = parse_fast(text)
        if comparable(fast) != comparable(parse_reference(text)):
            raise SystemExit(f"{title}: parse_fast and parse_reference disagree")
        n += len(fast)
    return n


def report(title: str, pages: list[str], rounds: int, fast_repeat: int) -> float:
    n = checked_samples(title, pages)
    t = measure(pages, rounds, fast_repeat)
    kb = sum(len(p.encode()) for p in pages) / 1000
    print(f"{title}: {len(pages)} pages, {n:,} samples, {kb:,.0f} kB; outputs identical")
    print(f"  parse_reference          {n / t['reference']:>11,.0f} samples/s")
    print(f"  parse_fast               {n / t['fast']:>11,.0f} samples/s")
    print(f"  ratio                    {t['reference'] / t['fast']:>11.1f}x   (target >= 20x)")
    print(
        f"  prometheus_client alone  {n / t['prometheus_client']:>11,.0f} samples/s   "
        f"(parse_fast is {t['prometheus_client'] / t['fast']:.1f}x that)"
    )
    return t["reference"] / t["fast"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scrapes", type=int, default=5, help="pages of the 8-GPU node, each with fresh values [5]")
    ap.add_argument("--fields", type=int, default=40, help="metric fields per page [40]")
    ap.add_argument("--rounds", type=int, default=7, help="timed rounds; the median is reported [7]")
    ap.add_argument("--tiny", action="store_true", help="one page, one round: checks it runs")
    a = ap.parse_args()
    # The fast parser repeats its pass 40 times a round: one pass is too short for the clock to time well.
    fast_repeat = 40
    if a.tiny:
        a.scrapes, a.rounds, fast_repeat = 1, 1, 1
    rng = random.Random(42)
    fields_, sets = fields(a.fields), label_sets()
    node_pages = [scrape(fields_, sets, rng) for _ in range(a.scrapes)]
    print(f"8 GPUs x {len(fields_)} fields, pods on GPUs {sorted(PODS)}; median of {a.rounds} rounds")
    report("8-GPU node pages", node_pages, a.rounds, fast_repeat)
    captures = [p.read_text() for p in sorted(FIXTURES.glob("*.prom"))]
    report("real captures (tests/fixtures/dcgm)", captures, a.rounds, fast_repeat)


if __name__ == "__main__":
    main()
