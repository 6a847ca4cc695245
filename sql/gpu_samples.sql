-- gpu_samples: one GPU (or MIG instance) per scrape.
-- Time column: ts (UTC). Units are in the column names.
-- Generated from gpuledger/schema.py by `python -m gpuledger.schema_sql --write`: edit schema.py, not this file.
-- Needs: SET VARIABLE gpuledger_lake = '/path/to/lake';
CREATE OR REPLACE VIEW gpu_samples AS
SELECT
    ts,                                                      -- TIMESTAMP WITH TIME ZONE: scrape time, UTC
    cluster,                                                 -- VARCHAR: cluster name from config ('default' when unset)
    node,                                                    -- VARCHAR: Kubernetes node / host name
    gpu_uuid,                                                -- VARCHAR: GPU UUID (MIG instance UUID for a MIG row)
    gpu_index,                                               -- INTEGER: NVML device index on the node
    parent_gpu_uuid,                                         -- VARCHAR: physical GPU UUID of a MIG instance, null otherwise
    mig_profile,                                             -- VARCHAR: MIG profile such as 1g.10gb, null when not MIG
    model,                                                   -- VARCHAR: product name, e.g. NVIDIA H100 80GB HBM3
    pci_bus_id,                                              -- VARCHAR: PCI bus id, e.g. 00000000:53:00.0
    driver_version,                                          -- VARCHAR: NVIDIA driver version
    util_gpu_pct,                                            -- FLOAT: percent of time a kernel ran (NVML utilization.gpu / DCGM_FI_DEV_GPU_UTIL; a MIG instance: DCGM_FI_PROF_GR_ENGINE_ACTIVE x 100)
    util_mem_pct,                                            -- FLOAT: percent of time device memory was read or written
    sm_active_ratio,                                         -- FLOAT: fraction of SM cycles with a warp resident (DCGM_FI_PROF_SM_ACTIVE)
    tensor_active_ratio,                                     -- FLOAT: fraction of cycles the tensor pipes were busy
    mem_used_bytes,                                          -- BIGINT: device memory used
    mem_total_bytes,                                         -- BIGINT: device memory total
    mem_reserved_bytes,                                      -- BIGINT: device memory reserved by the driver
    power_w,                                                 -- FLOAT: board power draw (NVML reports mW)
    power_limit_w,                                           -- FLOAT: enforced power limit
    energy_j,                                                -- DOUBLE: energy counter since driver load (NVML reports mJ)
    temp_c,                                                  -- FLOAT: GPU temperature
    sm_clock_mhz,                                            -- INTEGER: SM clock
    mem_clock_mhz,                                           -- INTEGER: memory clock
    throttle_reasons,                                        -- BIGINT: NVML clocks event reasons bit mask
    ecc_corrected_total,                                     -- BIGINT: volatile corrected ECC errors
    ecc_uncorrected_total,                                   -- BIGINT: volatile uncorrected ECC errors
    source,                                                  -- VARCHAR: collector source: nvml, dcgm, prometheus, sim
    pod,                                                     -- VARCHAR: pod holding the GPU, when known
    namespace,                                               -- VARCHAR: namespace of that pod
    container,                                               -- VARCHAR: container of that pod
    date                                                     -- DATE: UTC date of the time column (partition column)
FROM read_parquet(getvariable('gpuledger_lake') || '/gpu_samples/date=*/*.parquet',
    hive_partitioning = true, union_by_name = true, hive_types = {'date': DATE});
