"""A quota grant end to end, on each store: a Pod over its tenant's H100 quota is denied by the webhook's decide path
(`gpuledger enforcer check`, the server's pure `decide` against the lake's decision table) before the request is
approved, admitted once an analytics run after the approval has the grant in its decisions, and denied again once a
run's `now` is past the grant's --until. Time moves with the analytics' `--to` and the steps' clock (the lake's
jobs end at END; those still running then hold their GPUs through every later `now`)."""

import datetime as dt

import pytest

from gpuledger import quota_requests as qr
from gpuledger.query import Lake

from conftest import END

UTC = dt.timezone.utc
H100 = "NVIDIA H100 80GB HBM3"
T_END = dt.datetime.fromtimestamp(END, UTC)
T1, T2, T3 = (T_END + dt.timedelta(hours=h) for h in (1, 2, 4))  # before the approval, during the grant, after it
POD = """
apiVersion: v1
kind: Pod
metadata: {name: big, namespace: vision-train}
spec:
  nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
  containers: [{name: train, image: trainer:1, resources: {limits: {nvidia.com/gpu: "3"}}}]
"""
CONFIG = """
[[tenants]]
name = "vision"
namespaces = ["vision-train"]
[tenants.quota]
"H100" = 1
"*" = 100
"""


def test_a_pod_is_denied_before_the_approval_admitted_during_the_grant_and_denied_after(
    cli, analysed_store, tmp_path, monkeypatch
):
    lake = str(analysed_store)
    cfg = tmp_path / "quota.toml"
    cfg.write_text(CONFIG)
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD)
    clock = [T1]
    monkeypatch.setattr(qr, "utc_now", lambda: clock[0])
    monkeypatch.setenv("GPULEDGER_USER", "alice")

    def analyse_and_check(at):
        r = cli("analyze", "--config", cfg, "--lake", lake, "--to", at.isoformat())
        assert r.exit_code == 0, r.output
        with Lake(analysed_store) as q:
            rows = q.execute(
                "SELECT gpu_model, allocated_gpus, quota_gpus FROM decisions WHERE tenant = 'vision' "
                "AND computed_at = (SELECT max(computed_at) FROM decisions)"
            ).rows
        quota = {m: (held, limit) for m, held, limit in rows}
        return quota, cli("enforcer", "check", pod, "--config", cfg, "--lake", lake, "--at", at.isoformat())

    quota, r = analyse_and_check(T1)
    held = quota[H100][0]
    assert quota[H100][1] == 1.0 and quota[None][1] == 100.0
    assert r.exit_code == 3 and f"tenant vision uses {held:g} of 1 {H100} GPUs; this Pod asks 3" in r.output, r.output

    # Just enough for the Pod: held + 3 = 1 + gpus.
    gpus = held + 2
    args = ["--tenant", "vision", "--model", "H100", "--gpus", f"{gpus:g}", "--reason", "a 3-GPU run for the demo"]
    r = cli("quota", "request", "--config", cfg, "--lake", lake, *args, "--from", T_END.isoformat(), "--until",
            (T_END + dt.timedelta(hours=3)).isoformat())  # fmt: skip
    assert r.exit_code == 0, r.output
    request_id = r.stdout.strip()
    quota, r = analyse_and_check(T1)  # pending: no change
    assert quota[H100] == (held, 1.0) and r.exit_code == 3, r.output

    clock[0] = T1 + dt.timedelta(minutes=10)
    r = cli("quota", "approve", request_id, "--by", "bob", "--config", cfg, "--lake", lake)
    assert r.exit_code == 0, r.output
    quota, r = analyse_and_check(T2)
    # The H100 row's quota 1 + gpus, the all-models row's 100 + gpus; the Pod fits exactly: held + 3 <= 1 + gpus.
    assert quota[H100] == (held, 1.0 + gpus) and quota[None][1] == 100.0 + gpus
    assert r.exit_code == 0 and r.output.startswith("Pod vision-train/big: admitted"), r.output

    quota, r = analyse_and_check(T3)  # --until was T_END + 3 h: expired
    assert quota[H100] == (held, 1.0) and quota[None][1] == 100.0
    assert r.exit_code == 3 and f"tenant vision uses {held:g} of 1 {H100} GPUs; this Pod asks 3" in r.output, r.output
    assert [s["state"] for s in qr.states(analysed_store, T3).to_dicts()] == ["expired"]


@pytest.mark.parametrize("at", [T1, T2])
def test_a_grant_approved_after_the_analytics_now_is_not_in_its_decisions(at, tmp_path, monkeypatch):
    """As of a run's `now`, only the steps taken by then count: a re-analysis of an earlier hour gives the decisions
    it gave then (an approval at T2 is not in a run at T1)."""
    from gpuledger.config import load

    cfg = tmp_path / "quota.toml"
    cfg.write_text(CONFIG)
    monkeypatch.setattr(qr, "utc_now", lambda: T_END)
    lake = tmp_path / "lake"
    request_id = qr.request(lake, load(cfg), [H100], "vision", "H100", "2", "2026-11-02", "2026-11-03", "why", "al")
    qr.decide(lake, request_id, "approve", "bob", now=T2)
    assert [g.request_id for g in qr.active_grants(lake, at)] == ([] if at == T1 else [request_id])
