"""Policies per workload class at admission: the class the webhook gives each kind of object, quota exemption
(may_exceed_quota), the class's PriorityClass at /mutate, and the idle-hog gate's per-class idle times. The pure
pieces first, then decide() on reviews built as the API server sends them, under a config read from TOML."""

import base64
import datetime as dt
import json
import tomllib

import pytest

from gpuledger import config
from gpuledger.classify import classify_object
from gpuledger.enforcer import policies
from gpuledger.enforcer.decide import Recent, Settings, Table, decide
from gpuledger.enforcer.policies import IdleHold, TenantRow, Verdict
from gpuledger.enforcer.review import fit_warnings, parse

NOW = dt.datetime(2026, 11, 2, 12, tzinfo=dt.timezone.utc)
H100 = "NVIDIA-H100-80GB-HBM3"

CONFIG = """
[[tenants]]
name = "vision"
namespaces = ["vision-train", "vision-serve", "kube-system"]

[[classes]]
class = "inference"
namespaces = ["vision-serve"]

[enforcer]
quota_mode = "{quota}"
budget_mode = "enforce"
idle_hog_mode = "enforce"
fair_share_mode = "{fair_share}"
idle_max_gpus = 2
idle_min_h = 2

[class_policy.inference]
may_exceed_quota = true
priority_class = "serving-critical"
reclaim = {inference_reclaim}

[class_policy.training]
priority_class = "batch-preemptible"
"""


def settings(quota="enforce", fair_share="enforce", inference_reclaim="false", text=CONFIG) -> Settings:
    doc = tomllib.loads(text.format(quota=quota, fair_share=fair_share, inference_reclaim=inference_reclaim))
    return Settings.of(config.parse(doc, "classes.toml"))


def table(idle=(), fairshare=0.6) -> Table:
    """vision holds 14 of its 16 H100s; 20 GPUs in all, no all-models quota; fair-share factor 0.6 (gpu-high)."""
    rows = {
        ("vision", H100): TenantRow("vision", H100, 14, 16),
        ("vision", None): TenantRow("vision", None, 20, None, fairshare=fairshare),
    }
    return Table(rows, NOW, {"vision": tuple(idle)})


def _spec(gpus, restart="Never"):
    return {
        "restartPolicy": restart,
        "nodeSelector": {"nvidia.com/gpu.product": H100},
        "containers": [{"name": "c", "image": "img:1", "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
    }


def _meta(name, namespace, labels=None, owner=None):
    meta = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if owner is not None:
        api_version, kind = owner
        meta["ownerReferences"] = [
            {"apiVersion": api_version, "kind": kind, "name": "o", "uid": "u", "controller": True}
        ]
    return meta


def pod(gpus=1, namespace="vision-train", labels=None, owner=None, restart="Never"):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta("p", namespace, labels, owner),
        "spec": _spec(gpus, restart),
    }


def job(gpus=1, namespace="vision-train", labels=None, owner=None):
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta("j", namespace, labels, owner),
        "spec": {"template": {"spec": _spec(gpus)}},
    }


def jobset(gpus=1, namespace="vision-train", labels=None):
    template = {"spec": {"template": {"spec": _spec(gpus)}}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": _meta("js", namespace, labels),
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": template}]},
    }


def workload(gpus=1, namespace="vision-serve", owner=("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")):
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": _meta("wl", namespace, owner=owner),
        "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": _spec(gpus, "Always")}}]},
    }


def controller(api_version, kind, namespace="vision-train"):
    """A kind the webhook counts no GPUs of (its pods are checked when they come): classed all the same."""
    return {"apiVersion": api_version, "kind": kind, "metadata": _meta("c", namespace), "spec": {}}


def review(obj, dry_run=False):
    """The AdmissionReview a CREATE of `obj` carries (request.kind from the object's apiVersion)."""
    group, _, version = obj["apiVersion"].rpartition("/")
    doc = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": group, "version": version, "kind": obj["kind"]},
            "namespace": obj["metadata"]["namespace"],
            "name": obj["metadata"]["name"],
            "operation": "CREATE",
            "dryRun": dry_run,
            "object": obj,
        },
    }
    return parse(json.dumps(doc).encode())


