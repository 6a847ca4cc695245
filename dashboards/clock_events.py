"""NVML's clocks event reasons (once "clocks throttle reasons"): the bit mask gpu_samples.throttle_reasons holds,
decoded into the names nvidia-smi and the NVML docs use.

The bits are nvml.h's nvmlClocksEventReason* / nvmlClocksThrottleReason* constants (pynvml has the same values,
and collector/sim/telemetry.py sets GpuIdle 0x1, SwPowerCap 0x4 and SwThermalSlowdown 0x20). DCGM's
DCGM_FI_DEV_CLOCKS_EVENT_REASONS carries the same mask (collector/dcgm/fields.py).
"""

from __future__ import annotations

import polars as pl

REASONS = {
    0x1: "GpuIdle",
    0x2: "ApplicationsClocksSetting",
    0x4: "SwPowerCap",
    0x8: "HwSlowdown",
    0x10: "SyncBoost",
    0x20: "SwThermalSlowdown",
    0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown",
    0x100: "DisplayClockSetting",
    # Older drivers' throttle-only bits (nvmlClocksThrottleReasonBoardLimit, ...Reliability), kept so a mask from
    # one decodes whole.
    0x200: "BoardLimit",
    0x400: "Reliability",
}
IDLE = 0x1  # the clocks are down because nothing runs: not a limit on work


def names(mask: int | None) -> list[str]:
    """The reasons set in `mask`, lowest bit first; a bit NVML has not named reads `bit 0x...`."""
    if not mask:
        return []
    out, bit = [], 1
    while bit <= mask:
        if mask & bit:
            out.append(REASONS.get(bit, f"bit {bit:#x}"))
        bit <<= 1
    return out


def shares(frame: pl.DataFrame, column: str = "throttle_reasons") -> pl.DataFrame:
    """Per reason seen: its bit, the samples it was set in, their share of the samples that report a mask, and the
    first and last time (column `t`). Most frequent first."""
    known = frame.filter(pl.col(column).is_not_null())
    seen = 0
    for m in known[column].unique().to_list():
        seen |= int(m)
    if not seen:
        t = frame.schema.get("t", pl.Datetime("us", "UTC"))
        names = {"reason": pl.String, "bit": pl.String, "samples": pl.Int64, "pct_of_samples": pl.Float64}
        return pl.DataFrame(schema=names | {"first": t, "last": t})
    total = known.height
    rows = []
    for bit in sorted(b for b in range(seen.bit_length()) if seen >> b & 1):
        value = 1 << bit
        on = known.filter((pl.col(column) & value) != 0)
        rows.append(
            {
                "reason": REASONS.get(value, f"bit {value:#x}"),
                "bit": f"{value:#x}",
                "samples": on.height,
                "pct_of_samples": 100.0 * on.height / total,
                "first": on["t"].min(),
                "last": on["t"].max(),
            }
        )
    out = pl.DataFrame(rows, schema_overrides={"first": frame.schema["t"], "last": frame.schema["t"]})
    return out.sort(["samples", "bit"], descending=[True, False])
