"""The webhook reads the AMD and Ascend device plugins' resource names as GPU asks (quota, budget and fair share
count them), and admits an accelerator-like resource nothing maps with a warning naming it. Objects are DERIVED
from the real kubewarden Pod CREATE (tests/fixtures/admission): its first container's limits and node selector
replaced, as each test says. Shares are worked out by hand in the comments."""

import copy
import datetime as dt
import json

import pytest

from gpuledger.config import AcceleratorResource, Config, Tenant
from gpuledger.enforcer.decide import Recent, Settings, Table, decide
from gpuledger.enforcer.policies import TenantRow
from gpuledger.enforcer.review import parse
from gpuledger.enforcer.workload import ask

from conftest import REPO

NOW = dt.datetime(2026, 11, 2, 12, tzinfo=dt.timezone.utc)
RAW = json.loads((REPO / "tests" / "fixtures" / "admission" / "kubewarden_loadtesting_pod_create_v1.json").read_text())

MI300X = "AMD_Instinct_MI300X_OAM"  # the AMD GPU Operator node labeller's spelling
LAKE_MI300X = "AMD Instinct MI300X OAM"  # the exporter's card_series, as the lake has it


def pod(limits, selector=None, namespace="vision-train"):
    doc = copy.deepcopy(RAW)
    req = doc["request"]
    req["namespace"] = namespace
    spec = req["object"]["spec"]
    spec["containers"][0]["resources"] = {"limits": dict(limits)}
    spec["nodeSelector"] = dict(selector or {})
    return doc


def review(limits, selector=None):
    return parse(json.dumps(pod(limits, selector)).encode())


def table(model=LAKE_MI300X, allocated=6, quota=8):
    # vision holds 6 of its 8 MI300X; 20 GPUs in all, no total cap; a budget far from spent
    rows = {
        ("vision", model): TenantRow(tenant="vision", gpu_model=model, allocated_gpus=allocated, quota_gpus=quota),
        ("vision", None): TenantRow(
            tenant="vision", gpu_model=None, allocated_gpus=20, quota_gpus=None, budget_usd=1e6, spent_usd=0
        ),
    }
    return Table(rows, NOW, {})


def settings(accelerators=()):
    cfg = Config(tenants=(Tenant("vision", ("vision-train",)),), accelerators=accelerators)
    return Settings.of(cfg)


def test_amd_and_ascend_names_are_asks():
    spec = pod({"amd.com/gpu": "2"}, {"amd.com/gpu.product-name": MI300X})["request"]["object"]
    a = ask("Pod", spec)
    assert (a.gpus, a.gpu_share, a.model) == (2, 2.0, MI300X)
    a = ask("Pod", pod({"huawei.com/Ascend910": "8"})["request"]["object"])
    assert (a.gpus, a.gpu_share, a.model) == (8, 8.0, None)
    # 4 CPX partitions of an MI300X = 4 x 1/8 = half a GPU
    a = ask("Pod", pod({"amd.com/cpx_nps4": "4"})["request"]["object"])
    assert (a.gpus, a.mig) == (0, {"cpx.nps4": 4}) and a.gpu_share == pytest.approx(0.5) and a.asks_gpus
    # a Job of 3 pods, each one 310P vNPU of 2 of its 8 AI cores: 3 x 2/8 = 0.75 of a chip
    spec = pod({"huawei.com/Ascend310P-2c": "1"})["request"]["object"]["spec"]
    a = ask("Job", {"spec": {"parallelism": 3, "template": {"spec": spec}}})
    assert a.mig == {"Ascend310P-2c": 3} and a.gpu_share == pytest.approx(0.75)


def test_amd_gpus_count_against_the_mi300x_quota():
    # 6 held + 2 asked = 8 of 8: admitted; 6 + 3 = 9 > 8: denied, naming the model as the pod spells it
    s, sel = settings(), {"amd.com/gpu.product-name": MI300X}
    assert decide(review({"amd.com/gpu": "2"}, sel), table(), s, Recent(30), NOW).decision == "allow"
    o = decide(review({"amd.com/gpu": "3"}, sel), table(), s, Recent(30), NOW)
    assert o.decision == "deny" and o.gpus == 3
    # the lake's spelling of the model (the table's row), found from the node label's
    assert o.reason == f"tenant vision uses 6 of 8 {LAKE_MI300X} GPUs; this Pod asks 3 (quota exceeded by 1)"
    # 24 CPX partitions = 3 GPUs: the same answer as 3 whole ones
    o = decide(review({"amd.com/cpx_nps4": "24"}, sel), table(), s, Recent(30), NOW)
    assert o.decision == "deny" and o.gpus == pytest.approx(3.0)


def test_an_unmapped_accelerator_is_admitted_with_a_warning_naming_it():
    o = decide(review({"acme.com/npu": "2"}), table(), settings(), Recent(30), NOW)
    r = o.response["response"]
    assert o.decision == "warn" and r["allowed"] is True and o.gpus == 0  # counted nowhere
    # kubectl shows warnings of up to 120 characters: the message is wrapped, continuations start with "… "
    text = " ".join(w.removeprefix("… ") for w in r["warnings"])
    assert text == (
        "Pod vision-train/nginx asks for acme.com/npu, which looks like an accelerator but no [[accelerators]] "
        "row in gpuledger's config maps it: not counted in any quota or budget"
    )
    assert o.reason == text
    assert (
        not decide(review({"acme.com/npu": "2"}), table(), settings(), Recent(30), NOW, mutate=True)
        .response["response"]
        .get("warnings")
    )  # /mutate says nothing: /validate said it


def test_beside_a_quota_breach_the_warning_joins_the_denial():
    sel = {"amd.com/gpu.product-name": MI300X}
    o = decide(review({"amd.com/gpu": "3", "example.com/gpu-x": "1"}, sel), table(), settings(), Recent(30), NOW)
    r = o.response["response"]
    assert o.decision == "deny" and r["allowed"] is False and "quota exceeded by 1" in r["status"]["message"]
    assert "example.com/gpu-x" in r["warnings"][0]


def test_a_config_row_maps_it_with_a_model_and_a_share():
    # acme.com/npu mapped as a quarter of an MI300X: 8 units = 2 GPUs; 6 + 2 = 8 of 8 admitted, 12 units (3) not
    row = AcceleratorResource("acme.com/npu", "amd", share=0.25, gpu_model=LAKE_MI300X, profile="quarter")
    s = settings((row,))
    o = decide(review({"acme.com/npu": "8"}), table(), s, Recent(30), NOW)
    assert o.decision == "allow" and o.gpus == pytest.approx(2.0) and o.gpu_model == LAKE_MI300X
    o = decide(review({"acme.com/npu": "12"}), table(), s, Recent(30), NOW)
    assert o.decision == "deny" and o.gpus == pytest.approx(3.0)
