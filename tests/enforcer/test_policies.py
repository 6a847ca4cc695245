"""Each policy on numbers worked out by hand, and the priority patch for each kind."""

import pytest

from gpuledger.enforcer.policies import IdleHold, TenantRow, budget, idle_hog, priority_class, priority_patch, quota

H100 = "NVIDIA H100 80GB HBM3"
ROW = TenantRow("vision", H100, allocated_gpus=14, quota_gpus=16, budget_usd=10_000, spent_usd=8_500, fairshare=0.3)


def test_quota_within_and_over():
    assert not quota(ROW, 2, 0, "Pod", "enforce").breach  # 14 + 2 = 16: at the quota is allowed
    v = quota(ROW, 4, 0, "Job", "enforce")
    assert v.breach and v.message == f"tenant vision uses 14 of 16 {H100} GPUs; this Job asks 4 (quota exceeded by 2)"


def test_quota_counts_what_was_just_admitted():
    """A burst: the decision table does not know the last seconds' admissions yet."""
    assert quota(ROW, 1, 1, "Pod", "enforce").breach is False  # 14 + 1 + 1 = 16
    v = quota(ROW, 1, 2, "Pod", "enforce")
    assert v.breach and "uses 16 of 16" in v.message


def test_no_quota_or_no_gpus_is_no_verdict():
    assert quota(TenantRow("t", None, 100, None), 8, 0, "Pod", "enforce") is None
    assert quota(ROW, 0, 0, "Pod", "enforce") is None
    assert quota(None, 4, 0, "Pod", "enforce") is None


def test_budget_warns_at_80_percent_and_breaks_when_spent():
    v = budget(ROW, 1, "Pod", "enforce")
    assert (
        not v.breach
        and v.warning
        and v.message == ("tenant vision has spent $8,500 of its $10,000 monthly budget (85%)")
    )
    spent = TenantRow("vision", None, 0, None, budget_usd=10_000, spent_usd=10_250)
    v = budget(spent, 2, "Job", "warn")
    assert v.breach and v.mode == "warn" and v.message.endswith("(102%); this Job asks 2 more GPUs")
    low = TenantRow("vision", None, 0, None, budget_usd=10_000, spent_usd=100)
    v = budget(low, 1, "Pod", "enforce")
    assert not v.breach and not v.warning and v.message == ""


def test_a_gpu_hour_budget_alone_or_beside_a_usd_one():
    hours = TenantRow("nlp", None, 0, None, budget_gpu_h=500, spent_gpu_h=410)
    v = budget(hours, 1, "Pod", "enforce")
    assert (
        v.warning and not v.breach and v.message == "tenant nlp has used 410 of its 500 GPU-hour monthly budget (82%)"
    )
    over = TenantRow("nlp", None, 0, None, budget_gpu_h=500, spent_gpu_h=512)
    v = budget(over, 2, "Job", "enforce")
    assert v.breach and v.message == (
        "tenant nlp has used 512 of its 500 GPU-hour monthly budget (102%); this Job asks 2 more GPUs"
    )
    # Both budgets: the GPU-hour breach outranks the USD warning
    both = TenantRow("nlp", None, 0, None, budget_usd=1000, spent_usd=900, budget_gpu_h=500, spent_gpu_h=600)
    assert budget(both, 1, "Pod", "warn").message.startswith("tenant nlp has used 600 of its 500 GPU-hour")
    assert budget(TenantRow("nlp", None, 0, None), 1, "Pod", "enforce") is None  # no budget at all
    low = TenantRow("nlp", None, 0, None, budget_gpu_h=500, spent_gpu_h=10)
    v = budget(low, 1, "Pod", "enforce")
    assert not v.breach and not v.warning and v.message == ""


def test_idle_hog_names_the_idle_pods_the_most_gpus_first():
    now = 1_000_000.0
    h = 3600.0
    holds = (
        IdleHold("ml", "train-a", H100, 1.0, now - 3 * h),  # one pod on two GPUs: 2 GPUs, longest 4.5 h
        IdleHold("ml", "train-a", H100, 1.0, now - 4.5 * h),
        IdleHold("ml", "notebook", H100, 0.5, now - 26 * h),
        IdleHold("ml", "fresh", H100, 4.0, now - 0.5 * h),  # idle less than T: not counted, not named
    )
    v = idle_hog("vision", holds, now, 1, "Pod", "enforce", max_idle_gpus=2, min_idle_s=2 * h)
    assert v.breach and v.message == (
        "tenant vision holds 2.5 GPUs idle for 2 h or more (limit 2): ml/train-a (2 GPUs, 4.5 h), "
        "ml/notebook (0.5 GPUs, 26 h); free them before this Pod asks 1 more"
    )
    assert idle_hog("vision", holds, now, 1, "Pod", "enforce", max_idle_gpus=2.5, min_idle_s=2 * h) is None
    assert idle_hog("vision", holds, now, 1, "Pod", "enforce", max_idle_gpus=2, min_idle_s=5 * h) is None  # 0.5 left
    assert idle_hog("vision", holds, now, 0, "Pod", "enforce", max_idle_gpus=0, min_idle_s=0) is None  # asks none
    many = tuple(IdleHold("ml", f"p{i}", H100, 1.0, now - 3 * h) for i in range(5))
    v = idle_hog("vision", many, now, 1, "Job", "warn", max_idle_gpus=1, min_idle_s=h)
    assert v.message.endswith("ml/p2 (1 GPU, 3 h) and 2 more; free them before this Job asks 1 more")


@pytest.mark.parametrize(
    "factor,cls", [(0.9, "gpu-high"), (0.5, "gpu-high"), (0.3, "gpu-normal"), (0.01, "gpu-low"), (None, None)]
)
def test_fair_share_maps_to_a_class(factor, cls):
    classes = ((0.5, "gpu-high"), (0.25, "gpu-normal"), (0.0, "gpu-low"))
    assert priority_class(factor, classes) == cls


def test_priority_goes_on_the_template_or_the_kueue_label_never_a_pod():
    assert priority_patch("Pod", {"metadata": {}, "spec": {}}, "gpu-high") == []
    ops = priority_patch("Job", {"metadata": {}}, "gpu-low")
    assert ops == [
        {"op": "add", "path": "/metadata/labels", "value": {}},
        {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1priority-class", "value": "gpu-low"},
        {"op": "add", "path": "/spec/template/spec/priorityClassName", "value": "gpu-low"},
    ]
    ops = priority_patch("JobSet", {"metadata": {"labels": {"a": "b"}}}, "gpu-high")
    assert ops == [{"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1priority-class", "value": "gpu-high"}]
