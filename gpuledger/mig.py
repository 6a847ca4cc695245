"""MIG profiles as shares of a GPU, one rule for every stage: the collector's job rows, the cost of a slice and the
enforcer's quota count a `<g>g.<mem>` profile as g of the GPU's 7 compute slices (A100, H100, H200)."""

from __future__ import annotations

import re

MIG_SLICES = 7  # compute slices of an A100/H100/H200; a 1g profile is 1/7 of the GPU
MIG_PROFILE = re.compile(r"^(\d+)(?:c\.\d+)?g\.(\d+)gb(?:\+me)?$")
# "<c>c.<g>g.<mem>gb" is a compute instance holding c of its GPU instance's g slices: it counts as c.


def mig_share(profile: str) -> float:
    """The share of a physical GPU a MIG profile holds, by compute slices (1g.10gb -> 1/7); 1.0 if unrecognised."""
    m = MIG_PROFILE.match(profile)
    return int(m.group(1)) / MIG_SLICES if m else 1.0
