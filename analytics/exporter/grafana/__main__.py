"""python -m gpuledger.analytics.exporter.grafana > deploy/grafana/gpuledger.json"""

from gpuledger.analytics.exporter.grafana import render

if __name__ == "__main__":  # importing the module (pkgutil.walk_packages in tests/e2e/test_install.py) prints nothing
    print(render(), end="")
