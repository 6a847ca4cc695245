"""The README's install line, as a new user runs it: `pip install .` into a fresh venv, no extras.

Every module the wheel installs must import with only the declared dependencies (the kubernetes client is the
one optional extra, and only modules that need it may miss it), every command's `--help` must run, and each
command that works without a cluster or a GPU runs once for real. The dev venv cannot show this: the `[test]`
extra brings PyYAML, kubernetes and more, which is how `enforcer check` shipped needing an undeclared PyYAML.
"""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

# Modules that need the optional `[k8s]` extra; importing them without it may fail, on `kubernetes` alone.
NEEDS_K8S_EXTRA = {"gpuledger.collector.k8s.pods", "gpuledger.collector.k8s_source"}
# Where each installed package lives in the repository (pyproject.toml, [tool.setuptools.package-dir]).
FOLDERS = {"gpuledger": "gpuledger", "collector": "gpuledger.collector", "analytics": "gpuledger.analytics"}
FOLDERS |= {"dashboards": "gpuledger.dashboards", "enforcer": "gpuledger.enforcer", "sql": "gpuledger.sql"}

COMMANDS = [
    [],
    ["up"],
    ["collect"],
    ["simulate"],
    ["analyze"],
    ["sql"],
    ["views"],
    ["compact"],
    ["dashboard"],
    ["exporter"],
    ["export"],
    ["export", "focus"],
    ["report"],
    ["whatif"],
    ["whatif", "placement"],
    ["import"],
    ["import", "jobs"],
    ["import", "trace"],
    ["enforcer"],
    ["enforcer", "serve"],
    ["enforcer", "check"],
    ["enforcer", "certs"],
    ["enforcer", "manifest"],
    ["quota"],
    ["quota", "request"],
    ["quota", "approve"],
    ["quota", "reject"],
    ["quota", "list"],
    ["quota", "kueue"],
    ["reclaim"],
]

POD = """
apiVersion: v1
kind: Pod
metadata: {name: train-1, namespace: vision-train}
spec:
  containers:
  - name: main
    image: trainer
    resources: {limits: {nvidia.com/gpu: 1}}
"""


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A venv with nothing but `pip install .` of this checkout (a built wheel, not an editable install)."""
    root = tmp_path_factory.mktemp("fresh")
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    # A copy of the tree keeps the wheel build's build/ and egg-info out of the checkout.
    src = root / "src"
    files = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, files):
        rel = Path(os.fsdecode(name))
        if rel.parts[0] == "tests" or not (REPO / rel).is_file():
            continue
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes((REPO / rel).read_bytes())
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return env_dir


def _run(env_dir, *args, cwd=None, stdin=None):
    return subprocess.run(
        [str(env_dir / "bin" / "gpuledger"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        input=stdin,
        env={k: v for k, v in os.environ.items() if not k.startswith("GPULEDGER_")},
        timeout=300,
    )


def _repo_modules() -> set[str]:
    """Every module of the repository's package folders, by the name it is installed under."""
    names = set()
    for folder, package in FOLDERS.items():
        for f in (REPO / folder).rglob("*.py"):
            rel = f.relative_to(REPO / folder).with_suffix("").parts
            names.add(".".join((package, *rel[:-1])) if rel[-1] == "__init__" else ".".join((package, *rel)))
    return names


def test_every_installed_module_imports_with_declared_dependencies_only(fresh):
    code = """
import importlib, json, pkgutil
import gpuledger
failed, seen = {}, ["gpuledger"]
for m in pkgutil.walk_packages(gpuledger.__path__, "gpuledger."):
    seen.append(m.name)
    try:
        importlib.import_module(m.name)
    except ImportError as e:
        failed[m.name] = getattr(e, "name", None) or str(e)
print(json.dumps({"failed": failed, "seen": seen}))
"""
    r = subprocess.run([str(fresh / "bin" / "python"), "-c", code], capture_output=True, text=True, cwd="/")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {m: n for m, n in out["failed"].items() if not (m in NEEDS_K8S_EXTRA and n.startswith("kubernetes"))} == {}
    # Every module in the repository was installed (a subpackage missing from pyproject's list would not be).
    assert _repo_modules() - set(out["seen"]) == set()
    # The wheel must not bring the test extra's packages: otherwise this test proves nothing.
    r = subprocess.run([str(fresh / "bin" / "python"), "-c", "import kubernetes"], capture_output=True, text=True)
    assert r.returncode != 0


