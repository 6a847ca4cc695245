-- gpu_samples: one GPU (or MIG instance) per scrape.
-- Time column: ts (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW gpu_samples AS
SELECT
    CAST(ts AS TIMESTAMP WITH TIME ZONE) AS ts,              -- TIMESTAMP WITH TIME ZONE: scrape time, UTC
    CAST(cluster AS VARCHAR) AS cluster,                     -- VARCHAR: cluster name from config ('default' when unset)
    CAST(node AS VARCHAR) AS node,                           -- VARCHAR: Kubernetes node / host name
    CAST(gpu_uuid AS VARCHAR) AS gpu_uuid,                   -- VARCHAR: GPU UUID (MIG instance UUID for a MIG row)
    CAST(gpu_index AS INTEGER) AS gpu_index,                 -- INTEGER: NVML device index on the node
    CAST(parent_gpu_uuid AS VARCHAR) AS parent_gpu_uuid,     -- VARCHAR: physical device of a MIG instance or other partition (AMD CPX, vNPU)
    CAST(mig_profile AS VARCHAR) AS mig_profile,             -- VARCHAR: partition profile: MIG 1g.10gb, AMD cpx.nps4, Ascend vnpu-2c; null if whole
    CAST(model AS VARCHAR) AS model,                         -- VARCHAR: product name, e.g. NVIDIA H100 80GB HBM3
    CAST(pci_bus_id AS VARCHAR) AS pci_bus_id,               -- VARCHAR: PCI bus id, e.g. 00000000:53:00.0
    CAST(driver_version AS VARCHAR) AS driver_version,       -- VARCHAR: NVIDIA driver version
    CAST(util_gpu_pct AS FLOAT) AS util_gpu_pct,             -- FLOAT: percent of time a kernel ran (NVML utilization.gpu / DCGM_FI_DEV_GPU_UTIL; a MIG instance: DCGM_FI_PROF_GR_ENGINE_ACTIVE x 100)
    CAST(util_mem_pct AS FLOAT) AS util_mem_pct,             -- FLOAT: percent of time device memory was read or written
    CAST(sm_active_ratio AS FLOAT) AS sm_active_ratio,       -- FLOAT: fraction of SM cycles with a warp resident (DCGM_FI_PROF_SM_ACTIVE)
    CAST(tensor_active_ratio AS FLOAT) AS tensor_active_ratio, -- FLOAT: fraction of cycles the tensor pipes were busy
    CAST(mem_used_bytes AS BIGINT) AS mem_used_bytes,        -- BIGINT: device memory used
    CAST(mem_total_bytes AS BIGINT) AS mem_total_bytes,      -- BIGINT: device memory total
    CAST(mem_reserved_bytes AS BIGINT) AS mem_reserved_bytes, -- BIGINT: device memory reserved by the driver
    CAST(power_w AS FLOAT) AS power_w,                       -- FLOAT: board power draw (NVML reports mW)
    CAST(power_limit_w AS FLOAT) AS power_limit_w,           -- FLOAT: enforced power limit
    CAST(energy_j AS DOUBLE) AS energy_j,                    -- DOUBLE: energy counter since driver load (NVML reports mJ)
    CAST(temp_c AS FLOAT) AS temp_c,                         -- FLOAT: GPU temperature
    CAST(sm_clock_mhz AS INTEGER) AS sm_clock_mhz,           -- INTEGER: SM clock
    CAST(mem_clock_mhz AS INTEGER) AS mem_clock_mhz,         -- INTEGER: memory clock
    CAST(throttle_reasons AS BIGINT) AS throttle_reasons,    -- BIGINT: NVML clocks event reasons bit mask
    CAST(ecc_corrected_total AS BIGINT) AS ecc_corrected_total, -- BIGINT: volatile corrected ECC errors
    CAST(ecc_uncorrected_total AS BIGINT) AS ecc_uncorrected_total, -- BIGINT: volatile uncorrected ECC errors
    CAST(source AS VARCHAR) AS source,                       -- VARCHAR: collector source: nvml, dcgm, amd, ascend, prometheus, sim
    CAST(pod AS VARCHAR) AS pod,                             -- VARCHAR: pod holding the GPU, when known
    CAST(namespace AS VARCHAR) AS namespace,                 -- VARCHAR: namespace of that pod
    CAST(container AS VARCHAR) AS container,                 -- VARCHAR: container of that pod
    CAST(vendor AS VARCHAR) AS vendor,                       -- VARCHAR: device vendor: nvidia, amd, huawei
    CAST(partition_share AS DOUBLE) AS partition_share,      -- DOUBLE: share of the parent device a partition row holds (MIG 1g = 1/7, AMD CPX on MI300X = 1/8, an Ascend vNPU its AI cores / the chip's); null for a whole device
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM (SELECT * FROM read_parquet(getvariable('gpuledger_lake') || '/gpu_samples/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE})
    UNION ALL BY NAME SELECT NULL::VARCHAR AS vendor, NULL::DOUBLE AS partition_share WHERE false);
