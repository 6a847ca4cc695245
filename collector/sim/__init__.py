"""The simulated fleet: a deterministic (by seed) model of a shared GPU cluster.

- catalog: GPU models with their real memory, power and clocks;
- workload: the job stream (arrivals with a daily cycle; five workload classes, each with its sizes, durations,
  outcomes and usage profile: docs/workload-classes.md, "Simulated fleet");
- scheduler: places jobs on GPUs, so queue time and fragmentation emerge instead of being drawn;
- fleet: the event loop tying them together;
- telemetry: per-GPU samples, processes and health events as pure functions of (seed, GPU, time, jobs).

Because telemetry is a pure function of time, the live source and the fast backfill give identical rows
for the same instant.
"""