def run(obj, s=None, t=None, recent=None, mutate=False, now=NOW):
    """decide, then record what it admitted, as the server does."""
    recent = Recent(30) if recent is None else recent
    o = decide(review(obj), table() if t is None else t, s or settings(), recent, now, mutate)
    recent.record(now.timestamp(), o)
    return o


def patch(o) -> list[dict]:
    r = o.response["response"]
    return json.loads(base64.b64decode(r["patch"])) if "patch" in r else []


# --- the pure pieces ---------------------------------------------------------------------------------------------


def test_may_exceed_turns_a_breach_into_a_notice_naming_the_class():
    breach = Verdict("quota", "enforce", True, "tenant vision uses 14 of 16 H100 GPUs; this Pod asks 4")
    v = policies.may_exceed(breach, "inference")
    assert (v.breach, v.warning, v.exempt, v.policy, v.mode) == (False, True, True, "quota", "enforce")
    assert (
        v.message
        == "tenant vision uses 14 of 16 H100 GPUs; this Pod asks 4; admitted: class inference may exceed quota"
    )
    # dry-run: no warning to the user, the audit notes it (exempt)
    v = policies.may_exceed(Verdict("quota", "dry-run", True, "m"), "inference")
    assert (v.breach, v.warning, v.exempt) == (False, False, True)
    # within quota, or no quota at all: nothing to excuse
    within = Verdict("quota", "enforce", False, "")
    assert policies.may_exceed(within, "inference") is within and policies.may_exceed(None, "inference") is None


def test_the_class_priority_outranks_the_fair_share_tier():
    tiers = ((0.5, "gpu-high"), (0.25, "gpu-normal"), (0.0, "gpu-low"))
    assert policies.choose_priority("serving-critical", 0.1, tiers) == ("serving-critical", "class")
    assert policies.choose_priority(None, 0.1, tiers) == ("gpu-low", "fair-share")
    assert policies.choose_priority("", 0.3, tiers) == ("gpu-normal", "fair-share")  # "": the class names none
    assert policies.choose_priority(None, None, tiers) == (None, None)  # no factor: nothing to set


def test_each_hold_counts_after_its_class_time():
    by_class = {"notebook": 3600.0, "training": 7200.0, "inference": None}
    hold = lambda c: IdleHold("ns", "p", H100, 1.0, 0.0, c)  # noqa: E731
    assert policies.idle_after_s(hold("notebook"), by_class, 5400.0) == 3600.0
    assert policies.idle_after_s(hold("inference"), by_class, 5400.0) is None  # never counts
    assert policies.idle_after_s(hold(None), by_class, 5400.0) == 5400.0  # a row from before the class: the default
    assert policies.idle_after_s(hold("evaluation"), by_class, 5400.0) == 5400.0  # a class the map lacks


def test_settings_read_the_class_policies():
    s = settings()
    # idle_after_h x 3600; None where reclaim is false (inference here, other by default)
    assert s.idle_after_s == {
        "training": 7200.0,
        "inference": None,
        "notebook": 3600.0,
        "evaluation": 7200.0,
        "other": None,
    }
    assert s.class_policy["inference"].may_exceed_quota and not s.class_policy["notebook"].may_exceed_quota
    assert [r.workload_class for r in s.class_rules] == ["inference"]


