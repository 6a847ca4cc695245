"""Pod -> jobs row, on real pods from tests/fixtures/k8s (deserialized by the kubernetes client) and on
derived ones (tests/builders.py says what each derivation changes)."""

import datetime as dt

import pytest

from gpuledger.collector.k8s.pods import BadQuantity, gpu_request, job_row, status_and_reason, top_owner
from gpuledger.mig import mig_share

import builders

TENANTS = {"runai-reservation": "platform", "runai-pa": "vision", "runai-team-a": "nlp"}


def us(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1_000_000)


def row(p, **kw):
    return job_row(p, cluster="c", tenant_of=TENANTS.get, observed_at_s=1_800_000_000.0, **kw)


def test_whole_gpu_pod_from_resources():
    r = row(builders.pod("pod_runai_reservation_nvidia-gpu-1_running"))
    assert (r["gpus"], r["gpu_sharing"], r["mig_profile"]) == (1.0, "exclusive", None)
    assert r["tenant"] == "platform" and r["namespace"] == "runai-reservation"
    assert r["submitted_at"] == us("2024-03-31T09:03:25Z")
    assert r["scheduled_at"] == us("2024-03-31T09:03:25Z")  # PodScheduled True
    assert r["started_at"] == us("2024-03-31T09:03:27Z")  # container running startedAt
    assert r["finished_at"] is None and r["status"] == "running"
    assert r["node"] == "i-0b498db53280b86a6"
    assert r["gpu_uuids"] == ["GPU-8983c66a-23df-e63b-4c2f-afcae9ec79b3"]  # Run:ai reservation annotation
    assert r["owner_kind"] is None  # no ownerReferences on this pod
    assert r["updated_at"] == 1_800_000_000 * 1_000_000 and r["source"] == "k8s"


def test_fractional_gpu_only_in_annotations():
    p = builders.pod("pod_runai_fraction-0.5gpu_running")
    assert p.spec.containers[0].resources.limits is None  # nothing in resources: annotations carry the GPU
    r = row(p)
    assert (r["gpus"], r["gpu_sharing"]) == (0.5, "fraction")
    assert (r["owner_kind"], r["owner_name"]) == ("RunaiJob", "frac-1")
    assert r["submitted_at"] == us("2024-03-31T09:03:22Z") and r["started_at"] == us("2024-03-31T09:03:51Z")


def test_mig_pod_from_annotation():
    r = row(builders.pod("pod_runai_mig-1g.5gb_running"))
    assert r["gpu_sharing"] == "mig" and r["mig_profile"] == "1g.5gb"
    assert r["gpus"] == pytest.approx(1 / 7)  # Run:ai itself writes runai-allocated-mig-gpus 0.142857...
    assert r["gpu_uuids"] == ["MIG-28810d46-0180-5139-a975-020bdc7f9cb1"]
    assert r["scheduled_at"] == us("2023-01-19T07:56:49Z") and r["tenant"] == "nlp"


# A compute-instance profile (1c.3g.71gb: 1 compute slice of a 3-slice GPU instance, as on the H200 capture
# where 1c.3g and 2c.3g share one GI) holds its compute slices: 1c + 2c = the GI's 3/7.
@pytest.mark.parametrize(
    "profile,share",
    [
        ("1g.10gb", 1 / 7),
        ("3g.40gb", 3 / 7),
        ("7g.80gb", 1.0),
        ("1c.3g.71gb", 1 / 7),
        ("2c.3g.71gb", 2 / 7),
        ("1g.10gb+me", 1 / 7),
    ],
)
def test_mig_profile_shares(profile, share):
    assert mig_share(profile) == pytest.approx(share)


def test_mig_from_resource_limits():
    p = builders.deserialize(builders.derived_with_limits({"nvidia.com/mig-3g.40gb": "2"}))
    req = gpu_request(p)
    assert req.sharing == "mig" and req.mig_profile == "3g.40gb" and req.gpus == pytest.approx(6 / 7)


def test_time_sliced_replica():
    p = builders.deserialize(builders.derived_with_limits({"nvidia.com/gpu.shared": "1"}))
    req = gpu_request(p)
    assert (req.gpus, req.sharing) == (1.0, "time-sliced")


def test_non_gpu_pods_give_no_row():
    assert row(builders.pod("pod_nongpu_minikube_succeeded_completed")) is None
    assert row(builders.pod("pod_nongpu_eks-fargate_job-owned_failed_starterror")) is None


@pytest.mark.parametrize("quantity", ["abc", "-1", "1.5.2"])
def test_bad_gpu_quantities_name_the_pod_and_field(quantity):
    p = builders.deserialize(builders.derived_with_limits({"nvidia.com/gpu": quantity}))
    with pytest.raises(BadQuantity, match=r"pod runai-reservation/\S+ container \S+ nvidia.com/gpu"):
        gpu_request(p)


def test_pending_unschedulable():
    r = row(builders.deserialize(builders.derived_pending_unschedulable()))
    assert (r["status"], r["reason"]) == ("pending", "Unschedulable")
    assert r["scheduled_at"] is None and r["node"] is None and r["started_at"] is None


@pytest.mark.parametrize(
    "reason,code,phase,pod_reason,want",
    [
        ("OOMKilled", 137, "Failed", None, ("failed", "OOMKilled")),
        ("Error", 1, "Failed", None, ("failed", "Error")),
        ("Completed", 0, "Succeeded", None, ("succeeded", "Completed")),
        ("ContainerStatusUnknown", 137, "Failed", "Evicted", ("failed", "Evicted")),
    ],
)
def test_terminal_states(reason, code, phase, pod_reason, want):
    r = row(builders.deserialize(builders.derived_terminated(reason, code, phase, pod_reason)))
    assert (r["status"], r["reason"]) == want
    assert r["finished_at"] == us("2024-03-31T10:03:27Z") and r["started_at"] == us("2024-03-31T09:03:27Z")


