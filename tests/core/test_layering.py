"""The data-flow arrows are checked by a tool: import-linter contracts in pyproject.toml."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_import_contracts_hold():
    lint = Path(sys.executable).parent / "lint-imports"
    r = subprocess.run(
        [str(lint), "--config", str(REPO / "pyproject.toml"), "--no-cache"], capture_output=True, text=True, cwd=REPO
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Contracts: 2 kept, 0 broken." in r.stdout


def test_importing_the_core_starts_nothing():
    code = (
        "import sys, threading, gpuledger, gpuledger.cli, gpuledger.lake, gpuledger.query, gpuledger.spool, "
        "gpuledger.compaction, gpuledger.config\n"
        "assert threading.active_count() == 1, threading.enumerate()\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('collector', 'analytics', 'dashboards', "
        "'enforcer')], 'the core imported a stage'"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_ruff_lint_is_clean():
    ruff = Path(sys.executable).parent / "ruff"
    r = subprocess.run(
        [str(ruff), "check", "gpuledger", "collector", "analytics", "dashboards", "enforcer", "tests", "benchmarks"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert r.returncode == 0, r.stdout + r.stderr