# --- the class of what is admitted -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (pod(), "training"),  # a bare pod that does not restart: a batch run
        (pod(restart="Always"), "other"),  # a bare pod that restarts: nothing says what it is
        (pod(labels={"gpuledger.io/class": "evaluation"}), "evaluation"),  # the label outranks everything
        (pod(namespace="vision-serve"), "inference"),  # the [[classes]] row for the namespace
        (pod(owner=("apps/v1", "ReplicaSet"), restart="Always"), "inference"),  # a Deployment's pod
        # a Kubeflow notebook's pod: the webhook sees only the StatefulSet; the controller's label says notebook
        (pod(owner=("apps/v1", "StatefulSet"), labels={"notebook-name": "nb"}, restart="Always"), "notebook"),
        (pod(labels={"component": "singleuser-server"}, restart="Always"), "notebook"),  # JupyterHub
        (pod(namespace="kube-system", owner=("apps/v1", "ReplicaSet"), restart="Always"), "other"),
        (job(), "training"),
        (job(owner=("batch/v1", "CronJob")), "other"),  # a periodic job: canaries, backups
        (jobset(), "training"),
        (workload(), "inference"),  # a Kueue Workload of a LeaderWorkerSet
        (workload(owner=("kubeflow.org/v1", "PyTorchJob"), namespace="vision-train"), "training"),
        (controller("apps/v1", "Deployment"), "inference"),
        (controller("kubeflow.org/v1", "Notebook"), "notebook"),
        (controller("serving.kserve.io/v1beta1", "InferenceService"), "inference"),
        (controller("kubeflow.org/v1", "PyTorchJob"), "training"),
        (controller("trustyai.opendatahub.io/v1alpha1", "LMEvalJob"), "evaluation"),
    ],
    ids=lambda x: "" if isinstance(x, str) else None,
)
def test_each_kind_is_given_its_class(obj, expected):
    for mutate in (False, True):
        assert run(obj, mutate=mutate).workload_class == expected


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        # fields of the wrong type read as absent: labels a list, an ownerReference no object, a kind no string
        ({"kind": "Pod", "metadata": {"labels": ["a"], "ownerReferences": [1, {"kind": 3}]}, "spec": []}, "other"),
        # a label value that is no string is dropped (job-name would say training); a lone ownerReference not flagged
        # controller is still read: StatefulSet, a building block, so the notebook-name label decides
        (
            {
                "kind": "Pod",
                "metadata": {
                    "labels": {"notebook-name": "nb", "job-name": 7},
                    "ownerReferences": [{"kind": "StatefulSet", "apiVersion": "apps/v1", "controller": "yes"}],
                },
            },
            "notebook",
        ),
        ({"kind": "Workload", "apiVersion": "kueue.x-k8s.io/v1beta1", "spec": {"podSets": [5]}}, "other"),
        ({"kind": "Job", "apiVersion": "batch/v1", "metadata": [], "spec": {"template": []}}, "training"),
        ("not an object", "other"),
    ],
)
def test_a_malformed_object_is_classed_never_raises(obj, expected):
    assert classify_object(obj).workload_class == expected


def test_a_list_nested_past_the_recursion_limit_is_its_first_item():
    obj = {"kind": "Pod", "metadata": {"labels": {"gpuledger.io/class": "notebook"}}}
    for _ in range(5000):
        obj = {"kind": "List", "items": [obj]}
    assert classify_object(obj).workload_class == "notebook"


def test_a_review_without_an_object_has_no_class():
    doc = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "DELETE"},
    }
    o = decide(parse(json.dumps(doc).encode()), table(), settings(), Recent(30), NOW)
    assert o.decision == "allow" and o.workload_class is None


# --- quota: who may exceed it ------------------------------------------------------------------------------------

QUOTA_MSG = f"tenant vision uses 14 of 16 {H100} GPUs; this Pod asks 4 (quota exceeded by 2)"


def test_a_notebook_over_quota_is_denied():
    nb = pod(4, owner=("apps/v1", "StatefulSet"), labels={"notebook-name": "nb"}, restart="Always")
    o = run(nb)
    assert (o.decision, o.policy, o.mode, o.workload_class) == ("deny", "quota", "enforce", "notebook")
    assert o.response["response"]["status"]["message"] == QUOTA_MSG


