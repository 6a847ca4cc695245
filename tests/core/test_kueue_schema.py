"""Every object `gpuledger quota kueue` prints is one Kueue's own CRD schemas accept (tests/kueue_crds.py), and the
validator is shown to accept Kueue objects written by others and to refuse broken ones."""

import copy
import datetime as dt
from dataclasses import dataclass

import pytest
import yaml

from gpuledger.config import Config, EnforcerConfig, Tenant
from gpuledger.kueue_export import API_VERSIONS, KueueOptions, kueue_objects

from kueue_crds import CRDS, cel_rules, errors, versions

EXAMPLES = sorted((CRDS / "examples").glob("*.yaml"))
RECORDED_CQ = CRDS / "examples" / "clusterqueue_kueue-v1beta1_gpu-a40-a100_recorded.yaml"
DOC_CQ = CRDS / "examples" / "clusterqueue_kueue-v1beta2_tas-gpu16_doc-example.yaml"
MODELS = ["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "Tesla T4"]
# A mixed fleet: a resource group per device plugin resource (amd.com/gpu, huawei.com/Ascend910, nvidia.com/gpu)
MIXED = ["AMD Instinct MI300X OAM", "910B3-Ascend-V1", "NVIDIA H100 80GB HBM3", "Tesla T4"]
AT = dt.datetime(2026, 12, 1, 12, tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class G:
    tenant: str
    gpu_model: str
    gpus: float
    valid_from: dt.datetime
    valid_until: dt.datetime


def test_the_crds_serve_the_versions_we_print():
    # v1beta2 is where Kueue stores these kinds; v1beta1 is still served (deprecated) for older sites.
    for kind in ("ClusterQueue", "ResourceFlavor", "LocalQueue"):
        v = versions(kind)
        assert (v["v1beta2"]["served"], v["v1beta2"]["storage"]) == (True, True), kind
        assert (v["v1beta1"]["served"], v["v1beta1"]["storage"]) == (True, False), kind
    assert API_VERSIONS[0] == "v1beta2"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_kueue_objects_written_by_others_validate(path):
    assert errors(yaml.safe_load(path.read_text())) == []


def _broken(path, change):
    obj = yaml.safe_load(path.read_text())
    change(obj)
    return errors(obj)


def _set_quota(value):
    def change(obj):
        obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = value

    return change


def test_the_validator_refuses_broken_objects():
    # A JSON float is neither an int nor a string: the int-or-string quantity refuses it.
    assert any("nominalQuota" in e for e in _broken(RECORDED_CQ, _set_quota(1.5)))
    assert any("nominalQuota" in e for e in _broken(RECORDED_CQ, _set_quota(8.0)))
    # A string that is no quantity fails the CRD's pattern.
    assert any("nominalQuota" in e for e in _broken(RECORDED_CQ, _set_quota("eight")))
    # v1beta2 names the cohort cohortName: v1beta1's `cohort` is an unknown field the API server would drop.
    assert any("cohort" in e for e in _broken(DOC_CQ, lambda o: o["spec"].update(cohort="c")))
    # A flavor name must be a DNS subdomain.
    assert any(
        "name" in e for e in _broken(DOC_CQ, lambda o: o["spec"]["resourceGroups"][0]["flavors"][0].update(name="A_B"))
    )
    # nominalQuota is required.
    assert any(
        "nominalQuota" in e
        for e in _broken(RECORDED_CQ, lambda o: o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].clear())
    )
    # The flavor list is a map keyed by name: one flavor twice is refused.
    dup = _broken(
        DOC_CQ, lambda o: o["spec"]["resourceGroups"][0]["flavors"].append(o["spec"]["resourceGroups"][0]["flavors"][0])
    )
    assert any("duplicate" in e for e in dup)
    # ObjectMeta: a ResourceFlavor is cluster-scoped, its name a DNS subdomain.
    rf = CRDS / "examples" / "resourceflavor_kueue-v1beta2_tas-gpu-toleration_doc-example.yaml"
    assert _broken(rf, lambda o: o["metadata"].update(namespace="x")) != []
    assert _broken(rf, lambda o: o["metadata"].update(name="TAS flavor")) != []
    # An apiVersion the CRD does not serve.
    assert _broken(rf, lambda o: o.update(apiVersion="kueue.x-k8s.io/v1")) != []


def test_the_hand_checked_cel_rules_refuse_what_they_must():
    # rule: self.flavors.all(x, size(x.resources) == size(self.coveredResources))
    def add_covered(obj):
        obj["spec"]["resourceGroups"][0]["coveredResources"].append("example.com/fpga")

    assert any("resources" in e for e in _broken(DOC_CQ, add_covered))

    # rule: no borrowingLimit without a cohort (the doc example has none)
    def borrow(obj):
        obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["borrowingLimit"] = 4

    assert any("without a cohort" in e for e in _broken(DOC_CQ, borrow))
    assert _broken(DOC_CQ, lambda o: (borrow(o), o["spec"].update(cohortName="c"))) == []

    # rule: a toleration with no key must use operator Exists
    rf = CRDS / "examples" / "resourceflavor_kueue-v1beta2_tas-gpu-toleration_doc-example.yaml"
    assert any("Exists" in e for e in _broken(rf, lambda o: o["spec"]["tolerations"].append({"operator": "Equal"})))


def _config(quota_mode="enforce") -> Config:
    return Config(
        tenants=(
            Tenant("vision", ("vision-train", "vision-dev"), 3.0, {"H100": 40, "*": 64}),
            Tenant("nlp", ("nlp",), 1.5, {"*": 96}),
            Tenant("research", ("research",), 1.0, {"A100": 8, "T4": 2.5}),
            Tenant("platform", (), 1.0, {"*": 16}),
        ),
        enforcer=EnforcerConfig(quota_mode=quota_mode),
    )


GRANTS = [
    G("vision", "H100", 8, AT - dt.timedelta(days=1), AT + dt.timedelta(days=4)),
    G("nlp", "*", 32, AT - dt.timedelta(days=30), AT),
]


@pytest.mark.parametrize("api_version", API_VERSIONS)
@pytest.mark.parametrize("quota_mode", ["enforce", "warn"])
@pytest.mark.parametrize("cohort", ["gpuledger", None])
@pytest.mark.parametrize("models", [MODELS, MIXED], ids=["nvidia", "mixed"])
def test_every_printed_object_validates(api_version, quota_mode, cohort, models):
    # The mixed fleet with partition resources too: groups covering several resources, every flavor listing each
    parts = ("nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb", "amd.com/cpx_nps4") if models is MIXED else ()
    options = KueueOptions(
        api_version=api_version,
        cohort=cohort,
        label_values={"Tesla T4": "Tesla-T4-SHARED"},
        partition_resources=parts,
    )
    objs = kueue_objects(_config(quota_mode), models, GRANTS, AT, options)
    flavors = len(models)
    assert [o["kind"] for o in objs] == ["ResourceFlavor"] * flavors + ["ClusterQueue"] * 4 + ["LocalQueue"] * 4
    groups = {
        tuple(len(g["coveredResources"]) for g in o["spec"]["resourceGroups"])
        for o in objs
        if o["kind"] == "ClusterQueue"
    }
    assert groups == {(1,) if models is MODELS else (2, 1, 3)}  # amd.com/gpu + CPX; Ascend910; nvidia.com/gpu + 2 MIG
    for o in objs:
        assert errors(o) == [], o
    # The CEL rules on what we print, each checked by hand in kueue_crds.HAND_CHECKED (errors() fails on any other).
    rules = set().union(*(cel_rules(o) for o in objs))
    cohort_rule = "cohortName" if api_version == "v1beta2" else "cohort"
    assert rules == {
        "self.flavors.all(x, size(x.resources) == size(self.coveredResources))",
        f"!has(self.{cohort_rule}) && has(self.resourceGroups) ? self.resourceGroups.all(rg, rg.flavors.all(f, "
        "f.resources.all(r, !has(r.borrowingLimit)))) : true",
        "self == oldSelf",  # LocalQueue.spec.clusterQueue is immutable: a rule of updates only
        # ResourceFlavor.spec's own rules (on every spec, though we set no topologyName): checked by hand too.
        "!has(self.topologyName) || self.nodeLabels.size() >= 1",
        "!has(oldSelf.topologyName) || (has(self.topologyName) && self.topologyName == oldSelf.topologyName)",
    }


def test_a_wrong_cohort_field_for_the_version_would_be_caught():
    """The validator is strict enough to catch this module's likeliest slip: the v1beta1 field in a v1beta2 object."""
    obj = kueue_objects(_config(), MODELS, [], AT, KueueOptions(tenants=("nlp",)))[3]
    assert obj["kind"] == "ClusterQueue" and errors(obj) == []
    wrong = copy.deepcopy(obj)
    wrong["spec"]["cohort"] = wrong["spec"].pop("cohortName")
    assert any("cohort" in e for e in errors(wrong))
