"""NVML helpers for the nvml source: field readers that turn NotSupported into null, and pid -> pod attribution."""