def test_only_gpuledger_is_installed_at_the_top_level(fresh):
    (dist,) = (fresh / "lib").glob("python3*/site-packages/gpuledger-*.dist-info")
    assert (dist / "top_level.txt").read_text().split() == ["gpuledger"]
    assert sorted(p.name for p in dist.parent.iterdir() if p.name in FOLDERS) == ["gpuledger"]
    py = str(fresh / "bin" / "python")
    for name in ("analytics", "collector", "dashboards", "enforcer", "sql"):
        r = subprocess.run([py, "-c", f"import {name}"], capture_output=True, text=True, cwd="/")
        assert r.returncode == 1 and f"No module named '{name}'" in r.stderr, (name, r.stderr)
        r = subprocess.run([py, "-c", f"import gpuledger.{name}"], capture_output=True, text=True, cwd="/")
        assert r.returncode == 0, (name, r.stderr)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "gpuledger")
def test_every_command_has_help(fresh, command):
    r = _run(fresh, *command, "--help")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Usage: gpuledger" in r.stdout


def test_each_command_runs_for_real_after_a_plain_install(fresh, tmp_path):
    lake = tmp_path / "lake"
    ok = lambda r: (r.returncode == 0, r.stdout + r.stderr)  # noqa: E731

    assert _run(fresh, "--version").stdout.strip().endswith("0.1.0")
    r = _run(
        fresh,
        "simulate",
        "--lake",
        str(lake),
        "--nodes",
        "1",
        "--gpus-per-node",
        "2",
        "--days",
        "0.05",
        "--models",
        "L4",
        "--end",
        "2026-11-02T00:00:00Z",
    )
    assert r.returncode == 0, ok(r)
    r = _run(fresh, "analyze", "--lake", str(lake))
    assert r.returncode == 0, ok(r)
    r = _run(
        fresh, "sql", "--lake", str(lake), "--format", "csv", "SELECT count(DISTINCT gpu_uuid) AS n FROM gpu_samples"
    )
    assert r.returncode == 0 and r.stdout.split() == ["n", "2"], ok(r)
    r = _run(fresh, "views", "--lake", str(lake))
    assert r.returncode == 0 and "CREATE" in r.stdout.upper(), ok(r)
    r = _run(fresh, "compact", "--lake", str(lake))
    assert r.returncode == 0, ok(r)
    r = _run(fresh, "export", "focus", "--lake", str(lake), "--period", "2026-11", "--out", str(tmp_path / "f.csv"))
    assert r.returncode == 0 and (tmp_path / "f.csv").exists(), ok(r)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "job_id,tenant,gpu_model,gpus,submitted_at,scheduled_at,finished_at,status\n"
        "j1,vision,NVIDIA L4,1,2026-11-01T10:00:00Z,2026-11-01T10:05:00Z,2026-11-01T11:05:00Z,succeeded\n"
    )
    r = _run(fresh, "import", "jobs", "--lake", str(lake), str(jobs))
    assert r.returncode == 0, ok(r)
    r = _run(fresh, "collect", "--lake", str(lake), "--source", "sim", "--once")
    assert r.returncode == 0, ok(r)
    # The PyYAML users: check and manifest (they crashed with ModuleNotFoundError: yaml).
    r = _run(fresh, "enforcer", "check", "--lake", str(lake), "-", stdin=POD)
    assert r.returncode in (0, 3) and "train-1" in r.stdout, ok(r)
    r = _run(fresh, "enforcer", "certs", "--out", str(tmp_path / "tls"))
    assert r.returncode == 0 and (tmp_path / "tls" / "tls.crt").exists(), ok(r)
    r = _run(fresh, "enforcer", "manifest", "--tls-dir", str(tmp_path / "tls"))
    assert r.returncode == 0 and "ValidatingWebhookConfiguration" in r.stdout, ok(r)
    # The governance commands (PyYAML for the Kueue objects; the kubernetes client only behind [k8s]).
    r = _run(fresh, "quota", "list", "--lake", str(lake))
    assert r.returncode == 0, ok(r)
    r = _run(fresh, "quota", "kueue", "--lake", str(lake), "--model", "NVIDIA L4")
    assert r.returncode == 0 and "kind: ClusterQueue" in r.stdout, ok(r)
    r = _run(fresh, "reclaim", "--lake", str(lake))
    assert r.returncode == 0, ok(r)
    r = _run(fresh, "reclaim", "--lake", str(lake), "--apply")  # acting needs the cluster's client: the [k8s] extra
    assert r.returncode == 1 and "gpuledger[k8s]" in r.stderr and "Traceback" not in r.stderr, ok(r)
    # Without the [k8s] extra, the k8s source is one line naming the extra, not a traceback.
    r = _run(fresh, "collect", "--lake", str(lake), "--source", "k8s", "--once")
    assert r.returncode == 1 and "gpuledger[k8s]" in r.stderr and "Traceback" not in r.stderr, ok(r)


def test_the_command_list_is_every_command_of_the_cli():
    """COMMANDS is written out (the fresh venv runs them), so a new command must be added to it: this says so."""
    import click

    from gpuledger.cli import main

    def walk(cmd: click.Command, path: list[str]):
        yield path
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, [*path, name])

    assert sorted(walk(main, [])) == sorted(COMMANDS)
