"""python -m gpuledger.analytics.exporter.grafana > deploy/grafana/gpuledger.json"""

from gpuledger.analytics.exporter.grafana import render

print(render(), end="")
