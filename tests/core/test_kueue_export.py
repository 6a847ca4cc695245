"""`kueue_objects`: the tenants' quotas, grants included, as Kueue objects, every number computed by hand here."""

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
import yaml

from gpuledger.analytics.decisions import decisions
from gpuledger.config import Config, EnforcerConfig, Tenant
from gpuledger.errors import UsageError
from gpuledger.kueue_export import KueueOptions, kueue_objects, nominal_gpus, product_label, tenant_caps

A100, H100, L4 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA L4"
MODELS = [A100, H100, L4]
# The lake's names of an AMD and two Ascend models: AMD's card_series, the npu-exporter's model_name
MI300X, B3, P3 = "AMD Instinct MI300X OAM", "910B3-Ascend-V1", "310P3-Ascend-V1"
MIXED = [H100, MI300X, B3, P3, L4]
AT = dt.datetime(2026, 12, 1, 12, tzinfo=dt.timezone.utc)
K8S = Path(__file__).resolve().parents[1] / "fixtures" / "k8s"


def day(d: int, h: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11 if d > 15 else 12, d, h, tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class G:
    """A grant as gpuledger.quota_requests hands them over (kueue_export.Grant)."""

    tenant: str
    gpu_model: str
    gpus: float
    valid_from: dt.datetime
    valid_until: dt.datetime


TENANTS = (
    Tenant("vision", ("vision-train", "vision-dev"), 3.0, {"H100": 40, "*": 64}),
    Tenant("nlp", ("nlp",), 1.5, {"*": 96}),
    Tenant("research", ("research",), 1.0, {"A100": 8, "L4": 2.5}),
    Tenant("platform", (), 1.0, {"*": 16}),
)
GRANTS = [
    G("vision", "H100", 8, day(30), day(5)),  # active: 11-30 .. 12-05
    G("vision", "*", 4, day(1), day(2)),  # active: 12-01 00:00 .. 12-02
    G("nlp", "*", 32, day(20), day(1, 12)),  # ended exactly at AT: the end is excluded
    G("research", A100, 2, day(1), day(3)),  # active, names the model by its full name
    G("research", "H100", 4, day(1), day(3)),  # active, but research has no H100 quota: uncapped stays uncapped
    G("platform", "*", 16, day(2), day(9)),  # not yet
]


def config(quota_mode="enforce", tenant_label="gpuledger.io/tenant") -> Config:
    return Config(tenants=TENANTS, enforcer=EnforcerConfig(quota_mode=quota_mode, tenant_label=tenant_label))


def by_kind(objs, kind):
    return {o["metadata"].get("namespace", "") + "/" + o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


def quotas(cq) -> dict[str, tuple]:
    """flavor -> (nominalQuota, borrowingLimit or None)."""
    (group,) = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["nvidia.com/gpu"]
    out = {}
    for f in group["flavors"]:
        (r,) = f["resources"]
        assert r["name"] == "nvidia.com/gpu"
        out[f["name"]] = (r["nominalQuota"], r.get("borrowingLimit"))
    return out


def test_quotas_and_grants_by_hand():
    objs = kueue_objects(config(), MODELS, GRANTS, AT)
    flavors = by_kind(objs, "ResourceFlavor")
    assert {k: (v["spec"]["nodeLabels"], v["metadata"]["annotations"]) for k, v in flavors.items()} == {
        "/nvidia-a100-sxm4-80gb": (
            {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
            {"gpuledger.io/gpu-model": A100},
        ),
        "/nvidia-h100-80gb-hbm3": (
            {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            {"gpuledger.io/gpu-model": H100},
        ),
        "/nvidia-l4": ({"nvidia.com/gpu.product": "NVIDIA-L4"}, {"gpuledger.io/gpu-model": L4}),
    }
    cqs = by_kind(objs, "ClusterQueue")
    assert list(cqs) == ["/gpuledger-vision", "/gpuledger-nlp", "/gpuledger-research", "/gpuledger-platform"]

    # vision: H100 has its own key (40), the rest fall under "*" (64). Active grants: +8 H100, +4 "*".
    #   all-models cap = 64 + 8 + 4 = 76
    #   H100 = 40 + 8 = 48 (a "*" grant does not raise a model with its own key); min(48, 76) = 48
    #   A100 = L4 = 64 + 4 = 68 (under "*": the "*" grant raises them); min(68, 76) = 68
    # quota_mode enforce: no borrowing past a quota the webhook enforces -> borrowingLimit 0.
    v = cqs["/gpuledger-vision"]
    assert quotas(v) == {"nvidia-a100-sxm4-80gb": (68, 0), "nvidia-h100-80gb-hbm3": (48, 0), "nvidia-l4": (68, 0)}
    assert v["metadata"]["annotations"] == {
        "gpuledger.io/tenant": "vision",
        "gpuledger.io/all-models-quota-gpus": "76",
        "gpuledger.io/grants": "+4 * until 2026-12-02T00:00:00Z; +8 H100 until 2026-12-05T00:00:00Z",
    }
    assert v["spec"]["namespaceSelector"] == {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["vision-dev", "vision-train"]}
        ]
    }
    assert (v["spec"]["cohortName"], v["spec"]["fairSharing"]) == ("gpuledger", {"weight": 3})

    # nlp: "*" 96 on every flavor; its grant ended at AT exactly (end excluded); weight 1.5 as the quantity "1.5".
    n = cqs["/gpuledger-nlp"]
    assert quotas(n) == {"nvidia-a100-sxm4-80gb": (96, 0), "nvidia-h100-80gb-hbm3": (96, 0), "nvidia-l4": (96, 0)}
    assert n["metadata"]["annotations"] == {"gpuledger.io/tenant": "nlp", "gpuledger.io/all-models-quota-gpus": "96"}
    assert n["spec"]["fairSharing"] == {"weight": "1.5"}

    # research: no "*". A100 = 8 + 2 (grant) = 10; L4 = 2.5 -> 2 whole GPUs; H100: no quota names it (the H100
    # grant cannot raise what has no limit) -> nominal 0 and no borrowingLimit: it may borrow from the cohort.
    r = cqs["/gpuledger-research"]
    assert quotas(r) == {
        "nvidia-a100-sxm4-80gb": (10, 0),
        "nvidia-h100-80gb-hbm3": (0, None),
        "nvidia-l4": (2, 0),
    }
    assert "gpuledger.io/all-models-quota-gpus" not in r["metadata"]["annotations"]

    # platform: "*" 16 (its grant starts tomorrow); no namespaces in the config, so the namespaces labelled
    # gpuledger.io/tenant=platform that the config does not give to another tenant.
    p = cqs["/gpuledger-platform"]
    assert quotas(p) == {"nvidia-a100-sxm4-80gb": (16, 0), "nvidia-h100-80gb-hbm3": (16, 0), "nvidia-l4": (16, 0)}
    assert p["spec"]["namespaceSelector"] == {
        "matchLabels": {"gpuledger.io/tenant": "platform"},
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["nlp", "research", "vision-dev", "vision-train"],
            }
        ],
    }

    # One LocalQueue per namespace named in the config, pointing at its tenant's ClusterQueue.
    lqs = {k: v["spec"]["clusterQueue"] for k, v in by_kind(objs, "LocalQueue").items()}
    assert lqs == {
        "vision-dev/gpuledger": "gpuledger-vision",
        "vision-train/gpuledger": "gpuledger-vision",
        "nlp/gpuledger": "gpuledger-nlp",
        "research/gpuledger": "gpuledger-research",
    }


