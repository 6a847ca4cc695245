"""analytics: polars jobs turning the raw lake into derived figures (utilization, queue time, fragmentation,
cost, waste), each incremental and idempotent. Reads and writes only the lake."""
