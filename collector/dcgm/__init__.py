"""dcgm: read NVIDIA dcgm-exporter /metrics pages (Prometheus text format 0.0.4) into samples."""
