"""Every policy in every mode, a burst against a quota, a stale table, bad quantities: the decision, end to end
from a (derived) real AdmissionReview to the response."""

import copy
import datetime as dt
import json

import pytest

from gpuledger.config import EnforcerConfig
from gpuledger.enforcer.decide import Recent, Settings, Table, decide
from gpuledger.enforcer.policies import IdleHold, TenantRow
from gpuledger.enforcer.review import parse

from conftest import REPO

NOW = dt.datetime(2026, 11, 2, 12, tzinfo=dt.timezone.utc)
H100 = "NVIDIA-H100-80GB-HBM3"
RAW = json.loads((REPO / "tests" / "fixtures" / "admission" / "kubewarden_loadtesting_pod_create_v1.json").read_text())


def review(gpus, namespace="vision-train", dry_run=False, kind="Pod"):
    """DERIVED from the kubewarden Pod CREATE: namespace changed, GPUs on its first container, an H100 selector."""
    doc = copy.deepcopy(RAW)
    req = doc["request"]
    req["namespace"], req["dryRun"] = namespace, dry_run
    spec = req["object"]["spec"]
    spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    spec["nodeSelector"] = {"nvidia.com/gpu.product": H100}
    if kind == "Job":
        req["kind"] = {"group": "batch", "version": "v1", "kind": "Job"}
        req["object"] = {"metadata": {"name": "train"}, "spec": {"parallelism": 2, "template": {"spec": spec}}}
    return parse(json.dumps(doc).encode())


def holds(*spec):
    """IdleHolds from (pod, GPUs, hours idle at NOW)."""
    return tuple(IdleHold("vision-train", pod, H100, g, NOW.timestamp() - h * 3600) for pod, g, h in spec)


def table(idle=(), **kw):
    row = dict(tenant="vision", gpu_model=H100, allocated_gpus=14, quota_gpus=16)
    total = dict(
        tenant="vision",
        gpu_model=None,
        allocated_gpus=20,
        quota_gpus=None,
        budget_usd=1000,
        spent_usd=100,
        fairshare=0.6,
    )
    total.update(kw)
    return Table({("vision", H100): TenantRow(**row), ("vision", None): TenantRow(**total)}, NOW, {"vision": idle})


def settings(**modes):
    """Every policy enforced but those named (by the audit's policy name: quota, budget, idle-hog, fair-share)."""
    m = {"quota": "enforce", "budget": "enforce", "idle-hog": "enforce", "fair-share": "enforce"} | modes
    en = EnforcerConfig(**{f"{p.replace('-', '_')}_mode": v for p, v in m.items()}, idle_max_gpus=2, idle_min_h=2)
    return Settings({"vision-train": "vision"}, en)


def run(r, t=None, s=None, recent=None, mutate=False, now=NOW):
    """decide, then record what it admitted, as the server does."""
    recent = Recent(30) if recent is None else recent
    o = decide(r, t or table(), s or settings(), recent, now, mutate)
    recent.record(now.timestamp(), o)
    return o


def test_decide_changes_nothing_and_returns_what_to_record():
    recent = Recent(30)
    recent.add(NOW.timestamp() - 40, "vision", H100, 1)  # out of the 30 s window at NOW
    recent.add(NOW.timestamp() - 10, "vision", H100, 1)
    r = review("1")
    first = decide(r, table(), settings(), recent, NOW)
    # 14 held + 1 admitted 10 s ago + 1 asked = 16 of 16: admitted, the one 40 s ago not counted. Asked again,
    # the same answer: decide counted nothing itself.
    assert first.decision == "allow" and decide(r, table(), settings(), recent, NOW) == first
    assert recent.gpus(NOW.timestamp(), "vision", H100) == 1
    assert first.counted and (first.tenant, first.gpu_model, first.gpus) == ("vision", H100, 1)
    recent.record(NOW.timestamp(), first)  # what the server does with it
    assert recent.gpus(NOW.timestamp(), "vision", H100) == 2
    assert decide(r, table(), settings(), recent, NOW).decision == "deny"  # 14 + 2 + 1 > 16
    assert not decide(review("1", dry_run=True), table(), settings(), Recent(30), NOW).counted
    assert not decide(r, table(), settings(), Recent(30), NOW, mutate=True).counted


def test_within_every_policy_is_allowed_plainly():
    o = run(review("2"))
    assert o.decision == "allow" and o.response["response"] == {"uid": RAW["request"]["uid"], "allowed": True}


@pytest.mark.parametrize("mode,decision", [("enforce", "deny"), ("warn", "warn"), ("dry-run", "allow")])
def test_quota_in_each_mode(mode, decision):
    o = run(review("4"), s=settings(quota=mode))
    r = o.response["response"]
    assert o.decision == decision and o.policy == "quota" and o.mode == mode
    msg = f"tenant vision uses 14 of 16 {H100} GPUs; this Pod asks 4 (quota exceeded by 2)"
    assert o.reason == msg
    if mode == "enforce":
        assert r["allowed"] is False and r["status"] == {"code": 403, "reason": "Forbidden", "message": msg}
    elif mode == "warn":
        assert len(msg) <= 120 and r["allowed"] is True and r["warnings"] == [msg]
    else:
        assert r == {"uid": r["uid"], "allowed": True}


