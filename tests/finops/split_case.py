"""The hand-computed case of split cost allocation, shared by test_cost_allocation.py (the allocation) and
test_focus_export.py (the same charges as FOCUS rows). Not a test module: it only builds the inputs.

Two H100s: G1 and G2 (MIG-1 a slice of G2), reporting every hour of Nov 2, nothing on Nov 1.
$2 per GPU-hour from January; $5 from Nov 2 at noon (a rate change mid-day).
"""

import polars as pl

from gpuledger.config import Rate

from builders import H100, allocation, allocations, at

RATES = [
    Rate("H100", 2.0, at(1, month=1)),
    Rate("H100", 5.0, at(2, 12)),
]
START, STOP = at(1), at(3)

# A: vision, all of G1, Nov 1 22:00 -> Nov 2 02:00 (across midnight; G1 reported nothing on Nov 1)
# B: nlp, half of G1, Nov 2 10:00 -> 14:00 (across the noon rate change)
# C: vision, a 1g slice (1/7) MIG-1 of G2, Nov 2 05:00 -> 12:00
# D: research, one H100 nobody named, Nov 2 00:00 -> 01:00
ALLOCS = allocations(
    allocation("A", "vision", "G1", 1.0, at(1, 22), at(2, 2)),
    allocation("B", "nlp", "G1", 0.5, at(2, 10), at(2, 14)),
    allocation("C", "vision", "MIG-1", 1 / 7, at(2, 5), at(2, 12), node="n2"),
    allocation("D", "research", None, 1.0, at(2, 0), at(2, 1), node=None),
)


def hourly(busy=None):
    """G1 and G2 report every hour of Nov 2 (not Nov 1); MIG-1 reports as a slice of G2. `busy`: (gpu, hour) ->
    busy_ratio, 0 elsewhere."""
    busy = busy or {}
    rows = []
    for h in range(24):
        for g, parent, node in (("G1", None, "n1"), ("G2", None, "n2"), ("MIG-1", "G2", "n2")):
            rows.append(
                dict(
                    cluster="c",
                    node=node,
                    gpu_uuid=g,
                    parent_gpu_uuid=parent,
                    hour=at(2, h),
                    model=H100,
                    busy_ratio=busy.get((g, h), 0.0),
                )
            )
    return pl.LazyFrame(rows, schema_overrides={"hour": pl.Datetime("us", "UTC")})
