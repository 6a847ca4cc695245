"""`gpuledger quota kueue` as a user runs it: the models of the config's cluster read from the lake (either store),
the grants from gpuledger.quota_requests, the YAML on stdout or in --out; bad input one line, nothing written."""

import json

import pytest
import yaml

from builders import at, epoch_us, put_lake, write_rows
from kueue_crds import errors

H100, L4, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA L4", "NVIDIA A100-SXM4-80GB"
CONFIG = """
cluster = "c"
[[tenants]]
name = "vision"
namespaces = ["vision"]
weight = 2
quota = { H100 = 4, "*" = 6 }
[[tenants]]
name = "nlp"
namespaces = ["nlp", "nlp-batch"]
quota = { A100 = 8 }
"""


@pytest.fixture
def lake(store, tmp_path):
    """Cluster c has H100 and L4 nodes; cluster d has A100 nodes (nlp's A100 key names a model of the lake)."""

    def node(cluster, name, model):
        return dict(
            cluster=cluster,
            node=name,
            gpu_model=model,
            gpu_count=8,
            first_seen=epoch_us(at(1)),
            last_seen=epoch_us(at(2)),
            source="t",
        )

    local = tmp_path / "local"
    write_rows(local, "nodes", [node("c", "n1", H100), node("c", "n2", L4), node("d", "n3", A100)])
    return str(put_lake(local, store))


@pytest.fixture
def cfg(tmp_path):
    path = tmp_path / "gpuledger.toml"
    path.write_text(CONFIG)
    return path


def test_prints_the_clusters_flavors_and_the_tenants_queues(cli, lake, cfg):
    r = cli("quota", "kueue", "--lake", lake, "--config", cfg, "--at", "2026-12-01T00:00:00Z")
    assert r.exit_code == 0, r.output
    assert r.output.startswith("# gpuledger quota kueue: cluster c, grants as of 2026-12-01T00:00:00Z\n---\n")
    objs = list(yaml.safe_load_all(r.output))
    # Only cluster c's models make flavors (d's A100 is another cluster's).
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [
        ("ResourceFlavor", "nvidia-h100-80gb-hbm3"),
        ("ResourceFlavor", "nvidia-l4"),
        ("ClusterQueue", "gpuledger-vision"),
        ("ClusterQueue", "gpuledger-nlp"),
        ("LocalQueue", "gpuledger"),
        ("LocalQueue", "gpuledger"),
        ("LocalQueue", "gpuledger"),
    ]
    for o in objs:
        assert errors(o) == [], o
    gpu = {
        o["metadata"]["name"]: [
            (f["name"], f["resources"][0]["nominalQuota"], f["resources"][0].get("borrowingLimit"))
            for f in o["spec"]["resourceGroups"][0]["flavors"]
        ]
        for o in objs
        if o["kind"] == "ClusterQueue"
    }
    # vision: H100 min(4, 6) = 4; L4 under "*" = 6. nlp: only an A100 quota, absent here: H100 and L4 uncapped.
    assert gpu == {
        "gpuledger-vision": [("nvidia-h100-80gb-hbm3", 4, 0), ("nvidia-l4", 6, 0)],
        "gpuledger-nlp": [("nvidia-h100-80gb-hbm3", 0, None), ("nvidia-l4", 0, None)],
    }


