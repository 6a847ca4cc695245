"""Sources come from the entry-point group `gpuledger.sources`: the built-ins, and a third-party package that
registers its own and is collected from with no edit to gpuledger."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from gpuledger import lake
from gpuledger.collector import sources
from gpuledger.config import Config, parse, source_names
from gpuledger.errors import ConfigError, SourceError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "thirdparty_source"
BUILT_IN = ("amd", "ascend", "dcgm", "k8s", "nvml", "prometheus", "sim")


def test_the_built_ins_are_registered_like_anyone_else():
    assert source_names() == BUILT_IN


def test_an_unknown_source_in_the_config_lists_the_registered_ones():
    with pytest.raises(ConfigError) as e:
        parse({"collector": {"sources": ["sim", "nvidia"]}}, "f.toml")
    assert str(e.value).splitlines() == [
        "1 problem(s) in f.toml:",
        "  f.toml: collector.sources[1]: unknown source 'nvidia' "
        "(registered: amd, ascend, dcgm, k8s, nvml, prometheus, sim)",
    ]


def test_an_unknown_source_by_name_lists_the_registered_ones(tmp_path):
    with pytest.raises(
        SourceError, match=r"^unknown source 'nvidia' \(registered: amd, ascend, dcgm, k8s, nvml, prometheus, sim\)$"
    ):
        sources.make("nvidia", Config(), tmp_path, 0.0)


def test_k8s_without_the_kubernetes_client_names_the_extra(monkeypatch, tmp_path):
    # None in sys.modules makes `import kubernetes` fail as if the [k8s] extra were not installed; its submodules
    # and ours that imported it, loaded by earlier tests, are set aside (monkeypatch puts them back). The error then
    # names kubernetes.utils, the first module asked for; with the package absent it names kubernetes.
    for mod in [m for m in sys.modules if m.startswith("kubernetes.")] + [
        "gpuledger.collector.k8s_source",
        "gpuledger.collector.k8s.pods",
    ]:
        monkeypatch.delitem(sys.modules, mod, raising=False)
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    with pytest.raises(SourceError, match=r"^source 'k8s' needs kubernetes\S*: pip install 'gpuledger\[k8s\]' \("):
        sources.make("k8s", Config(), tmp_path, 0.0)


@pytest.mark.slow
def test_a_third_party_source_is_installed_and_collected_from(tmp_path):
    """pip installs tests/fixtures/thirdparty_source into a fresh venv that also sees this one's packages (so
    the editable gpuledger, without a copy); its `acme` source is then valid in a config and collected from."""
    env = tmp_path / "venv"
    venv.create(env, with_pip=False)
    py = env / "bin" / "python"
    # A .pth in the new venv adds this venv's site-packages as a site dir, so its own .pth files (the editable
    # install's) are processed too; --system-site-packages would expose the base interpreter's instead.
    new_site = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], capture_output=True, text=True, check=True
    ).stdout.strip()
    Path(new_site, "_parent_venv.pth").write_text(f"import site; site.addsitedir({sysconfig.get_path('purelib')!r})\n")
    src = shutil.copytree(FIXTURE, tmp_path / "src")  # the build's build/ and egg-info stay out of the checkout
    r = subprocess.run(
        [sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", src], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr

    the_lake = tmp_path / "lake"
    cfg = tmp_path / "gpuledger.toml"
    cfg.write_text(f'cluster = "lab"\n[lake]\npath = "{the_lake}"\n[collector]\nsources = ["acme"]\n')
    cli = [py, "-m", "gpuledger.cli", "collect", "--once", "--config", cfg]
    r = subprocess.run(cli, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr

    rows = lake.scan(the_lake, "nodes").select("cluster", "node", "gpu_model", "gpu_count", "source").collect()
    expected = {"cluster": "lab", "node": "acme-node-1", "gpu_model": "Acme X1", "gpu_count": 4, "source": "acme"}
    assert rows.to_dicts() == [expected]

    # The package's `probe` source cannot be imported (its driver is not installed): one line naming the extra.
    r = subprocess.run([*cli, "--source", "probe"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert (
        "source 'probe' needs acme_probe_driver: pip install 'acme-gpu-source[probe]' "
        "(No module named 'acme_probe_driver')"
    ) in r.stderr