def test_real_failed_pod_never_started_keeps_no_1970_start():
    p = builders.pod("pod_nongpu_eks-fargate_job-owned_failed_starterror")
    assert status_and_reason(p, deleted=False) == ("failed", "StartError")
    assert top_owner(p) == ("Job", "run-migrations")


def test_preempted_by_disruption_condition():
    d = builders.raw("pod_runai_reservation_nvidia-gpu-1_running")
    d["status"]["conditions"].append(
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "lastTransitionTime": "2024-03-31T09:30:00Z",
        }
    )  # derived
    assert status_and_reason(builders.deserialize(d), deleted=False) == ("preempted", "PreemptionByScheduler")


def test_deleted_while_running_is_cancelled_at_deletion_time():
    d = builders.raw("pod_runai_reservation_nvidia-gpu-1_running")
    d["metadata"]["deletionTimestamp"] = "2024-03-31T11:00:00Z"  # derived
    r = row(builders.deserialize(d), deleted=True)
    assert (r["status"], r["reason"]) == ("cancelled", "Deleted")
    assert r["finished_at"] == us("2024-03-31T11:00:00Z")


def test_owner_chain_walks_to_the_top():
    class Ref:
        def __init__(self, kind, name):
            self.kind, self.name, self.controller = kind, name, True

    chain = {("RunaiJob", "frac-1"): [Ref("JobSet", "llm")], ("JobSet", "llm"): []}
    p = builders.pod("pod_runai_fraction-0.5gpu_running")
    assert top_owner(p, lambda kind, ns, name: chain.get((kind, name), [])) == ("JobSet", "llm")
    loop = {("RunaiJob", "frac-1"): [Ref("RunaiJob", "frac-1")]}
    assert top_owner(p, lambda kind, ns, name: loop.get((kind, name), [])) == ("RunaiJob", "frac-1")


# -- other vendors' device plugins (derived: the reservation pod with the resource names the AMD and Ascend device
# plugins register, gpuledger/vendors.py cites them) ------------------------------------------------------------------
@pytest.mark.parametrize(
    "limits,gpus,sharing,profile,vendor",
    [
        ({"amd.com/gpu": "2"}, 2.0, "exclusive", None, "amd"),
        ({"huawei.com/Ascend910": "8"}, 8.0, "exclusive", None, "huawei"),
        ({"huawei.com/Ascend310P": "1"}, 1.0, "exclusive", None, "huawei"),
        # 3 CPX partitions of an MI300X, each 1 of its 8 XCDs: 3/8
        ({"amd.com/cpx_nps4": "3"}, 3 / 8, "partition", "cpx.nps4", "amd"),
        # one vNPU of 2 of a 310P's 8 AI cores: 1/4
        ({"huawei.com/Ascend310P-2c": "1"}, 2 / 8, "partition", "Ascend310P-2c", "huawei"),
        # an Ascend910 vNPU of 16 of 32 AI cores: half a chip
        ({"huawei.com/Ascend910-16c": "1"}, 16 / 32, "partition", "Ascend910-16c", "huawei"),
        ({"nvidia.com/gpu": "1"}, 1.0, "exclusive", None, "nvidia"),
    ],
)
def test_other_vendors_resources_are_gpu_asks(limits, gpus, sharing, profile, vendor):
    req = gpu_request(builders.deserialize(builders.derived_with_limits(limits)))
    assert (req.sharing, req.mig_profile, req.vendor) == (sharing, profile, vendor)
    assert req.gpus == pytest.approx(gpus)
    r = row(builders.deserialize(builders.derived_with_limits(limits)))
    assert r["gpus"] == pytest.approx(gpus) and r["gpu_model"] is None  # the model is the node's


def test_unknown_accelerator_resource_is_recorded_with_no_gpus():
    p = builders.deserialize(builders.derived_with_limits({"example.com/gpu-x": "2", "huawei.com/npu-core": "4"}))
    req = gpu_request(p)
    assert (req.gpus, req.sharing, req.unmapped) == (0.0, "unmapped", ("example.com/gpu-x", "huawei.com/npu-core"))
    r = row(p)
    assert (r["gpus"], r["gpu_sharing"], r["status"]) == (0.0, "unmapped", "running")  # recorded, counted nowhere


def test_a_config_row_maps_the_unknown_resource_with_its_model_and_share():
    from gpuledger.vendors import Resource

    extra = {"example.com/gpu-x": Resource("amd", 0.5, "half", "AMD Instinct MI300X OAM")}
    p = builders.deserialize(builders.derived_with_limits({"example.com/gpu-x": "3"}))
    r = row(p, accelerators=extra)
    # 3 units of half a GPU each = 1.5 GPUs, the model the row names
    assert (r["gpus"], r["gpu_sharing"], r["mig_profile"]) == (1.5, "partition", "half")
    assert r["gpu_model"] == "AMD Instinct MI300X OAM"


def test_an_unknown_resource_beside_a_known_one_does_not_hide_it():
    p = builders.deserialize(builders.derived_with_limits({"amd.com/gpu": "1", "example.com/gpu-x": "2"}))
    req = gpu_request(p)
    assert (req.gpus, req.sharing, req.vendor) == (1.0, "exclusive", "amd")
