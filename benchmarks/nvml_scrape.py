"""The nvml source's own CPU per scrape of an 8-GPU node, NVML calls excluded.

    python benchmarks/nvml_scrape.py [--n 2000] [--tiny]
    (--tiny: n=20, so the test suite runs this script)

Runs the real NvmlSource against the fake pynvml (tests/fakes, 8 x H100 from a real capture). Every NVML call is
timed by a proxy and subtracted, so what remains is gpuledger's own work per scrape (building rows, unit
conversion, error handling). Baseline in the same run: the NVML calls alone (what the fake costs), and a bare loop
making the same NVML calls with no row building.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from gpuledger.collector.nvml_source import NvmlSource  # noqa: E402
from gpuledger.config import CollectorConfig, Config  # noqa: E402

from fakes import fleets  # noqa: E402


class Timed:
    """Forwards to the fake module, adding the time spent inside each nvml* call to `inside_s`."""

    def __init__(self, inner):
        self._inner = inner
        self.inside_s = 0.0

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if not (name.startswith("nvml") and callable(attr)):
            return attr

        def timed(*a, **kw):
            t0 = time.perf_counter()
            try:
                return attr(*a, **kw)
            finally:
                self.inside_s += time.perf_counter() - t0

        return timed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--tiny", action="store_true", help="n=20: checks it runs")
    a = ap.parse_args()
    if a.tiny:
        a.n = 20
    nvml = Timed(fleets.h100_node(8))
    cfg = Config(collector=CollectorConfig(node="bench", process_interval_s=10))
    src = NvmlSource(cfg, nvml=nvml)
    own, total, inside = [], [], []
    for k in range(a.n):
        nvml.inside_s = 0.0
        t0 = time.perf_counter()
        batches = list(src.collect(1_800_000_000.0 + k))  # processes every 10th scrape, as in production
        dt = time.perf_counter() - t0
        assert sum(b.rows for b in batches if b.table == "gpu_samples") == 8
        total.append(dt)
        inside.append(nvml.inside_s)
        own.append(dt - nvml.inside_s)
    ms = 1000
    print(f"nvml source, 8 x H100 (fake pynvml from a real capture), n={a.n} scrapes")
    print(
        f"  own CPU per scrape (NVML calls excluded)  median {statistics.median(own) * ms:.3f} ms   "
        f"p99 {sorted(own)[int(0.99 * len(own))] * ms:.3f} ms"
    )
    print(f"  NVML calls (the fake) per scrape          median {statistics.median(inside) * ms:.3f} ms")
    print(f"  whole scrape                              median {statistics.median(total) * ms:.3f} ms")
    print(f"  ratio own / NVML calls                    {statistics.median(own) / statistics.median(inside):.2f}x")


if __name__ == "__main__":
    main()