@pytest.mark.parametrize("mode,decision", [("enforce", "deny"), ("warn", "warn"), ("dry-run", "allow")])
def test_budget_in_each_mode(mode, decision):
    o = run(review("1"), t=table(spent_usd=1200), s=settings(budget=mode))
    assert o.decision == decision and o.policy == "budget"
    assert "tenant vision has spent $1,200 of its $1,000 monthly budget (120%)" in o.reason


def test_budget_warns_at_80_percent_in_every_mode():
    for mode in ("enforce", "warn", "dry-run"):
        o = run(review("1"), t=table(spent_usd=850), s=settings(budget=mode))
        assert o.decision == "warn" and o.response["response"]["warnings"] == [
            "tenant vision has spent $850 of its $1,000 monthly budget (85%)"
        ]


@pytest.mark.parametrize("mode,decision", [("enforce", "deny"), ("warn", "warn"), ("dry-run", "allow")])
def test_idle_hog_in_each_mode(mode, decision):
    idle = holds(("j-1", 2, 5), ("j-2", 1, 3), ("j-3", 4, 1.5))  # j-3 has idled less than T = 2 h: not counted
    o = run(review("1"), t=table(idle), s=settings(**{"idle-hog": mode}))
    assert o.decision == decision and o.policy == "idle-hog" and o.mode == mode
    assert o.reason == (
        "tenant vision holds 3 GPUs idle for 2 h or more (limit 2): vision-train/j-1 (2 GPUs, 5 h), "
        "vision-train/j-2 (1 GPU, 3 h); free them before this Pod asks 1 more"
    )
    r = o.response["response"]
    if mode == "warn":  # wrapped into 120-character warnings, the pod names kept
        assert all(len(w) <= 120 for w in r["warnings"]) and len(r["warnings"]) == 2
        assert r["warnings"][0] + " " + r["warnings"][1].removeprefix("… ") == o.reason
    # Within the limit once the short idler is left out, or when the GPUs have idled less than T:
    assert (
        run(review("1"), t=table(holds(("j-1", 2, 5), ("j-3", 4, 1.5))), s=settings(**{"idle-hog": mode})).policy
        is None
    )
    assert run(review("1"), t=table(holds(("j-1", 8, 1.9))), s=settings(**{"idle-hog": mode})).policy is None


def test_fair_share_priority_is_patched_on_a_job_in_mutate_only():
    import base64

    o = run(review("1", kind="Job"), mutate=True)
    ops = json.loads(base64.b64decode(o.response["response"]["patch"]))
    assert [op["value"] for op in ops][-2:] == ["gpu-high", "gpu-high"]
    assert (o.decision, o.policy, o.mode) == ("allow", "fair-share", "enforce")
    assert o.reason == "tenant vision's fair-share factor is 0.60: this Job gets priority class gpu-high"
    assert "patch" not in run(review("1", kind="Job")).response["response"]  # /validate never patches
    assert "patch" not in run(review("1"), mutate=True).response["response"]  # a Pod is never patched


@pytest.mark.parametrize("mode", ["warn", "dry-run"])
def test_fair_share_in_warn_and_dry_run_sets_nothing(mode):
    o = run(review("1", kind="Job"), t=table(fairshare=0.1), s=settings(**{"fair-share": mode}), mutate=True)
    r = o.response["response"]
    msg = "tenant vision's fair-share factor is 0.10: this Job would get priority class gpu-low"
    assert "patch" not in r and (o.policy, o.mode, o.reason) == ("fair-share", mode, msg)
    assert (o.decision, r.get("warnings")) == (("warn", [msg]) if mode == "warn" else ("allow", None))


def test_a_burst_cannot_overrun_the_quota():
    recent = Recent(30)
    outcomes = [run(review("1"), recent=recent, now=NOW + dt.timedelta(seconds=i)) for i in range(5)]
    assert [o.decision for o in outcomes] == ["allow", "allow", "deny", "deny", "deny"]  # 14 + 2 = 16
    later = run(review("1"), recent=recent, now=NOW + dt.timedelta(seconds=60))  # the table has caught up by then
    assert later.decision == "allow"


def test_dry_run_requests_are_decided_but_not_counted():
    recent = Recent(30)
    for _ in range(3):
        assert run(review("2", dry_run=True), recent=recent).decision == "allow"
    assert run(review("2"), recent=recent).decision == "allow"


def test_a_stale_table_falls_back_to_the_failure_mode():
    o = run(review("8"), t=table(), now=NOW + dt.timedelta(hours=1))
    assert o.decision == "warn" and o.policy == "stale-table"
    assert o.response["response"]["warnings"] == [
        "gpuledger's decision table is 60 min old (limit 15 min): admitted unchecked"
    ]
    s = Settings({"vision-train": "vision"}, EnforcerConfig(failure_mode="deny"))
    o = run(review("8"), s=s, now=NOW + dt.timedelta(hours=1))
    assert o.response["response"]["status"]["code"] == 503
    assert run(review("8"), t=Table({}, None)).policy == "stale-table"


