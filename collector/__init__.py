"""collector: per-node sources (NVML, dcgm-exporter, Prometheus, Kubernetes, the simulated fleet) -> spool -> lake.

Sources read; they never compute fleet-wide figures. Imports nothing from analytics, dashboards or enforcer.
"""