def test_borrowing_follows_the_webhook_unless_told():
    # The webhook only warns: tenants may borrow past their quota within the cohort (no borrowingLimit anywhere).
    warn = by_kind(kueue_objects(config("warn"), MODELS, [], AT), "ClusterQueue")["/gpuledger-nlp"]
    assert quotas(warn) == {
        "nvidia-a100-sxm4-80gb": (96, None),
        "nvidia-h100-80gb-hbm3": (96, None),
        "nvidia-l4": (96, None),
    }
    # --no-borrow under warn, --borrow under enforce.
    no = by_kind(kueue_objects(config("warn"), MODELS, [], AT, KueueOptions(borrow=False)), "ClusterQueue")
    assert {q[1] for q in quotas(no["/gpuledger-nlp"]).values()} == {0}
    yes = by_kind(kueue_objects(config(), MODELS, [], AT, KueueOptions(borrow=True)), "ClusterQueue")
    assert {q[1] for q in quotas(yes["/gpuledger-nlp"]).values()} == {None}
    # No cohort: Kueue refuses a borrowingLimit, and there is no one to borrow from.
    alone = by_kind(kueue_objects(config(), MODELS, [], AT, KueueOptions(cohort=None)), "ClusterQueue")
    assert "cohortName" not in alone["/gpuledger-nlp"]["spec"]
    assert {q[1] for q in quotas(alone["/gpuledger-nlp"]).values()} == {None}
    # v1beta1 calls the cohort `cohort`.
    old = by_kind(kueue_objects(config(), MODELS, [], AT, KueueOptions(api_version="v1beta1")), "ClusterQueue")
    assert old["/gpuledger-nlp"]["spec"]["cohort"] == "gpuledger" and old["/gpuledger-nlp"]["apiVersion"].endswith(
        "/v1beta1"
    )