@pytest.mark.parametrize("q", ["1.5", "500m", "abc", -1])
def test_bad_gpu_quantities_are_a_clear_400_in_the_review(q):
    o = run(review(q))
    st = o.response["response"]["status"]
    assert o.response["response"]["allowed"] is False and st["code"] == 400
    assert st["message"].startswith("Pod vision-train/nginx: spec.containers[0].resources.limits[nvidia.com/gpu]")


def test_no_gpus_or_no_tenant():
    assert run(review("0")).decision == "allow"
    o = run(review("2", namespace="elsewhere"))
    assert o.decision == "warn" and "namespace elsewhere belongs to no tenant" in o.reason


def test_the_node_label_spelling_of_a_model_finds_the_lake_spelling():
    # The lake names models as NVML does; a pod's node selector as GPU feature discovery labels them.
    nvml = "NVIDIA H100 80GB HBM3"
    t = Table(
        {("vision", nvml): TenantRow("vision", nvml, 14, 16), ("vision", None): TenantRow("vision", None, 14, None)},
        NOW,
    )
    o = run(review("4"), t=t)  # the request's nodeSelector is NVIDIA-H100-80GB-HBM3
    assert (
        o.decision == "deny"
        and o.reason == f"tenant vision uses 14 of 16 {nvml} GPUs; this Pod asks 4 (quota exceeded by 2)"
    )
    a100 = "NVIDIA A100-SXM4-80GB"  # NVML keeps this dash; the label has dashes throughout
    assert Table({("t", a100): TenantRow("t", a100, 0, 1)}, NOW).row("t", "NVIDIA-A100-SXM4-80GB").gpu_model == a100
    assert Table({("t", a100): TenantRow("t", a100, 0, 1)}, NOW).row("t", "NVIDIA-A100-SXM4-40GB") is None


def owned_pod(gpus, owner_kind="Job"):
    """DERIVED: the Pod a Job controller creates (an ownerReference with controller: true)."""
    r = copy.deepcopy(RAW)
    r["request"]["namespace"] = "vision-train"
    spec = r["request"]["object"]["spec"]
    spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    spec["nodeSelector"] = {"nvidia.com/gpu.product": H100}
    r["request"]["object"]["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": owner_kind, "name": "train", "uid": "j-uid", "controller": True}
    ]
    return parse(json.dumps(r).encode())


def test_a_job_is_counted_once_not_at_mutate_and_not_again_by_its_pods():
    # vision: 14 of 16 H100s. A Job of 2 x 1 GPU fits exactly.
    recent = Recent(30)
    m = run(review("1", kind="Job"), recent=recent, mutate=True)  # the API server calls /mutate first
    assert m.response["response"]["allowed"] is True and recent.gpus(NOW.timestamp(), "vision", H100) == 0
    v = run(review("1", kind="Job"), recent=recent)
    assert v.decision == "allow" and recent.gpus(NOW.timestamp(), "vision", H100) == 2
    # Its two pods, created by the Job controller a second later: decided with the Job, not counted again.
    for _ in range(2):
        p = run(owned_pod("1"), recent=recent, now=NOW + dt.timedelta(seconds=1))
        assert (p.decision, p.reason) == ("allow", "decided with its Job")
    assert recent.gpus(NOW.timestamp() + 1, "vision", H100) == 2
    # A pod of a kind gpuledger does not check at its owner's level (a ReplicaSet's) is checked itself: no room left.
    rs = run(owned_pod("1", "ReplicaSet"), recent=recent, now=NOW + dt.timedelta(seconds=2))
    assert rs.decision == "deny" and rs.reason.startswith("tenant vision uses 16 of 16")


def test_mutate_never_denies_on_a_policy_or_a_bad_quantity():
    over = run(review("8", kind="Job"), mutate=True)  # 16 asked with 14 of 16 held: /validate denies it
    assert over.response["response"]["allowed"] is True and over.policy == "fair-share"
    bad = run(review("1.5", kind="Job"), mutate=True)
    assert bad.response["response"] == {"uid": RAW["request"]["uid"], "allowed": True} and bad.policy is None


def test_mig_slices_count_as_their_share_of_a_gpu():
    r = copy.deepcopy(RAW)
    r["request"]["namespace"] = "vision-train"
    spec = r["request"]["object"]["spec"]
    spec["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-3g.40gb": "7"}}  # 7 x 3/7 = 3 GPUs
    spec["nodeSelector"] = {"nvidia.com/gpu.product": H100}
    o = run(parse(json.dumps(r).encode()))
    assert o.decision == "deny" and o.gpus == pytest.approx(3.0)
    assert o.reason == "tenant vision uses 14 of 16 NVIDIA-H100-80GB-HBM3 GPUs; this Pod asks 3 (quota exceeded by 1)"
    spec["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-1g.10gb": "7"}}  # 1 GPU: fits
    assert run(parse(json.dumps(r).encode())).decision == "allow"
