"""`gpuledger enforcer check`: the webhook's answer for a file of workloads, against the lake's decision table,
with no cluster. The objects are built with the kubernetes client's models and serialised by its ApiClient."""

import datetime as dt

import yaml
from kubernetes import client

from gpuledger.query import Lake

from builders import all_keys
from conftest import END

AT = dt.datetime.fromtimestamp(END, dt.timezone.utc).isoformat()
H100_LABEL, H100 = "NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3"


def _pod_spec(gpus, model=H100_LABEL):
    return client.V1PodSpec(
        restart_policy="Never",
        node_selector={"nvidia.com/gpu.product": model},
        containers=[
            client.V1Container(
                name="train",
                image="trainer:1",
                resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": gpus}),
            )
        ],
    )


def job(name, namespace, gpus, parallelism):
    return client.V1Job(
        api_version="batch/v1",
        kind="Job",
        metadata=client.V1ObjectMeta(name=name, namespace=namespace),
        spec=client.V1JobSpec(parallelism=parallelism, template=client.V1PodTemplateSpec(spec=_pod_spec(gpus))),
    )


def pod(name, namespace, gpus):
    return client.V1Pod(
        api_version="v1", kind="Pod", metadata=client.V1ObjectMeta(name=name, namespace=namespace), spec=_pod_spec(gpus)
    )


def stream(*objs):
    api = client.ApiClient()
    return yaml.safe_dump_all([api.sanitize_for_serialization(o) for o in objs])


def test_a_job_over_quota_is_denied_with_the_numbers_and_a_small_pod_admitted(cli, analysed_store, tmp_path):
    """On each kind of Store; a reader, it writes nothing into the lake (no day memo, no audit)."""
    before = all_keys(analysed_store)
    with Lake(analysed_store) as q:
        (held,) = q.execute(
            "SELECT allocated_gpus FROM decisions WHERE tenant = 'vision' AND gpu_model = $m", {"m": H100}
        ).rows[0]
    f = tmp_path / "w.yaml"
    f.write_text(stream(job("train-big", "vision-train", "8", 8), pod("nb", "research", "1")))
    r = cli("enforcer", "check", f, "--lake", str(analysed_store), "--at", AT)
    assert r.exit_code == 3, r.output  # one is denied
    lines = r.output.splitlines()
    assert lines[0] == (
        f"Job vision-train/train-big: DENIED (quota, enforce): tenant vision uses {held:g} of 40 {H100} GPUs; "
        f"this Job asks 64 (quota exceeded by {held + 64 - 40:g})  [tenant vision, 64 GPUs, class training]"
    )
    # a bare pod that does not restart (restartPolicy Never) is a batch run: training
    assert lines[1] == "Pod research/nb: admitted  [tenant research, 1 GPU, class training]"
    assert all_keys(analysed_store) == before


def test_an_admitted_job_shows_the_priority_class_it_would_get(cli, analysed_lake, tmp_path):
    with Lake(analysed_lake) as q:
        (fs,) = q.execute("SELECT fairshare FROM decisions WHERE tenant = 'nlp' AND gpu_model IS NULL").rows[0]
    cls = "gpu-high" if fs >= 0.5 else "gpu-normal" if fs >= 0.25 else "gpu-low"
    f = tmp_path / "j.yaml"
    f.write_text(stream(job("tune", "nlp", "1", 2)))
    r = cli("enforcer", "check", f, "--lake", analysed_lake, "--at", AT)
    assert r.exit_code == 0, r.output
    assert f"  patch: add /spec/template/spec/priorityClassName = {cls}" in r.output.splitlines()


def test_without_at_the_old_table_is_the_failure_mode(cli, analysed_lake, tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(stream(pod("nb", "research", "1")))
    r = cli("enforcer", "check", f, "--lake", analysed_lake)  # END is long ago: the table is stale now
    assert r.exit_code == 0 and "admitted unchecked" in r.output


def test_bad_files_are_named(cli, analysed_lake, tmp_path):
    cases = {
        "notyaml.yaml": ("a: [b", "not YAML or JSON"),
        "nokind.yaml": ("a: 1\n", "document 1 is not a Kubernetes"),
        "empty.yaml": ("", "no Kubernetes object in it"),
    }
    for name, (text, says) in cases.items():
        (tmp_path / name).write_text(text)
        r = cli("enforcer", "check", tmp_path / name, "--lake", analysed_lake)
        assert r.exit_code == 1 and says in r.output and "Traceback" not in r.output, (name, r.output)
    r = cli("enforcer", "check", tmp_path / "nokind.yaml", "--at", "yesterday", "--lake", analysed_lake)
    assert r.exit_code != 0 and "--at 'yesterday' is not an ISO-8601 time" in r.output
