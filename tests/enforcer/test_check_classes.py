"""`gpuledger enforcer check` names the workload class it gave each object: recorded objects written by others
(tests/fixtures/k8s/workloads, ../shared/data/k8s/workloads, and the recorded AdmissionReviews of
tests/fixtures/admission) get the class the k8s source's classifier gives them; a config's class policies decide
over the lake's decision table."""

import csv
import datetime as dt
import json
import re

import pytest
import yaml

from gpuledger.classify import classify_object
from gpuledger.query import Lake

from conftest import END, REPO, SHARED

AT = dt.datetime.fromtimestamp(END, dt.timezone.utc).isoformat()  # the analysed lake's table is fresh then
H100_LABEL, H100 = "NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3"

FIXTURES = REPO / "tests" / "fixtures" / "k8s" / "workloads"
CORPUS = SHARED / "data" / "k8s" / "workloads"
CLASS = re.compile(r"\[(?:.*, )?class (\w+)\]$")

with (FIXTURES / "expected_classes.csv").open() as f:
    EXPECTED = [r for r in csv.DictReader(f) if r["expected_class"] != "n/a"]


def _path(name):
    path = FIXTURES / name if (FIXTURES / name).exists() else CORPUS / name
    if not path.exists():
        pytest.skip(f"{name}: not copied (its licence: tests/fixtures/k8s/workloads/SOURCES.md) and no {CORPUS}")
    return path


@pytest.mark.shared_data
@pytest.mark.parametrize("r", EXPECTED, ids=lambda r: r["file"])
def test_each_recorded_workload_gets_the_classifiers_class(cli, analysed_lake, r):
    path = _path(r["file"])
    text = path.read_text()
    obj = json.loads(text) if path.suffix == ".json" else next(d for d in yaml.safe_load_all(text) if d)
    out = cli("enforcer", "check", path, "--lake", analysed_lake, "--at", AT)
    # 3: a denial, of the MPIJob pods pasted without their spec (metadata only): refused as unreadable, classed
    assert out.exit_code in (0, 3) and "Traceback" not in out.output, out.output
    first = out.output.splitlines()[0]  # a List: its first item, as classify_object reads a List
    got = CLASS.search(first)
    assert got, first
    assert got[1] == classify_object(obj).workload_class  # the webhook's class is the k8s source's
    if r["confidence"] == "high":
        assert got[1] == r["expected_class"], (first, r["decisive_signal"])


def test_recorded_admission_reviews_are_checked_as_the_objects_they_carry(cli, analysed_lake):
    """The kubewarden and OPA Pod CREATEs: bare nginx pods that restart (restartPolicy Always), labelled env=test and
    app=nginx, owned by nothing: no signal of a kind of work, so `other`. OPA's object has no kind or apiVersion
    (recorded 2018): the review's request.kind says Pod."""
    lines = []
    for name in ("kubewarden_loadtesting_pod_create_v1.json", "opa_primer_pod_create_v1.yaml"):
        out = cli(
            "enforcer", "check", REPO / "tests" / "fixtures" / "admission" / name, "--lake", analysed_lake, "--at", AT
        )
        assert out.exit_code == 0, out.output
        lines += out.output.splitlines()
    # no GPUs asked, and namespaces default and opa belong to no tenant: admitted plainly
    assert lines == ["Pod default/nginx: admitted  [class other]", "Pod opa/nginx: admitted  [class other]"]


def test_an_admission_review_without_an_object_is_named(cli, analysed_lake, tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}}))
    out = cli("enforcer", "check", f, "--lake", analysed_lake)
    assert out.exit_code == 1 and "document 1 is an AdmissionReview without a request.object" in out.output
    assert "Traceback" not in out.output


POLICY = """
[[classes]]
class = "notebook"
namespaces = ["vision-dev"]

[class_policy.inference]
may_exceed_quota = true
priority_class = "serving-critical"
"""


def _spec(gpus, restart):
    return {
        "restartPolicy": restart,
        "nodeSelector": {"nvidia.com/gpu.product": H100_LABEL},
        "containers": [{"name": "c", "image": "img:1", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
    }


def _workload(name, namespace, gpus, owner_api, owner_kind):
    """A Kueue Workload for the pods of `owner_kind` (the job it admits), one pod set of one pod with `gpus` GPUs."""
    ref = {"apiVersion": owner_api, "kind": owner_kind, "name": name, "uid": "u", "controller": True}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "ownerReferences": [ref]},
        "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": _spec(gpus, "Always")}}]},
    }


def _pod(name, namespace, gpus):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": _spec(gpus, "Never"),
    }


def test_class_policies_from_the_config_over_the_lakes_table(cli, analysed_lake, tmp_path):
    """The built-in tenants (vision: 40 H100s, 64 GPUs in all), the analysed lake's allocations, and a config that
    lets inference exceed quota and makes namespace vision-dev notebooks: 64 GPUs of serving are admitted with the
    warning and get the serving PriorityClass; 64 GPUs of a notebook are denied."""
    with Lake(analysed_lake) as q:
        (held,) = q.execute(
            "SELECT allocated_gpus FROM decisions WHERE tenant = 'vision' AND gpu_model = $m", {"m": H100}
        ).rows[0]
        (held_all,) = q.execute(
            "SELECT allocated_gpus FROM decisions WHERE tenant = 'vision' AND gpu_model IS NULL"
        ).rows[0]
    cfg = tmp_path / "classes.toml"
    cfg.write_text(POLICY)
    serving = _workload("vllm", "vision-train", 64, "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump_all([serving, _pod("nb", "vision-dev", 64)]))
    out = cli("enforcer", "check", f, "--lake", analysed_lake, "--at", AT, "--config", cfg)
    assert out.exit_code == 3, out.output  # the notebook is denied
    lines = out.output.splitlines()
    over = f"tenant vision uses {held:g} of 40 {H100} GPUs; this Workload asks 64 (quota exceeded by {held + 24:g})"
    assert lines[0] == "Workload vision-train/vllm: admitted  [tenant vision, 64 GPUs, class inference]"
    # over both of vision's quotas, 40 H100s and 64 GPUs of any model ("*"): each excused, each said
    over_all = (
        f"tenant vision uses {held_all:g} of 64 any model GPUs; this Workload asks 64 (quota exceeded by {held_all:g})"
    )
    warned = " ".join(w.removeprefix("  warning: ").removeprefix("… ") for w in lines[1:] if w.startswith("  warning"))
    excused = "; admitted: class inference may exceed quota"
    assert warned == f"{over}{excused} {over_all}{excused}"
    assert "  patch: add /metadata/labels/kueue.x-k8s.io~1priority-class = serving-critical" in lines
    # a bare pod that does not restart would be training; the config's row for vision-dev says notebook
    assert lines[-1] == (
        f"Pod vision-dev/nb: DENIED (quota, enforce): tenant vision uses {held:g} of 40 {H100} GPUs; this Pod asks 64 "
        f"(quota exceeded by {held + 24:g})  [tenant vision, 64 GPUs, class notebook]"
    )