def test_inference_over_quota_is_admitted_with_a_warning_naming_the_class_and_still_counted():
    recent = Recent(30)
    o = run(pod(4, namespace="vision-serve", restart="Always"), recent=recent)
    reason = QUOTA_MSG + "; admitted: class inference may exceed quota"
    assert (o.decision, o.policy, o.mode, o.reason, o.workload_class) == (
        "warn",
        "quota",
        "enforce",
        reason,
        "inference",
    )
    r = o.response["response"]
    assert r["allowed"] is True and r["warnings"] == fit_warnings([reason]) and o.counted
    # Its 4 GPUs count: 14 held + 4 just admitted + 1 asked = 19 > 16, so a training pod is denied by 3.
    o = run(pod(1), recent=recent)
    assert o.decision == "deny" and o.workload_class == "training"
    assert o.reason == f"tenant vision uses 18 of 16 {H100} GPUs; this Pod asks 1 (quota exceeded by 3)"


def test_without_the_class_policy_inference_is_held_to_quota():
    default = CONFIG.split("[class_policy.inference]")[0]  # the built-in policies: no class may exceed quota
    o = run(pod(4, namespace="vision-serve", restart="Always"), s=settings(text=default))
    assert (o.decision, o.workload_class) == ("deny", "inference") and o.reason == QUOTA_MSG


@pytest.mark.parametrize("mode", ["warn", "dry-run"])
def test_the_exemption_in_the_quota_modes_that_admit_anyway(mode):
    o = run(pod(4, namespace="vision-serve", restart="Always"), s=settings(quota=mode))
    reason = QUOTA_MSG + "; admitted: class inference may exceed quota"
    assert (o.policy, o.mode, o.reason) == ("quota", mode, reason)  # the audit notes it in either mode
    if mode == "warn":
        assert o.decision == "warn" and o.response["response"]["warnings"] == fit_warnings([reason])
    else:  # dry-run: the user sees nothing
        assert o.decision == "allow" and "warnings" not in o.response["response"]


# --- priority class ----------------------------------------------------------------------------------------------

LABEL = "/metadata/labels/kueue.x-k8s.io~1priority-class"
TEMPLATE = "/spec/template/spec/priorityClassName"


def test_a_training_job_gets_its_class_priority_on_the_label_and_the_template():
    o = run(job(), mutate=True)
    assert patch(o) == [
        {"op": "add", "path": LABEL, "value": "batch-preemptible"},
        {"op": "add", "path": TEMPLATE, "value": "batch-preemptible"},
    ]
    # fair share alone would have given gpu-high (factor 0.6 >= 0.5): the class's outranks it, and says so
    assert (o.policy, o.mode, o.decision) == ("class-priority", "enforce", "allow")
    assert o.reason == (
        "workload class training: this Job gets priority class batch-preemptible (not tenant vision's fair-share "
        "gpu-high)"
    )


def test_kueue_kinds_get_the_label_only_and_a_pod_nothing():
    o = run(jobset(labels={"gpuledger.io/class": "inference"}), mutate=True)
    assert patch(o) == [{"op": "add", "path": LABEL, "value": "serving-critical"}]
    o = run(workload(), mutate=True)  # the Workload of a LeaderWorkerSet: inference
    assert patch(o) == [{"op": "add", "path": LABEL, "value": "serving-critical"}]
    assert o.policy == "class-priority" and o.workload_class == "inference"
    # a Deployment's pod: a Pod's priorityClassName is never changed (the API server would reject the pod)
    o = run(pod(1, owner=("apps/v1", "ReplicaSet"), restart="Always"), mutate=True)
    assert patch(o) == [] and o.policy is None and o.workload_class == "inference"


def test_a_class_without_a_priority_class_gets_the_fair_share_tier():
    o = run(job(labels={"gpuledger.io/class": "notebook"}), mutate=True)
    assert [op["value"] for op in patch(o)] == ["gpu-high", "gpu-high"] and o.policy == "fair-share"


@pytest.mark.parametrize("mode", ["warn", "dry-run"])
def test_the_class_priority_follows_the_fair_share_mode(mode):
    o = run(job(), s=settings(fair_share=mode), mutate=True)
    assert patch(o) == [] and (o.policy, o.mode) == ("class-priority", mode)
    msg = (
        "workload class training: this Job would get priority class batch-preemptible (not tenant vision's "
        "fair-share gpu-high)"
    )
    assert o.reason == msg
    assert o.response["response"].get("warnings") == (fit_warnings([msg]) if mode == "warn" else None)


