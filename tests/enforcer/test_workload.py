"""GPU asks of every workload kind the enforcer looks at, from real requests and client-built objects."""

import copy
import json

import pytest
from kubernetes import client

from gpuledger.enforcer.workload import AskError, ask, quantity

from conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "admission"
API = client.ApiClient()


def real_pod_request():
    return json.loads((FIXTURES / "kubewarden_loadtesting_pod_create_v1.json").read_text())["request"]


def derived_gpu_pod(limits_per_container):
    """DERIVED from the kubewarden request: its two containers' resources.limits set to the given GPU counts."""
    obj = copy.deepcopy(real_pod_request()["object"])
    for c, n in zip(obj["spec"]["containers"], limits_per_container, strict=True):
        if n is not None:
            c["resources"] = {"limits": {"nvidia.com/gpu": n}}
    return obj


def pod_spec(gpus="1", model=None, init_gpus=None):
    containers = [
        client.V1Container(
            name="train", image="trainer:1", resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": gpus})
        )
    ]
    init = (
        [
            client.V1Container(
                name="warm", image="w:1", resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": init_gpus})
            )
        ]
        if init_gpus
        else None
    )
    return client.V1PodSpec(
        containers=containers, init_containers=init, node_selector={"nvidia.com/gpu.product": model} if model else None
    )


def test_the_real_pod_asks_for_no_gpu():
    r = real_pod_request()
    a = ask(r["kind"]["kind"], r["object"])
    assert a.gpus == 0 and not a.asks_gpus and len(a.templates) == 1


def test_derived_gpu_pod_sums_its_containers():
    a = ask("Pod", derived_gpu_pod(["2", 1]))  # derived: a string and an int quantity
    assert (a.gpus, a.mig, a.templates[0].pointer) == (3, {}, "")


def test_an_init_container_counts_only_if_it_asks_more_than_the_containers():
    spec = API.sanitize_for_serialization(client.V1Pod(spec=pod_spec("2", init_gpus="4")))
    assert ask("Pod", spec).gpus == 4
    spec = API.sanitize_for_serialization(client.V1Pod(spec=pod_spec("2", init_gpus="1")))
    assert ask("Pod", spec).gpus == 2


def test_a_job_runs_parallelism_pods_at_once_and_names_its_model():
    job = client.V1Job(
        api_version="batch/v1",
        kind="Job",
        spec=client.V1JobSpec(
            parallelism=4, template=client.V1PodTemplateSpec(spec=pod_spec("2", model="NVIDIA-H100-80GB-HBM3"))
        ),
    )
    a = ask("Job", API.sanitize_for_serialization(job))
    assert (a.gpus, a.model, a.templates[0].pointer, a.templates[0].replicas) == (
        8,
        "NVIDIA-H100-80GB-HBM3",
        "/spec/template",
        4,
    )


def test_jobset_rayjob_and_kueue_workload():
    tmpl = API.sanitize_for_serialization(client.V1PodTemplateSpec(spec=pod_spec("4")))
    jobset = {
        "spec": {
            "replicatedJobs": [
                {"replicas": 2, "template": {"spec": {"parallelism": 3, "template": tmpl}}},
                {"template": {"spec": {"template": tmpl}}},
            ]
        }
    }
    assert ask("JobSet", jobset).gpus == 4 * 2 * 3 + 4
    ray = {
        "spec": {
            "rayClusterSpec": {
                "headGroupSpec": {
                    "template": API.sanitize_for_serialization(client.V1PodTemplateSpec(spec=pod_spec("0")))
                },
                "workerGroupSpecs": [{"replicas": 5, "template": tmpl}],
            }
        }
    }
    a = ask("RayJob", ray)
    assert a.gpus == 20 and a.templates[1].pointer == "/spec/rayClusterSpec/workerGroupSpecs/0/template"
    assert ask("RayJob", {"spec": {"clusterSelector": {"ray.io/cluster": "shared"}}}).gpus == 0
    wl = {"spec": {"podSets": [{"name": "main", "count": 3, "template": tmpl}]}}
    assert ask("Workload", wl).gpus == 12


def test_mig_slices_are_counted_by_profile():
    spec = client.V1PodSpec(
        containers=[
            client.V1Container(
                name="a", image="a", resources=client.V1ResourceRequirements(limits={"nvidia.com/mig-1g.10gb": "2"})
            )
        ]
    )
    a = ask("Job", {"spec": {"parallelism": 3, "template": {"spec": API.sanitize_for_serialization(spec)}}})
    assert (a.gpus, a.mig, a.asks_gpus) == (0, {"1g.10gb": 6}, True)


@pytest.mark.parametrize(
    "value,message",
    [
        ("1.5", "'1.5' is not a whole number of GPUs"),
        ("500m", "'500m' is not a whole number of GPUs"),
        ("abc", "'abc' is not a whole number of GPUs"),
        (-1, "-1 is negative"),
        (True, "True is not a number of GPUs"),
    ],
)
def test_bad_gpu_quantities_name_the_container_and_value(value, message):
    with pytest.raises(AskError) as e:
        ask("Pod", derived_gpu_pod([value, None]))  # derived
    assert str(e.value).startswith(f"spec.containers[0].resources.limits[nvidia.com/gpu]: {message}")


def test_requests_must_equal_limits_for_gpus():
    obj = derived_gpu_pod([None, None])
    obj["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "1"}}
    with pytest.raises(AskError, match="request '1' differs from its limit '2'"):
        ask("Pod", obj)


@pytest.mark.parametrize(
    "kind,obj,message",
    [
        ("Job", {"metadata": {}}, "object.spec: missing"),
        ("Job", {"spec": {"parallelism": 2}}, "spec.template: missing"),
        ("Pod", {"spec": {"containers": "x"}}, "spec.containers: missing or not a list"),
        ("Pod", {"metadata": {}}, "spec: missing"),
        ("Job", {"spec": {"parallelism": -2, "template": {"spec": {"containers": []}}}}, "spec.parallelism: -2"),
        ("Pod", ["not", "an", "object"], "object: expected a Kubernetes object"),
        # found by the fuzz (tests/enforcer/test_fuzz.py):
        ("Workload", {"spec": {"podSets": [None]}}, "spec.podSets: expected a list of objects"),
        ("Workload", {"spec": {"podSets": True}}, "spec.podSets: expected a list of objects"),
        ("JobSet", {"spec": {"replicatedJobs": [{"template": 3}]}}, "spec.replicatedJobs[0].template: expected"),
        ("RayJob", {"spec": {"rayClusterSpec": {"workerGroupSpecs": "x"}}}, "spec.rayClusterSpec.workerGroupSpecs"),
    ],
)
def test_malformed_objects_are_ask_errors(kind, obj, message):
    with pytest.raises(AskError, match=message.replace("[", r"\[").replace(".", r"\.")):
        ask(kind, obj)


def test_quantity_accepts_the_forms_kubernetes_sends():
    assert [quantity(v, "x") for v in (0, 2, "2", " 3 ", "+1", 4.0)] == [0, 2, 2, 3, 1, 4]


def test_other_kinds_ask_for_nothing():
    assert not ask("ConfigMap", {"data": {}}).asks_gpus
