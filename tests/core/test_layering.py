"""The data-flow arrows are checked by a tool: import-linter contracts in pyproject.toml."""

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _installed_layout(root: Path) -> Path:
    """The package tree as `pip install .` lays it out (gpuledger/collector/..., from pyproject's package-dir).

    import-linter finds a package's modules by walking its folder, so it cannot see stage folders that live beside
    gpuledger/ in the repository; it lints this copy instead.
    """
    package_dir = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for package, folder in sorted(package_dir.items()):  # parents before children
        shutil.copytree(
            REPO / folder,
            root.joinpath(*package.split(".")),
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            dirs_exist_ok=True,
        )
    return root


def test_import_contracts_hold(tmp_path):
    lint = Path(sys.executable).parent / "lint-imports"
    site = _installed_layout(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": str(site)}
    r = subprocess.run(
        [str(lint), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Contracts: 1 kept, 0 broken." in r.stdout


def test_importing_the_core_starts_nothing():
    code = (
        "import sys, threading, gpuledger, gpuledger.cli, gpuledger.lake, gpuledger.query, gpuledger.spool, "
        "gpuledger.compaction, gpuledger.config\n"
        "assert threading.active_count() == 1, threading.enumerate()\n"
        "assert not [m for m in sys.modules if m.split('.')[:2] in (['gpuledger', 'collector'], "
        "['gpuledger', 'analytics'], ['gpuledger', 'dashboards'], ['gpuledger', 'enforcer'])], "
        "'the core imported a stage'"
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