def test_options_shape_the_objects():
    o = KueueOptions(
        queue_prefix="gq-",
        local_queue=None,
        tenants=("research",),
        label_key="cloud.google.com/gke-accelerator",
        label_values={L4: "nvidia-l4"},
    )
    objs = kueue_objects(config(), MODELS, [], AT, o)
    assert [(x["kind"], x["metadata"]["name"]) for x in objs] == [
        ("ResourceFlavor", "nvidia-a100-sxm4-80gb"),
        ("ResourceFlavor", "nvidia-h100-80gb-hbm3"),
        ("ResourceFlavor", "nvidia-l4"),
        ("ClusterQueue", "gq-research"),
    ]
    assert objs[2]["spec"]["nodeLabels"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    assert objs[0]["spec"]["nodeLabels"] == {"cloud.google.com/gke-accelerator": "NVIDIA-A100-SXM4-80GB"}
    # No tenant label configured: a tenant without namespaces has none; Kueue's null selector admits none.
    none = by_kind(kueue_objects(config(tenant_label=""), MODELS, [], AT), "ClusterQueue")["/gpuledger-platform"]
    assert "namespaceSelector" not in none["spec"]


@pytest.mark.parametrize(
    ("node_file", "nvml_name"),
    [
        # NVML names as nvidia-smi prints them for these GPUs; the nodes are GFD-labelled recordings.
        ("node_gce_tesla-t4x2.yaml", "Tesla T4"),
        ("node_gce_a100-sxm4-40gb_mig-mixed_2x1g.5gb+2g.10gb.yaml", "NVIDIA A100-SXM4-40GB"),
    ],
)
def test_the_flavor_label_is_the_one_gpu_feature_discovery_set_on_real_nodes(node_file, nvml_name):
    node = yaml.safe_load((K8S / node_file).read_text())
    assert product_label(nvml_name) == node["metadata"]["labels"]["nvidia.com/gpu.product"]


@pytest.mark.parametrize("models", [MODELS, MIXED], ids=["nvidia", "mixed"])
def test_the_nominal_quotas_are_the_webhooks_caps(models):
    """Without grants each flavor's nominalQuota is the tighter of the webhook's two rows for that tenant and
    model (analytics/decisions.py): the model's own and the all-models one, in whole GPUs; None (nominal 0 and
    free borrowing) where neither caps it."""
    empty = pl.DataFrame(schema={"tenant": pl.String, "gpu_model": pl.String, "share": pl.Float64})
    rows = decisions(
        empty,
        pl.DataFrame(schema={"tenant": pl.String, "usd": pl.Float64, "gpu_h": pl.Float64}),
        pl.DataFrame(schema={"tenant": pl.String, "usage_decayed": pl.Float64}),
        pl.DataFrame(schema={"tenant": pl.String, "gpu_model": pl.String, "idle_gpus": pl.Float64}),
        TENANTS,
        AT,
        models,
    )
    quota = {(r["tenant"], r["gpu_model"]): r["quota_gpus"] for r in rows.iter_rows(named=True)}
    for t in TENANTS:
        caps = tenant_caps(t, models, [], AT)
        for m in models:
            # The webhook checks the model's row (if the table has one) and the all-models row; a missing row or
            # a null quota caps nothing.
            webhook = [q for q in (quota.get((t.name, m)), quota.get((t.name, None))) if q is not None]
            expected = int(min(webhook)) if webhook else None
            assert nominal_gpus(caps, m) == expected, (t.name, m)


@pytest.mark.parametrize(
    ("models", "options", "tenants", "message"),
    [
        (MODELS, KueueOptions(tenants=("nope",)), TENANTS, "--tenant nope: no such tenant"),
        ([L4, "nvidia l4"], KueueOptions(), TENANTS, "make the same ResourceFlavor name 'nvidia-l4'"),
        (["GPU (virtual)"], KueueOptions(), TENANTS, "'GPU-(virtual)' is not a valid node label value"),
        (MODELS, KueueOptions(label_values={"B200": "x"}), TENANTS, "--node-label B200: not a GPU model"),
        (MODELS, KueueOptions(cohort="Team_A"), TENANTS, "cohort 'Team_A': not a Kubernetes name"),
        (MODELS, KueueOptions(label_key="a b"), TENANTS, "--node-label-key 'a b'"),
        ([], KueueOptions(), TENANTS, "no GPU model"),
        (
            [f"GPU {i}" for i in range(65)],
            KueueOptions(),
            TENANTS,
            "65 GPU models of nvidia.com/gpu: a Kueue resource group takes at most 64",
        ),
        # vendor_of reads Atlas as Huawei's, but no device plugin resource says which chip
        (["Huawei Atlas"], KueueOptions(), TENANTS, "'Huawei Atlas': a Huawei model naming no Ascend chip"),
        (MODELS, KueueOptions(), (Tenant("Team A"), Tenant("team-a")), "same ClusterQueue name 'gpuledger-team-a'"),
        (MODELS, KueueOptions(), (Tenant("a", ("Research",)),), "namespace of tenant 'a' 'Research'"),
    ],
)
def test_bad_input_is_one_line(models, options, tenants, message):
    with pytest.raises(UsageError) as e:
        kueue_objects(Config(tenants=tenants), models, [], AT, options)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_naive_grant_times_are_utc():
    # 2026-12-01 00:00 .. 12-02 00:00 without a zone is UTC: active at AT (12:00 UTC); vision's L4 = 64 + 4 = 68.
    naive = G("vision", "*", 4, dt.datetime(2026, 12, 1), dt.datetime(2026, 12, 2))
    assert nominal_gpus(tenant_caps(TENANTS[0], MODELS, [naive], AT), L4) == 68


def test_a_mixed_fleet_has_a_flavor_per_model_and_a_resource_group_per_device_plugin_resource():
    """H100 and L4 (NVIDIA), MI300X (AMD), 910B3 and 310P3 (Huawei Ascend): each model's flavor selects its nodes by
    its vendor's node label, and each is covered under the resource its vendor's device plugin asks a whole device
    by, one resource group per resource (Kueue: a resource in one group, a flavor in one group)."""
    tenants = (
        Tenant("vision", ("vision",), 1.0, {"H100": 8, "*": 12}),
        Tenant("nlp", ("nlp",), 1.0, {"MI300X": 16, "910B3": 6.5}),
    )
    grants = [G("nlp", "910B3", 2, day(1), day(3))]  # active at AT
    objs = kueue_objects(Config(tenants=tenants), MIXED, grants, AT)
    flavors = [(o["metadata"]["name"], o["spec"]["nodeLabels"]) for o in objs if o["kind"] == "ResourceFlavor"]
    # In the models' name order (digits before letters).
    assert flavors == [
        ("310p3-ascend-v1", {"node.kubernetes.io/npu.chip.name": "310P3"}),
        ("910b3-ascend-v1", {"node.kubernetes.io/npu.chip.name": "910B3"}),
        ("amd-instinct-mi300x-oam", {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"}),
        ("nvidia-h100-80gb-hbm3", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
        ("nvidia-l4", {"nvidia.com/gpu.product": "NVIDIA-L4"}),
    ]
    cqs = by_kind(objs, "ClusterQueue")

    def groups(cq):
        return [
            (
                g["coveredResources"],
                [(f["name"], [(r["name"], r["nominalQuota"], r.get("borrowingLimit")) for r in f["resources"]])
                 for f in g["flavors"]],
            )
            for g in cq["spec"]["resourceGroups"]
        ]  # fmt: skip

    # vision: H100 its own 8 (min(8, 12)); every other model, of any vendor, the "*" 12. enforce: borrowingLimit 0.
    assert groups(cqs["/gpuledger-vision"]) == [
        (["amd.com/gpu"], [("amd-instinct-mi300x-oam", [("amd.com/gpu", 12, 0)])]),
        (["huawei.com/Ascend310P"], [("310p3-ascend-v1", [("huawei.com/Ascend310P", 12, 0)])]),
        (["huawei.com/Ascend910"], [("910b3-ascend-v1", [("huawei.com/Ascend910", 12, 0)])]),
        (
            ["nvidia.com/gpu"],
            [("nvidia-h100-80gb-hbm3", [("nvidia.com/gpu", 8, 0)]), ("nvidia-l4", [("nvidia.com/gpu", 12, 0)])],
        ),
    ]
    # nlp: MI300X 16; 910B3 6.5 + the grant's 2 = 8.5 -> 8 whole chips; 310P3, H100, L4: no quota names them and
    # no "*" -> uncapped: nominal 0, no borrowingLimit.
    assert groups(cqs["/gpuledger-nlp"]) == [
        (["amd.com/gpu"], [("amd-instinct-mi300x-oam", [("amd.com/gpu", 16, 0)])]),
        (["huawei.com/Ascend310P"], [("310p3-ascend-v1", [("huawei.com/Ascend310P", 0, None)])]),
        (["huawei.com/Ascend910"], [("910b3-ascend-v1", [("huawei.com/Ascend910", 8, 0)])]),
        (
            ["nvidia.com/gpu"],
            [("nvidia-h100-80gb-hbm3", [("nvidia.com/gpu", 0, None)]), ("nvidia-l4", [("nvidia.com/gpu", 0, None)])],
        ),
    ]
    assert cqs["/gpuledger-nlp"]["metadata"]["annotations"]["gpuledger.io/grants"] == (
        "+2 910B3 until 2026-12-03T00:00:00Z"
    )
    # --node-label-key puts every vendor's flavor on the one key (a cloud's own label); values stay the vendors'.
    one_key = kueue_objects(Config(tenants=tenants), MIXED, [], AT, KueueOptions(label_key="example.com/gpu"))
    values = ("310P3", "910B3", "AMD_Instinct_MI300X_OAM", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L4")
    assert [o["spec"]["nodeLabels"] for o in one_key if o["kind"] == "ResourceFlavor"] == [
        {"example.com/gpu": v} for v in values
    ]


def test_partition_resources_are_covered_in_their_vendors_group_by_their_share_of_each_model():
    """--partition-resource: MIG profiles in the NVIDIA group, AMD's CPX in the AMD group, 310P vNPU templates in the
    Ascend310P group; each flavor of a group lists every resource it covers (Kueue's rule), with the tenant's cap of
    that model in units of the partition's share of it (gpuledger.partitions: MIG g/7, CPX 1/XCDs of the model, a
    vNPU its AI cores over the chip's), so that Kueue admits of each resource alone what the webhook would."""
    mi300a = "AMD Instinct MI300A"
    models = [H100, L4, MI300X, mi300a, P3, B3]
    parts = (
        "nvidia.com/mig-3g.40gb",
        "nvidia.com/mig-1g.10gb",
        "amd.com/cpx_nps4",
        "huawei.com/Ascend310P-4c.3cpu",  # vir04_3c: 4 AI cores (and 3 AI CPUs) of the 310P's 8
        "huawei.com/Ascend310P-2c",  # vir02
    )
    tenants = (
        Tenant("vision", ("vision",), 1.0, {"H100": 3, "*": 4}),
        Tenant("nlp", ("nlp",), 1.0, {"MI300X": 2, "MI300A": 1.5, "310P3": 2.5}),
    )
    objs = kueue_objects(Config(tenants=tenants), models, [], AT, KueueOptions(partition_resources=parts))
    cqs = by_kind(objs, "ClusterQueue")

    def groups(cq):
        return [
            (g["coveredResources"], {f["name"]: [r["nominalQuota"] for r in f["resources"]] for f in g["flavors"]})
            for g in cq["spec"]["resourceGroups"]
        ]

    amd = ["amd.com/gpu", "amd.com/cpx_nps4"]
    p310 = ["huawei.com/Ascend310P", "huawei.com/Ascend310P-2c", "huawei.com/Ascend310P-4c.3cpu"]
    nv = ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"]
    # vision: H100 min(3, 4) = 3 -> 3 GPUs, 3 / (1/7) = 21 1g, 3 / (3/7) = 7 3g; every other model "*" 4:
    #   L4: 4, 28 1g, 4 / (3/7) = 9.33 -> 9 3g (an L4 has no MIG: no node offers the resource, the quota is moot);
    #   MI300A: 4, 4 x 6 XCDs = 24 CPX; MI300X: 4, 4 x 8 = 32 CPX;
    #   310P3: 4, 4 / (2/8) = 16 2c, 4 / (4/8) = 8 4c.3cpu; 910B3: 4 (no partition of Ascend910 named).
    assert groups(cqs["/gpuledger-vision"]) == [
        (amd, {"amd-instinct-mi300a": [4, 24], "amd-instinct-mi300x-oam": [4, 32]}),
        (p310, {"310p3-ascend-v1": [4, 16, 8]}),
        (["huawei.com/Ascend910"], {"910b3-ascend-v1": [4]}),
        (nv, {"nvidia-h100-80gb-hbm3": [3, 21, 7], "nvidia-l4": [4, 28, 9]}),
    ]
    # nlp: MI300A 1.5 -> 1 GPU, 1.5 x 6 = 9 CPX; MI300X 2 -> 2, 16; 310P3 2.5 -> 2, 10 2c, 5 4c.3cpu; the others
    # uncapped: 0 of every resource, no borrowingLimit.
    nlp = cqs["/gpuledger-nlp"]
    assert groups(nlp) == [
        (amd, {"amd-instinct-mi300a": [1, 9], "amd-instinct-mi300x-oam": [2, 16]}),
        (p310, {"310p3-ascend-v1": [2, 10, 5]}),
        (["huawei.com/Ascend910"], {"910b3-ascend-v1": [0]}),
        (nv, {"nvidia-h100-80gb-hbm3": [0, 0, 0], "nvidia-l4": [0, 0, 0]}),
    ]
    limits = {
        f["name"]: {r.get("borrowingLimit") for r in f["resources"]}
        for g in nlp["spec"]["resourceGroups"]
        for f in g["flavors"]
    }
    assert limits["nvidia-h100-80gb-hbm3"] == {None} and limits["amd-instinct-mi300x-oam"] == {0}


@pytest.mark.parametrize(
    ("parts", "message"),
    [
        (("nvidia.com/gpu",), "--partition-resource nvidia.com/gpu: not a partition resource of a device plugin"),
        (("example.com/fpga",), "--partition-resource example.com/fpga: not a partition resource"),
        # no Ascend910 model among MODELS (A100, H100, L4)
        (("huawei.com/Ascend910-4c",), "no GPU model here is one whose devices a pod asks by huawei.com/Ascend910"),
    ],
)
def test_a_partition_resource_that_is_none_or_of_no_model_here_is_one_line(parts, message):
    with pytest.raises(UsageError) as e:
        kueue_objects(Config(tenants=TENANTS), MODELS, [], AT, KueueOptions(partition_resources=parts))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_an_atlas_a2_template_is_quota_d_by_the_910b3_s_own_cores():
    # A 910B template names its memory too (npu-smi's vir05_1c_16g): 5 of a 910B3's 20 AI cores, a quarter of the
    # chip, not 5 of a 910's 32 as the plugin's name alone would read. Tenant "nlp" may use 96 of any model
    # (TENANTS): 96 chips, 96 / (5/20) = 384 vNPUs of the template.
    o = KueueOptions(partition_resources=("huawei.com/Ascend910-5c.1cpu.16g",))
    cqs = by_kind(kueue_objects(Config(tenants=TENANTS), [B3], [], AT, o), "ClusterQueue")
    (group,) = cqs["/gpuledger-nlp"]["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["huawei.com/Ascend910", "huawei.com/Ascend910-5c.1cpu.16g"]
    assert [r["nominalQuota"] for r in group["flavors"][0]["resources"]] == [96, 384]
