"""A pod's workload class (training, inference, notebook, evaluation, other), as a pure function of what the
pod and its owners say. docs/workload-classes.md has the rules; the corpus they were checked against is
../shared/data/k8s/workloads (tests/collector/test_k8s_classes.py).

In the core, not in the collector: the k8s source classes the pods it watches, and the admission webhook the
objects it is asked about (a Pod, a Job, a JobSet, a Kueue Workload...), with the same tables. The stages may not
import each other (the import-linter contracts in pyproject.toml), and nothing here needs more than the config.

Precedence, first answer wins:
1. the pod's label `gpuledger.io/class` (a person said so; a value that is no class is ignored);
2. the config's [[classes]] rows, in file order (a site's own knowledge: "namespace serving is inference");
3. a system namespace (kube-system, kube-public, kube-node-lease) -> other: cluster add-ons (CoreDNS, the GPU
   device plugin, dcgm-exporter) have Deployment or DaemonSet owners that would otherwise read as serving;
4. the owner chain, read from the top: the outermost owner whose kind is known decides (Pod -> StatefulSet ->
   Notebook is a notebook, not the StatefulSet's inference; Pod -> Job -> CronJob is other) -- unless the top of
   the chain is a building block (ReplicaSet, StatefulSet, Deployment, batch Job: GENERIC), where the walk may have
   stopped short, and step 5 has an answer;
5. labels the controllers and schedulers set, for pods whose chain says nothing (no ownerReferences in a
   dump, or a custom owner) or stops at a building block: Kubeflow training-operator, JupyterHub, Kubeflow
   notebook, KServe, LWS, KAI and Run:ai labels;
6. the pod's shape: a bare pod that does not restart (restartPolicy Never or OnFailure) is a batch run, and
   batch is training (KAI's default priority class is `train` for the same reason);
7. other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpuledger.classes import CLASS_LABEL, WORKLOAD_CLASSES
from gpuledger.config import ClassRule

SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})

# (API group, kind) -> class; group "" is the core group. A group of None matches the kind in any group, for
# kinds whose group moved between releases or differs between distributions.
KINDS: dict[tuple[str | None, str], str] = {
    # training
    ("batch", "Job"): "training",
    ("batch.volcano.sh", "Job"): "training",
    ("jobset.x-k8s.io", "JobSet"): "training",
    ("kubeflow.org", "PyTorchJob"): "training",
    ("kubeflow.org", "TFJob"): "training",
    ("kubeflow.org", "MPIJob"): "training",
    ("kubeflow.org", "XGBoostJob"): "training",
    ("kubeflow.org", "PaddleJob"): "training",
    ("kubeflow.org", "JAXJob"): "training",
    ("trainer.kubeflow.org", "TrainJob"): "training",
    ("ray.io", "RayJob"): "training",
    # A bare RayCluster runs whatever is submitted to it; batch work is the common case (corpus: low confidence).
    ("ray.io", "RayCluster"): "training",
    ("run.ai", "RunaiJob"): "training",
    # inference
    ("apps", "Deployment"): "inference",
    # A pod sees only its ReplicaSet when the owner lookup is not allowed (RBAC) or failed; ReplicaSets are
    # made by Deployments (the pod's `pod-template-hash` label), Knative revisions or Argo rollouts: all serve.
    ("apps", "ReplicaSet"): "inference",
    ("apps", "StatefulSet"): "inference",
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): "inference",
    ("serving.kserve.io", "InferenceService"): "inference",
    ("serving.kserve.io", "LLMInferenceService"): "inference",
    ("serving.kserve.io", "InferenceGraph"): "inference",
    ("serving.knative.dev", "Revision"): "inference",
    ("serving.knative.dev", "Configuration"): "inference",
    ("serving.knative.dev", "Service"): "inference",
    ("ray.io", "RayService"): "inference",
    # notebook
    ("kubeflow.org", "Notebook"): "notebook",
    # evaluation (TrustyAI's lm-eval-harness operator; the one evaluation kind the corpus documents)
    ("trustyai.opendatahub.io", "LMEvalJob"): "evaluation",
    # other: periodic jobs (canaries, backups), per-node agents
    ("batch", "CronJob"): "other",
    ("apps", "DaemonSet"): "other",
}

# Building blocks other controllers make their pods with (a Notebook's StatefulSet, an MPIJob's launcher Job, a KServe
# Deployment). When one is the top of the chain, the walk may have stopped short (no right to read it, or its owner is
# gone): the controllers' own labels are read first, and the kind decides only when none is there.
GENERIC = frozenset({("apps", "ReplicaSet"), ("apps", "StatefulSet"), ("apps", "Deployment"), ("batch", "Job")})

# (label, value or None for any value) -> class, in the order they are tried.
LABELS: tuple[tuple[str, str | None, str], ...] = (
    ("training.kubeflow.org/operator-name", None, "training"),
    ("training.kubeflow.org/job-name", None, "training"),
    ("jobset.sigs.k8s.io/jobset-name", None, "training"),
    ("batch.kubernetes.io/job-name", None, "training"),
    ("job-name", None, "training"),
    ("ray.io/is-ray-node", None, "training"),
    ("serving.kserve.io/inferenceservice", None, "inference"),
    ("leaderworkerset.sigs.k8s.io/name", None, "inference"),
    ("notebook-name", None, "notebook"),  # Kubeflow notebook controller
    ("component", "singleuser-server", "notebook"),  # JupyterHub (zero-to-jupyterhub kubespawner)
    ("app.kubernetes.io/name", "jupyter", "notebook"),  # Open OnDemand's Jupyter app
    ("workloadKind", "TrainingWorkload", "training"),  # Run:ai
    ("workloadKind", "InteractiveWorkload", "notebook"),
    ("workloadKind", "InferenceWorkload", "inference"),
    ("priorityClassName", "train", "training"),  # KAI scheduler's built-in priority classes
    ("priorityClassName", "build", "notebook"),  # KAI: build = interactive sessions
    ("priorityClassName", "inference", "inference"),
)


@dataclass(frozen=True)
class Owner:
    """One ownerReference: `api_version` as written (`batch/v1`, `v1`), the kind and the name."""

    api_version: str | None
    kind: str
    name: str | None = None

    @property
    def group(self) -> str:
        v = self.api_version or ""
        return v.split("/", 1)[0] if "/" in v else ""


@dataclass(frozen=True)
class Verdict:
    workload_class: str
    signal: str  # what decided it, for a person reading why (tests, logs)


def kind_class(owner: Owner) -> str | None:
    return KINDS.get((owner.group, owner.kind)) or KINDS.get((None, owner.kind))


def classify(
    namespace: str | None,
    labels: Mapping[str, str] | None,
    chain: Sequence[Owner] = (),
    rules: Iterable[ClassRule] = (),
    restart_policy: str | None = None,
) -> Verdict:
    """The class of a pod in `namespace` with `labels`, whose owners are `chain` (its direct controller first, the
    top owner last), under the config's [[classes]] `rules`. Never raises: an unknown pod is `other`."""
    labels = labels or {}
    own = labels.get(CLASS_LABEL)
    if own in WORKLOAD_CLASSES:
        return Verdict(own, f"label {CLASS_LABEL}")
    for i, rule in enumerate(rules):
        if rule.selects(namespace, labels):
            return Verdict(rule.workload_class, f"config classes[{i}]")
    if namespace in SYSTEM_NAMESPACES:
        return Verdict("other", f"system namespace {namespace}")
    by_owner = next(
        (Verdict(c, f"owner {o.kind} ({o.api_version})") for o in reversed(chain) if (c := kind_class(o))), None
    )
    if by_owner is not None and (chain[-1].group, chain[-1].kind) not in GENERIC:
        return by_owner
    by_label = next(
        (
            Verdict(c, f"label {k}" + (f"={v}" if v else ""))
            for k, v, c in LABELS
            if k in labels and (v is None or labels[k] == v)
        ),
        None,
    )
    if by_label is not None or by_owner is not None:
        return by_label or by_owner
    if not chain and restart_policy in ("Never", "OnFailure"):
        return Verdict("training", f"bare pod, restartPolicy {restart_policy}")
    return Verdict("other", "no signal")