def test_a_stale_table_still_sets_the_class_priority_not_the_fair_share_tier():
    later = NOW + dt.timedelta(hours=2)  # the table is 2 h old: stale (limit 15 min)
    o = run(job(), mutate=True, now=later)
    assert [op["value"] for op in patch(o)] == ["batch-preemptible", "batch-preemptible"]
    assert o.reason == "workload class training: this Job gets priority class batch-preemptible"  # no tier known
    o = run(job(labels={"gpuledger.io/class": "notebook"}), mutate=True, now=later)
    assert patch(o) == [] and o.policy is None


# --- idle-hog: each class its own idle time ----------------------------------------------------------------------


def holds(*spec):
    """IdleHolds from (pod, GPUs, hours idle at NOW, class)."""
    return tuple(IdleHold("vision-train", p, H100, g, NOW.timestamp() - h * 3600, c) for p, g, h, c in spec)


MIXED = holds(
    ("nb-1", 1.0, 1.5, "notebook"),  # counts: a notebook's time is 1 h
    ("tr-1", 2.0, 1.5, "training"),  # not yet: training's is 2 h
    ("tr-2", 1.0, 3.0, "training"),  # counts
    ("svc-1", 4.0, 10.0, "inference"),  # never: inference is not reclaimed (a service idles at night)
    ("old-1", 1.0, 2.5, None),  # a row from before the class: enforcer.idle_min_h (2 h), counts
)


def test_idle_hog_counts_each_hold_after_its_class_time():
    o = run(pod(1), t=table(MIXED))
    # counted: nb-1 + tr-2 + old-1 = 3 GPUs > the limit of 2. Named the most GPUs first, then the longest idle.
    assert (o.decision, o.policy) == ("deny", "idle-hog")
    assert o.reason == (
        "tenant vision holds 3 GPUs idle past their class's time (notebook 1 h, training 2 h, unclassed 2 h) "
        "(limit 2): vision-train/tr-2 (training, 1 GPU, 3 h), vision-train/old-1 (1 GPU, 2.5 h), "
        "vision-train/nb-1 (notebook, 1 GPU, 1.5 h); free them before this Pod asks 1 more"
    )


def test_idle_inference_counts_once_its_class_is_reclaimed():
    o = run(pod(1), t=table(MIXED), s=settings(inference_reclaim="true"))
    # svc-1's 4 GPUs, idle 10 h past inference's 2 h, join: 3 + 4 = 7, the most GPUs first
    assert o.reason.startswith(
        "tenant vision holds 7 GPUs idle past their class's time (notebook 1 h, inference 2 h, training 2 h, "
        "unclassed 2 h) (limit 2): vision-train/svc-1 (inference, 4 GPUs, 10 h), vision-train/tr-2"
    )


def test_idle_hog_under_the_limit_once_the_classes_are_read():
    # Under the one rule of idle_min_h (2 h) for all, nb-1 (1.5 h) would not count and svc-1 would:
    # 4 + 1 + 1 = 6 GPUs. By class: nb-1 counts, svc-1 never, tr-1 not yet: 1 + 1 = 2, not over the limit of 2.
    two = tuple(h for h in MIXED if h.pod != "old-1")
    assert run(pod(1), t=table(two)).decision == "allow"


def test_one_class_idle_is_said_with_its_time():
    o = run(pod(1), t=table(holds(("nb-1", 2.0, 1.2, "notebook"), ("nb-2", 1.0, 4.0, "notebook"))))
    assert o.reason == (
        "tenant vision holds 3 GPUs idle for 1 h or more (limit 2): vision-train/nb-1 (notebook, 2 GPUs, 1.2 h), "
        "vision-train/nb-2 (notebook, 1 GPU, 4 h); free them before this Pod asks 1 more"
    )
