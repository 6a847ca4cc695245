"""Accelerator vendors other than NVIDIA read from their Prometheus exporters: each is a table (vendors/table.py:
metric -> column and unit factor, labels -> device, partition, pod), applied by one row builder (vendors/rows.py)
to samples from the dcgm exposition parser. docs/accelerators.md lists the mappings and their sources."""