def test_grants_come_from_quota_requests(cli, lake, cfg, monkeypatch):
    """An approved request (gpuledger quota request / approve) is in the queues while it is active, and only then."""
    monkeypatch.setenv("GPULEDGER_USER", "ana")
    r = cli(
        "quota", "request", "--lake", lake, "--config", cfg, "--tenant", "vision", "--model", "L4", "--gpus", "3",
        "--from", "2027-01-01", "--until", "2027-01-10", "--reason", "paper deadline",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    request_id = next(w for w in r.output.split() if w.startswith("q-"))
    r = cli("quota", "approve", request_id, "--lake", lake, "--config", cfg, "--by", "bo")
    assert r.exit_code == 0, r.output

    def vision_queue(at):
        r = cli("quota", "kueue", "--lake", lake, "--config", cfg, "--at", at, "--tenant", "vision")
        assert r.exit_code == 0, r.output
        (cq,) = [o for o in yaml.safe_load_all(r.output) if o["kind"] == "ClusterQueue"]
        quotas = [f["resources"][0]["nominalQuota"] for f in cq["spec"]["resourceGroups"][0]["flavors"]]
        return quotas, cq["metadata"]["annotations"]["gpuledger.io/all-models-quota-gpus"]

    # Active: L4 has no key of its own, so its quota is "*" 6 + the grant's 3 = 9, and so is the all-models total;
    # H100 keeps its own 4 (min(4, 9)). Before and after the grant: 6 and 4.
    assert vision_queue("2027-01-05T00:00:00Z") == ([4, 9], "9")
    assert vision_queue("2026-12-31T00:00:00Z") == ([4, 6], "6")
    assert vision_queue("2027-01-11T00:00:00Z") == ([4, 6], "6")


def test_out_writes_the_file_and_options_apply(cli, lake, cfg, tmp_path):
    out = tmp_path / "kueue.yaml"
    r = cli(
        "quota",
        "kueue",
        "--lake",
        lake,
        "--config",
        cfg,
        "--out",
        out,
        "--api-version",
        "v1beta1",
        "--cohort",
        "",
        "--local-queue",
        "",
        "--model",
        "Tesla T4",
        "--node-label",
        f"{L4}=NVIDIA-L4-SHARED",
    )
    assert r.exit_code == 0, r.output
    assert "wrote 3 ResourceFlavor(s), 2 ClusterQueue(s) and 0 LocalQueue(s) to" in r.output
    objs = list(yaml.safe_load_all(out.read_text()))
    assert {o["apiVersion"] for o in objs} == {"kueue.x-k8s.io/v1beta1"}
    labels = {o["metadata"]["name"]: o["spec"]["nodeLabels"] for o in objs if o["kind"] == "ResourceFlavor"}
    assert labels == {
        "nvidia-h100-80gb-hbm3": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "nvidia-l4": {"nvidia.com/gpu.product": "NVIDIA-L4-SHARED"},
        "tesla-t4": {"nvidia.com/gpu.product": "Tesla-T4"},
    }
    assert all("cohort" not in o["spec"] for o in objs if o["kind"] == "ClusterQueue")
    for o in objs:
        assert errors(o) == [], o


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--tenant", "nope"), "usage error: --tenant nope: no such tenant in the config (tenants: vision, nlp)"),
        (("--node-label", "H100"), "usage error: --node-label 'H100': expected MODEL=VALUE"),
        (("--at", "yesterday"), "usage error: --at 'yesterday' is not an ISO-8601 time"),
        (("--cohort", "Big Cohort"), "usage error: cohort 'Big Cohort': not a Kubernetes name"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(cli, lake, cfg, tmp_path, args, message):
    out = tmp_path / "kueue.yaml"
    r = cli("quota", "kueue", "--lake", lake, "--config", cfg, "--out", out, *args)
    assert r.exit_code == 1, r.output
    assert r.output.startswith(f"Error: {message}") and r.output.count("\n") == 1, r.output
    assert not out.exists()


def test_a_cluster_the_lake_does_not_know_is_one_line(cli, lake, tmp_path):
    cfg = tmp_path / "other.toml"
    cfg.write_text(CONFIG.replace('cluster = "c"', 'cluster = "e"'))
    r = cli("quota", "kueue", "--lake", lake, "--config", cfg)
    assert r.exit_code == 1 and r.output.count("\n") == 1, r.output
    assert "the lake has no GPU model of cluster 'e' (its clusters: c, d)" in r.output


def test_a_quota_key_naming_no_model_is_a_config_error(cli, lake, tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(CONFIG.replace("A100 = 8", "B200 = 8"))
    r = cli("quota", "kueue", "--lake", lake, "--config", cfg)
    assert r.exit_code == 1 and "tenants[1] (nlp).quota.B200: names no GPU model in the lake" in r.output
    assert "Traceback" not in r.output


MIXED_CONFIG = """
cluster = "mixed"
[[tenants]]
name = "vision"
namespaces = ["vision"]
quota = { H100 = 4, MI300X = 2, "*" = 3 }
[[tenants]]
name = "nlp"
namespaces = ["nlp"]
quota = { 910B3 = 2.5 }
"""


def test_a_mixed_fleet_lake_makes_a_flavor_per_model_on_the_nodes_labels(cli, store, tmp_path):
    """`gpuledger simulate --models H100,MI300X,Ascend910B` (one node per model): each flavor selects the nodes by the
    very label the lake recorded on them, and each vendor's devices are quota'd under its device plugin's resource."""
    cfg = tmp_path / "mixed.toml"
    cfg.write_text(MIXED_CONFIG)
    lake = str(store)
    r = cli(
        "simulate", "--lake", lake, "--config", cfg, "--nodes", 3, "--gpus-per-node", 2, "--days", 0.1,
        "--step-s", 600, "--seed", 3, "--models", "H100,MI300X,Ascend910B", "--end", "2026-11-02T00:00:00Z",
        "--workers", 1,
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    r = cli("quota", "kueue", "--lake", lake, "--config", cfg, "--at", "2026-11-02T00:00:00Z")
    assert r.exit_code == 0, r.output
    objs = list(yaml.safe_load_all(r.output))
    for o in objs:
        assert errors(o) == [], o
    flavors = {o["metadata"]["annotations"]["gpuledger.io/gpu-model"]: o for o in objs if o["kind"] == "ResourceFlavor"}
    assert {m: (f["metadata"]["name"], f["spec"]["nodeLabels"]) for m, f in flavors.items()} == {
        "910B3-Ascend-V1": ("910b3-ascend-v1", {"node.kubernetes.io/npu.chip.name": "910B3"}),
        "AMD Instinct MI300X OAM": ("amd-instinct-mi300x-oam", {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"}),
        "NVIDIA H100 80GB HBM3": ("nvidia-h100-80gb-hbm3", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
    }
    # The flavor's label is one the lake's nodes of that model carry (the simulator labels its nodes as each
    # vendor's node labeller does), and no node of another model.
    r = cli("sql", "--lake", lake, "--format", "json", "SELECT DISTINCT gpu_model, labels FROM nodes")
    assert r.exit_code == 0, r.output
    nodes = [(row["gpu_model"], {kv["key"]: kv["value"] for kv in row["labels"]}) for row in json.loads(r.output)]
    assert sorted(m for m, _ in nodes) == sorted(flavors)
    for model, flavor in flavors.items():
        ((key, value),) = flavor["spec"]["nodeLabels"].items()
        assert [m for m, labels in nodes if labels.get(key) == value] == [model]
    quotas = {
        o["metadata"]["name"]: [
            (g["coveredResources"], [(f["name"], f["resources"][0]["nominalQuota"]) for f in g["flavors"]])
            for g in o["spec"]["resourceGroups"]
        ]
        for o in objs
        if o["kind"] == "ClusterQueue"
    }
    # vision: H100 min(4, 3) = 3, MI300X min(2, 3) = 2, 910B3 under "*" = 3. nlp: 910B3 2.5 -> 2 whole chips;
    # H100 and MI300X uncapped (0 of its own).
    assert quotas == {
        "gpuledger-vision": [
            (["amd.com/gpu"], [("amd-instinct-mi300x-oam", 2)]),
            (["huawei.com/Ascend910"], [("910b3-ascend-v1", 3)]),
            (["nvidia.com/gpu"], [("nvidia-h100-80gb-hbm3", 3)]),
        ],
        "gpuledger-nlp": [
            (["amd.com/gpu"], [("amd-instinct-mi300x-oam", 0)]),
            (["huawei.com/Ascend910"], [("910b3-ascend-v1", 2)]),
            (["nvidia.com/gpu"], [("nvidia-h100-80gb-hbm3", 0)]),
        ],
    }

    # The MI300X nodes in CPX mode, under the ROCm plugin's mixed naming: amd.com/cpx_nps4 covered beside amd.com/gpu,
    # 8 partitions a GPU: vision's MI300X 2 GPUs -> 16 CPX partitions; nlp uncapped there -> 0
    r = cli(
        "quota", "kueue", "--lake", lake, "--config", cfg, "--at", "2026-11-02T00:00:00Z",
        "--partition-resource", "amd.com/cpx_nps4",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    cqs = [o for o in yaml.safe_load_all(r.output) if o["kind"] == "ClusterQueue"]
    for o in cqs:
        assert errors(o) == [], o
    amd = {
        o["metadata"]["name"]: [
            (g["coveredResources"], [(x["name"], x["nominalQuota"]) for x in g["flavors"][0]["resources"]])
            for g in o["spec"]["resourceGroups"]
        ][0]
        for o in cqs
    }
    cover = ["amd.com/gpu", "amd.com/cpx_nps4"]
    assert amd == {
        "gpuledger-vision": (cover, [("amd.com/gpu", 2), ("amd.com/cpx_nps4", 16)]),
        "gpuledger-nlp": (cover, [("amd.com/gpu", 0), ("amd.com/cpx_nps4", 0)]),
    }
    r = cli("quota", "kueue", "--lake", lake, "--config", cfg, "--partition-resource", "huawei.com/Ascend310P-2c")
    assert r.exit_code == 1 and r.output.count("\n") == 1 and "no GPU model here" in r.output, r.output
