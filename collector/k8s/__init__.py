"""Kubernetes pod lifecycle: pure pod -> jobs-row mapping (pods.py) and a resumable pod watch (watcher.py)."""
