"""Kubernetes objects to run the webhook: its Namespace, ServiceAccount and RBAC, the TLS Secret, the config's
ConfigMap, a Deployment of 2+ replicas spread over nodes with a PodDisruptionBudget, its Service, and the
Validating- and MutatingWebhookConfiguration. Plain dicts, dumped as one YAML stream; the lake is a
ReadWriteMany PersistentVolumeClaim (every replica writes its audit there), named, not created.

Defaults follow ENFORCER_NOTES.md §1.2-1.3:
- failurePolicy Ignore: a webhook outage must not stop the cluster's writes; the audit catches what slipped by.
- timeoutSeconds 3.
- sideEffects NoneOnDryRun: a dry run changes nothing (it is not counted against quotas; its audit row is a log
  marked dry_run).
- kube-system and the webhook's own namespace excluded by namespaceSelector: no self-hosted deadlock.
- matchConditions, so the API server calls only for workloads that ask for NVIDIA devices.
"""

from __future__ import annotations

import base64

import yaml

APP = "gpuledger-enforcer"
# One webhook entry per kind family, each with the CEL that finds its pod template's GPU limits.
_GPU = "has(c.resources) && has(c.resources.limits) && c.resources.limits.exists(k, k.startsWith('nvidia.com/'))"
_KINDS = (
    ("pods", "", ["pods"], "object.spec.containers.exists(c, " + _GPU + ")"),
    ("jobs", "batch", ["jobs"], "object.spec.template.spec.containers.exists(c, " + _GPU + ")"),
    ("jobsets", "jobset.x-k8s.io", ["jobsets"], None),
    ("ray", "ray.io", ["rayjobs", "rayclusters"], None),
    ("kueue", "kueue.x-k8s.io", ["workloads"], None),
)


def objects(
    namespace: str = "gpuledger",
    image: str = "gpuledger:latest",
    replicas: int = 2,
    ca_pem: bytes | None = None,
    cert_pem: bytes | None = None,
    key_pem: bytes | None = None,
    lake_claim: str = "gpuledger-lake",
    service: str = APP,
    config_toml: str | None = None,
) -> list[dict]:
    labels = {"app.kubernetes.io/name": APP}
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    out: list[dict] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"app.kubernetes.io/part-of": "gpuledger"}},
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": APP, "namespace": namespace}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": APP},
            # Namespaces only: the tenant of a namespace may come from its labels. Decisions come from the lake.
            "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": APP},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": APP},
            "subjects": [{"kind": "ServiceAccount", "name": APP, "namespace": namespace}],
        },
    ]
    if cert_pem and key_pem:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{APP}-tls", "namespace": namespace},
                "type": "kubernetes.io/tls",
                "data": {"tls.crt": b64(cert_pem), "tls.key": b64(key_pem)},
            }
        )
    out.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{APP}-config", "namespace": namespace},
            "data": {"gpuledger.toml": config_toml if config_toml is not None else "# gpuledger's built-in defaults\n"},
        }
    )
    probe = lambda path: {"httpGet": {"path": path, "port": 8443, "scheme": "HTTPS"}, "periodSeconds": 10}  # noqa: E731
    out.append(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": APP, "namespace": namespace, "labels": labels},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": APP,
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": 65532,
                            "fsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        # Replicas on different nodes: losing one node must not take every replica with it.
                        "affinity": {
                            "podAntiAffinity": {
                                "preferredDuringSchedulingIgnoredDuringExecution": [
                                    {
                                        "weight": 100,
                                        "podAffinityTerm": {
                                            "labelSelector": {"matchLabels": labels},
                                            "topologyKey": "kubernetes.io/hostname",
                                        },
                                    }
                                ]
                            }
                        },
                        "containers": [
                            {
                                "name": "enforcer",
                                "image": image,
                                "args": [
                                    "enforcer",
                                    "serve",
                                    "--cert",
                                    "/tls/tls.crt",
                                    "--key",
                                    "/tls/tls.key",
                                    "--lake",
                                    "/lake",
                                    "--port",
                                    "8443",
                                ],
                                # The audit spool lives outside the lake, in the state folder (spool.default_dir):
                                # on the state volume, as the root filesystem is read-only
                                "env": [
                                    {"name": "GPULEDGER_CONFIG", "value": "/config/gpuledger.toml"},
                                    {"name": "XDG_STATE_HOME", "value": "/var/lib/gpuledger"},
                                ],
                                "ports": [{"containerPort": 8443, "name": "https"}],
                                "readinessProbe": probe("/readyz"),
                                "livenessProbe": probe("/healthz"),
                                # Limits too, as deploy/ sets on every container; the decision table is small
                                "resources": {
                                    "requests": {"cpu": "250m", "memory": "256Mi"},
                                    "limits": {"cpu": "1", "memory": "512Mi"},
                                },
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": [
                                    {"name": "tls", "mountPath": "/tls", "readOnly": True},
                                    {"name": "lake", "mountPath": "/lake"},
                                    {"name": "config", "mountPath": "/config", "readOnly": True},
                                    {"name": "state", "mountPath": "/var/lib/gpuledger"},
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "tls", "secret": {"secretName": f"{APP}-tls"}},
                            {"name": "lake", "persistentVolumeClaim": {"claimName": lake_claim}},
                            {"name": "config", "configMap": {"name": f"{APP}-config"}},
                            # outlives a container restart; a graceful stop flushes it to the lake (docs/enforcer.md)
                            {"name": "state", "emptyDir": {"sizeLimit": "1Gi"}},
                        ],
                    },
                },
            },
        }
    )
    out.append(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": APP, "namespace": namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
        }
    )
    out.append(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": service, "namespace": namespace, "labels": labels},
            "spec": {"selector": labels, "ports": [{"name": "https", "port": 443, "targetPort": 8443}]},
        }
    )
    for kind, path in (("ValidatingWebhookConfiguration", "/validate"), ("MutatingWebhookConfiguration", "/mutate")):
        hooks = []
        for name, group, resources, cel in _KINDS:
            if name == "pods" and kind.startswith("Mutating"):
                continue  # a Pod is never patched (priority goes on its template's owner): no call to make
            hook = {
                "name": f"{name}.{path.strip('/')}.gpuledger.io",
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"service": {"name": service, "namespace": namespace, "path": path, "port": 443}},
                "rules": [
                    {
                        "apiGroups": [group],
                        "apiVersions": ["*"],
                        "operations": ["CREATE"],
                        "resources": resources,
                        "scope": "Namespaced",
                    }
                ],
                "failurePolicy": "Ignore",
                "timeoutSeconds": 3,
                "sideEffects": "NoneOnDryRun",
                "matchPolicy": "Equivalent",
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": ["kube-system", namespace],
                        }
                    ]
                },
            }
            if ca_pem:
                hook["clientConfig"]["caBundle"] = b64(ca_pem)
            if cel:
                hook["matchConditions"] = [{"name": "asks-for-nvidia-devices", "expression": cel}]
            if kind.startswith("Mutating"):
                hook["reinvocationPolicy"] = "Never"
            hooks.append(hook)
        out.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": APP},
                "webhooks": hooks,
            }
        )
    return out


def dump(docs: list[dict]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)
