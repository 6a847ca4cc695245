"""Where every dcgm-exporter field lands: a gpu_samples column (with its unit conversion), a derived column,
a health event, or the long gpu_fields table. Every field of dcgm-exporter's default-counters.csv is listed
here explicitly (tests/collector/test_dcgm_rows.py checks it); fields nobody listed still go to gpu_fields.
"""

from __future__ import annotations

MIB = 1 << 20

# field -> (gpu_samples column, factor to the column's unit)
COLUMNS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("util_gpu_pct", 1.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("util_mem_pct", 1.0),
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active_ratio", 1.0),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active_ratio", 1.0),
    "DCGM_FI_DEV_FB_USED": ("mem_used_bytes", MIB),  # MiB
    "DCGM_FI_DEV_FB_RESERVED": ("mem_reserved_bytes", MIB),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),  # W
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": ("power_limit_w", 1.0),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_w", 1.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_j", 1e-3),  # mJ
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", 1.0),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("throttle_reasons", 1.0),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("throttle_reasons", 1.0),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("ecc_corrected_total", 1.0),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("ecc_uncorrected_total", 1.0),
}
# Used to derive mem_total_bytes = free + used + reserved (dcgm-exporter has no total field).
FB_FREE = "DCGM_FI_DEV_FB_FREE"
# A MIG instance's activity (a ratio): its util_gpu_pct x 1/100, since DCGM has no GPU_UTIL per instance.
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
# The last Xid seen on the GPU (0 = none): a health event when it changes.
XID = "DCGM_FI_DEV_XID_ERRORS"
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"  # exporter counter per xid="<code>" label within its window
# Kept as they are, one row per value, in gpu_fields (named so the default set is accounted for).
LONG = {
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_ENC_UTIL",
    "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
}
# Not a metric but a label on every series: becomes the nodes/driver information, not a value.
LABEL_FIELDS = {"DCGM_FI_DRIVER_VERSION"}

# DCGM's "blank" sentinels (dcgm_structs.h): a value at or above these means "no data", never a number.
INT32_BLANK = 0x7FFFFFF0
INT64_BLANK = 0x7FFFFFFFFFFFFFF0
FP64_BLANK = 140737488355328.0


# Counters that legitimately pass 2**31 (700 W for an hour is 2.5e9 mJ); every other field is int32-sized or a
# ratio, so a value at INT32_BLANK or above can only be a sentinel.
LARGE = {
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
}


def is_blank(field: str, value: float) -> bool:
    """NaN, infinities and DCGM blank sentinels are missing data (null), never zero or a huge number."""
    if value != value or value in (float("inf"), float("-inf")):
        return True
    if value >= FP64_BLANK:  # also covers every int64 sentinel (about 9.2e18)
        return True
    return value >= INT32_BLANK and field not in LARGE
