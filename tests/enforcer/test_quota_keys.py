"""Quota keys name GPU models as the rate card does (`H100` for "NVIDIA H100 80GB HBM3"), end to end: analysis
writes the quota on the lake's model, and `enforcer check` denies by it; a key that names no model of the lake
is a config error at `analyze`, `enforcer check`, `enforcer serve` and `up`, naming the file, the key and the
models."""

import datetime as dt
import shutil

import pytest

from gpuledger.query import Lake

from conftest import END

AT = dt.datetime.fromtimestamp(END, dt.timezone.utc).isoformat()  # the small lake's end: its table is fresh
H100 = "NVIDIA H100 80GB HBM3"
POD = """
apiVersion: v1
kind: Pod
metadata: {name: big, namespace: vision-train}
spec:
  nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
  containers: [{name: train, image: trainer:1, resources: {limits: {nvidia.com/gpu: "3"}}}]
"""

CONFIG = """
[[tenants]]
name = "vision"
namespaces = ["vision-train"]
[tenants.quota]
"{key}" = 1
"*" = 100
"""


@pytest.fixture(scope="module")
def lake(small_lake, tmp_path_factory):
    path = tmp_path_factory.mktemp("quota-keys") / "lake"
    shutil.copytree(small_lake, path)
    return path


def config(tmp_path, key):
    f = tmp_path / f"quota-{key}.toml"
    f.write_text(CONFIG.format(key=key))
    return f


def test_a_short_model_key_caps_that_model(cli, lake, tmp_path):
    cfg = config(tmp_path, "H100")
    r = cli("analyze", "--config", cfg, "--lake", lake, "--to", AT)
    assert r.exit_code == 0, r.output
    with Lake(lake) as q:
        rows = q.execute("SELECT gpu_model, allocated_gpus, quota_gpus FROM decisions ORDER BY gpu_model").rows
    # One row per model vision holds or has a quota for, named as the lake names it (no row named "H100").
    by_model = {m: (held, quota) for m, held, quota in rows}
    assert "H100" not in by_model and by_model[H100][1] == 1.0 and by_model[None][1] == 100.0
    held = by_model[H100][0]
    f = tmp_path / "pod.yaml"
    f.write_text(POD)
    r = cli("enforcer", "check", f, "--config", cfg, "--lake", lake, "--at", AT)
    assert r.exit_code == 3, r.output  # before: admitted, the H100 quota never read
    assert f"tenant vision uses {held:g} of 1 {H100} GPUs; this Pod asks 3" in r.output


@pytest.mark.parametrize(
    "command", [("analyze", "--to", AT), ("enforcer", "check", "-"), ("enforcer", "serve"), ("up",)]
)
def test_a_key_that_names_no_model_is_a_config_error(cli, lake, tmp_path, command):
    cfg = config(tmp_path, "H10")
    args = [*command, "--config", cfg, "--lake", lake]
    if command[-1] == "serve":
        args += ["--cert", cfg, "--key", cfg]  # never read: the config is checked first
    r = cli(*args, input="")
    assert r.exit_code == 1, r.output
    line = f"{cfg}: tenants[0] (vision).quota.H10: names no GPU model in the lake (known: "
    assert line in r.output and H100 in r.output and "Traceback" not in r.output


def test_a_key_that_names_no_model_is_the_same_line_on_each_store(cli, analysed_store, tmp_path):
    """The models are read from the store, whichever kind it is."""
    cfg = config(tmp_path, "H10")
    r = cli("enforcer", "check", "-", "--config", cfg, "--lake", str(analysed_store), input="")
    assert r.exit_code == 1, r.output
    line = f"{cfg}: tenants[0] (vision).quota.H10: names no GPU model in the lake (known: "
    assert line in r.output and H100 in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("command", [("enforcer", "check", "-"), ("enforcer", "serve"), ("up",)])
def test_the_commands_read_the_models_under_the_lakes_read_lock(cli, lake, tmp_path, monkeypatch, command):
    """An analytics run or compaction may replace the files the quota check reads: it holds the read lock."""
    import os

    from gpuledger.analytics import decisions
    from gpuledger.store import local_lock as lake_lock
    from gpuledger.store import open_store

    held = []

    def spy(lake, *_):
        folder = os.path.abspath(open_store(lake).folder)
        held.append(lake_lock._held.__dict__.get("depth", {}).get(folder, 0) > 0)
        raise SystemExit(9)  # stop the command here: only the check's read is under test

    monkeypatch.setattr(decisions, "known_models", spy)
    args = [*command, "--config", config(tmp_path, "H100"), "--lake", lake]
    if command[-1] == "serve":
        args += ["--cert", args[-3], "--key", args[-3]]
    r = cli(*args, input="")
    assert r.exit_code == 9 and held == [True], r.output