def owner_of(ref) -> Owner:
    """An Owner from a kubernetes-client V1OwnerReference (or anything with kind, name and api_version)."""
    return Owner(getattr(ref, "api_version", None), ref.kind, getattr(ref, "name", None))


# --- objects as the API or kubectl prints them (dicts): the corpus, controller objects read as JSON, and the
# objects of admission reviews. Those come from anyone who may create a workload: a field of the wrong type is
# read as absent, never an exception (the webhook must answer every review).


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _str(value) -> str | None:
    return value if isinstance(value, str) else None


def _labels(value) -> dict[str, str]:
    return {k: v for k, v in _dict(value).items() if isinstance(k, str) and isinstance(v, str)}


def _refs(meta: Mapping) -> list[Owner]:
    refs = meta.get("ownerReferences")
    refs = [r for r in refs if isinstance(r, dict) and isinstance(r.get("kind"), str)] if isinstance(refs, list) else []
    ctl = [r for r in refs if r.get("controller") is True] or refs[:1]
    return [Owner(_str(r.get("apiVersion")), r["kind"], _str(r.get("name"))) for r in ctl]


def classify_object(obj: Mapping, rules: Iterable[ClassRule] = (), namespace: str | None = None) -> Verdict:
    """The class of the pods `obj` is or makes: a Pod; a controller (Job, JobSet, PyTorchJob, a KServe service, a
    Notebook, ...), as the top of its pods' chain; a Kueue Workload, whose owner is the job it admits; a `List`
    of one of those (its first item). `namespace`, when given, is the object's (an admission review says it where
    a new object's metadata may not)."""
    obj = _dict(obj)
    while obj.get("kind") == "List":  # a loop, not a call per level: a List nested deep is no recursion error
        items = obj.get("items") if isinstance(obj.get("items"), list) else []
        if not items:
            return Verdict("other", "empty List")
        obj = _dict(items[0])
    meta = _dict(obj.get("metadata"))
    ns = namespace if namespace is not None else _str(meta.get("namespace"))
    labels = _labels(meta.get("labels"))
    spec = _dict(obj.get("spec"))
    if obj.get("kind") == "Pod":
        return classify(ns, labels, _refs(meta), rules, _str(spec.get("restartPolicy")))
    if obj.get("kind") == "Workload" and str(obj.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
        # The pods of its first pod set: their template's labels and restart policy, under the Workload's owner
        # (Job, JobSet, ... or a plain Pod, which is no controller: then the pod's own shape speaks).
        sets = spec.get("podSets") if isinstance(spec.get("podSets"), list) and spec["podSets"] else [{}]
        template = _dict(_dict(sets[0]).get("template"))
        labels |= _labels(_dict(template.get("metadata")).get("labels"))
        chain = [o for o in _refs(meta) if o.kind != "Pod"]
        return classify(ns, labels, chain, rules, _str(_dict(template.get("spec")).get("restartPolicy")))
    # A controller: its pods' chain is this object, then its own owners.
    me = Owner(_str(obj.get("apiVersion")), str(obj.get("kind", "")), _str(meta.get("name")))
    template = _dict(_dict(spec.get("template")).get("metadata"))
    labels = {**_labels(template.get("labels")), **labels}
    return classify(ns, labels, [me, *_refs(meta)], rules)
