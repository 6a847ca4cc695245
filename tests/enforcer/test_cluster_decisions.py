"""One lake, two clusters, a webhook in each: each reads only its own cluster's decision rows (issue 16 item 3).

The lake holds the decisions of two analyses: eu-1's, where tenant vision holds 0 of its 40 H100 GPUs, and a newer
one of us-1, where vision holds all 40. A Pod asking 8 H100 GPUs in vision-train fits eu-1 (0 + 8 <= 40) and not
us-1 (40 + 8 > 40). Read without the cluster, eu-1's webhook would take us-1's newer run as the latest and deny.
"""

import datetime as dt

import pytest

from gpuledger.enforcer.store import load_table

from builders import at, epoch_us, write_rows

NOW = at(2, 12)
H100 = "NVIDIA H100 80GB HBM3"
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: eight, namespace: vision-train}
spec:
  nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
  containers:
  - name: train
    image: trainer:1
    resources: {limits: {nvidia.com/gpu: "8"}}
"""


def _decision(cluster: str, computed_at: dt.datetime, allocated_gpus: float) -> dict:
    return {
        "computed_at": epoch_us(computed_at),
        "cluster": cluster,
        "tenant": "vision",
        "gpu_model": H100,
        "allocated_gpus": allocated_gpus,
        "quota_gpus": 40.0,
        "spent_usd": 0.0,
        "spent_gpu_h": 0.0,
    }


@pytest.fixture
def lake(tmp_path):
    path = tmp_path / "lake"
    write_rows(path, "decisions", [_decision("eu-1", NOW - dt.timedelta(minutes=10), 0.0)], "eu-1")
    write_rows(path, "decisions", [_decision("us-1", NOW - dt.timedelta(minutes=5), 40.0)], "us-1")
    return path


def test_load_table_reads_its_own_clusters_latest_run(lake):
    eu, us = load_table(lake, "eu-1"), load_table(lake, "us-1")
    assert eu.computed_at == NOW - dt.timedelta(minutes=10) and us.computed_at == NOW - dt.timedelta(minutes=5)
    assert eu.rows[("vision", H100)].allocated_gpus == 0.0
    assert us.rows[("vision", H100)].allocated_gpus == 40.0
    assert load_table(lake, "ap-1") is None  # a cluster never analysed has no table, not another cluster's


@pytest.mark.parametrize(("cluster", "exit_code", "answer"), [("eu-1", 0, "admitted"), ("us-1", 3, "DENIED (quota")])
def test_each_clusters_webhook_decides_on_its_own_rows(cli, lake, tmp_path, cluster, exit_code, answer):
    config = tmp_path / f"{cluster}.toml"
    config.write_text(f'cluster = "{cluster}"\n')
    f = tmp_path / "p.yaml"
    f.write_text(POD)
    r = cli("enforcer", "check", f, "--lake", lake, "--config", config, "--at", NOW.isoformat())
    assert r.exit_code == exit_code, r.output
    assert r.output.startswith(f"Pod vision-train/eight: {answer}"), r.output
