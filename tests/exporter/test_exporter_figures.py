"""The exporter's figures on a hand-built lake (exporter_case.py), each value worked out by hand; the counters stay
monotone across rebuilds; a lake with no analytics serves only the exporter's own metrics."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from gpuledger.analytics.exporter import Exporter
from gpuledger.analytics.exporter.server import registry

from exporter_case import B200, H100, RUN, health_rows, names, samples, value, write, write_case

NOW = RUN.timestamp() + 90  # a scrape 90 s after the run


@pytest.fixture
def case(tmp_path):
    lake = tmp_path / "lake"
    write_case(lake)
    return lake


def scrape(lake, **kw):
    exp = Exporter(lake, idle_min_h=2.0, clock=lambda: NOW, **kw)
    assert exp.refresh()
    return exp, samples(registry(exp))


def test_tenant_figures_of_the_last_complete_hour(case):
    _, s = scrape(case)
    a = dict(cluster="default", tenant="a", gpu_model=H100)
    # two 1-GPU jobs the whole hour, one busy, one idle; the hour before (5 GPUs) left out
    assert value(s, "gpuledger_tenant_allocated_gpus", **a) == 2.0
    assert value(s, "gpuledger_tenant_busy_gpus", **a) == 1.0
    assert value(s, "gpuledger_tenant_idle_gpus", **a) == 1.0
    # a job of no tenant, and a tenant and model the config does not know: exported, not dropped
    assert value(s, "gpuledger_tenant_allocated_gpus", cluster="default", tenant="unknown", gpu_model=H100) == 0.5
    assert value(s, "gpuledger_tenant_allocated_gpus", cluster="default", tenant="ghost", gpu_model=B200) == 4.0
    # idle for at least idle_min_h (2 h): the GPU idle 3 h, not the half idle 1 h
    assert value(s, "gpuledger_tenant_idle_held_gpus", **a) == 1.0
    # November: 8 days x 10 + 30 own, 8 x 1 + 3 idle share; October's 100 and the null tenant's 7 left out
    assert value(s, "gpuledger_tenant_cost_usd", **a) == 8 * 10 + 30
    assert value(s, "gpuledger_tenant_idle_share_usd", **a) == 8 * 1 + 3
    assert ("gpuledger_tenant_cost_usd", (("cluster", "default"), ("gpu_model", H100), ("tenant", "unknown"))) not in s
    assert value(s, "gpuledger_tenant_pending_jobs", **a) == 2
    assert value(s, "gpuledger_tenant_pending_gpus", **a) == 1 + 2
    assert value(s, "gpuledger_tenant_pending_gpus", cluster="default", tenant="ghost", gpu_model=B200) == 8
    assert value(s, "gpuledger_tenant_quota_gpus", **a) == 8
    assert value(s, "gpuledger_tenant_quota_headroom_gpus", **a) == 6
    assert value(s, "gpuledger_tenant_quota_gpus", cluster="default", tenant="a", gpu_model="*") == 16
    assert value(s, "gpuledger_tenant_quota_headroom_gpus", cluster="default", tenant="a", gpu_model="*") == 14


def test_budget_projection_spend_change_and_efficiency(case):
    _, s = scrape(case)
    a = dict(cluster="default", tenant="a")
    assert value(s, "gpuledger_tenant_budget_usd", **a) == 1000
    assert value(s, "gpuledger_tenant_budget_spent_usd", **a) == 121
    assert value(s, "gpuledger_tenant_budget_used_ratio", **a) == pytest.approx(121 / 1000)
    # burn: Nov 3..9 = 6 x 11 + 33 = 99 USD over 7 days; left: Nov 10 00:30 to Dec 1 00:00 = 20 d 23.5 h
    burn, left_d = 99 / 7, 20 + 23.5 / 24
    assert value(s, "gpuledger_tenant_budget_projected_ratio", **a) == pytest.approx((121 + burn * left_d) / 1000)
    assert value(s, "gpuledger_tenant_fairshare_factor", **a) == 0.5
    # the last complete day (Nov 9): 33; the 7 before it (Nov 2..8): 11 a day
    assert value(s, "gpuledger_tenant_spend_last_day_usd", **a) == 33
    assert value(s, "gpuledger_tenant_spend_baseline_usd", **a) == pytest.approx(11)
    # Nov 9's job-hours of a: allocated 1 + 1 + 5 + 24, busy 1 + 0 + 5 + 12
    assert value(s, "gpuledger_tenant_efficiency_ratio", **a) == pytest.approx(18 / 31)
    assert value(s, "gpuledger_tenant_efficiency_ratio", cluster="default", tenant="ghost") == 0.75


def test_model_figures(case):
    _, s = scrape(case)
    m = dict(cluster="default", gpu_model=H100)
    assert value(s, "gpuledger_fleet_gpus", **m) == 8
    assert value(s, "gpuledger_fleet_allocated_gpus", **m) == 2.5
    assert value(s, "gpuledger_fleet_busy_gpus", **m) == 1.25
    assert value(s, "gpuledger_fleet_inventory_gpus", **m) == 8  # n2 retired (last seen in October)
    assert value(s, "gpuledger_fleet_inventory_gpus", cluster="default", gpu_model=B200) == 4
    assert value(s, "gpuledger_fleet_lost_gpus", **m) == 1  # g1 2 h ago; g2 30 h ago is outside the 24 h
    assert value(s, "gpuledger_fleet_pending_jobs", **m) == 2
    assert value(s, "gpuledger_fleet_pending_gpus", cluster="default", gpu_model=B200) == 8
    # waits 0, 100, 200, 300, 400 s, linear interpolation: p50 200, p90 300 + 0.6 x 100, p99 300 + 0.96 x 100
    assert value(s, "gpuledger_queue_wait_seconds", **m, quantile="0.5") == pytest.approx(200)
    assert value(s, "gpuledger_queue_wait_seconds", **m, quantile="0.9") == pytest.approx(360)
    assert value(s, "gpuledger_queue_wait_seconds", **m, quantile="0.99") == pytest.approx(396)
    assert value(s, "gpuledger_queue_wait_jobs", **m) == 5
    assert value(s, "gpuledger_fragmentation_ratio", **m) == 0.25  # the 00:00 hour, at or before the run
    assert value(s, "gpuledger_fragmentation_free_gpus", **m) == 4
    stranded = {n: value(s, "gpuledger_fragmentation_stranded_gpus", **m, job_gpus=n) for n in ("1", "2", "4", "8")}
    assert stranded == {"1": 1, "2": 0, "4": 2, "8": 4}
    info = value(
        s, "gpuledger_gpu_model_info", **m, memory_bytes="85520809984", driver_version="550.54.15", vendor="nvidia"
    )
    assert info == 1
    b200 = dict(cluster="default", gpu_model=B200, memory_bytes=str(192 * 2**30), driver_version="unknown")
    b200["vendor"] = "nvidia"  # from its name: no samples of it carry a vendor
    assert value(s, "gpuledger_gpu_model_info", **b200) == 1
    # health: counters over the whole table; the node missing from the inventory is model "unknown"
    assert value(s, "gpuledger_gpu_xid_events_total", **m, xid="79") == 2
    assert value(s, "gpuledger_gpu_xid_events_total", **m, xid="48") == 1
    assert value(s, "gpuledger_gpu_xid_events_total", cluster="default", gpu_model="unknown", xid="13") == 1
    assert value(s, "gpuledger_gpu_ecc_events_total", **m) == 1
    assert value(s, "gpuledger_gpu_lost_events_total", **m) == 2
    assert value(s, "gpuledger_analytics_last_run_timestamp_seconds", cluster="default") == RUN.timestamp()
    assert value(s, "gpuledger_analytics_last_run_age_seconds", cluster="default") == 90
    assert value(s, "gpuledger_exporter_up") == 1


def test_counters_never_decrease_across_rebuilds(case):
    exp, before = scrape(case)
    xid79 = dict(cluster="default", gpu_model=H100, xid="79")
    state = exp.lake.state_folder("analytics")
    ev = dict(cluster="default", node="n1", source="sim")

    def commit(rows, n):
        for f in (case / "health_events").rglob("*.parquet"):  # the table rewritten whole, as a rebuild would
            f.unlink()
        write(case, "health_events", rows, f"v{n}")
        state.mkdir(parents=True, exist_ok=True)
        (state / "commit.json").write_text(str(n))  # the analytics' state changed: the exporter rebuilds

    # The day's events rewritten with fewer (a compaction that lost rows, a re-import): the counter holds.
    commit([r for r in health_rows(ev) if r.get("code") != 79], 1)
    assert exp.refresh()
    held = samples(registry(exp))
    assert value(held, "gpuledger_gpu_xid_events_total", **xid79) == 2
    assert value(held, "gpuledger_gpu_lost_events_total", cluster="default", gpu_model=H100) == 2
    # More events: it rises from there.
    commit(health_rows(ev, extra_79=3), 2)
    assert exp.refresh()
    assert value(samples(registry(exp)), "gpuledger_gpu_xid_events_total", **xid79) == 5
    assert not exp.refresh()  # nothing committed since: no rebuild


def test_no_analytics_serves_only_the_exporters_own_metrics(tmp_path):
    lake = tmp_path / "lake"
    # raw telemetry only, health events included: still no figures, and no zeros that look like data
    t = dt.datetime(2026, 11, 9, tzinfo=dt.timezone.utc)
    write(
        lake,
        "health_events",
        [{"ts": t, "cluster": "default", "node": "n1", "kind": "xid", "code": 79, "source": "sim"}],
    )
    _, s = scrape(lake)
    assert names(s) == {
        "gpuledger_exporter_up",
        "gpuledger_exporter_snapshot_age_seconds",
        "gpuledger_exporter_snapshot_build_seconds",
        "gpuledger_exporter_snapshot_errors_total",
    }


def test_before_the_first_read_only_up_and_errors(case):
    exp = Exporter(case, idle_min_h=2.0, clock=lambda: NOW)
    assert names(samples(registry(exp))) == {"gpuledger_exporter_up", "gpuledger_exporter_snapshot_errors_total"}


def test_a_failed_rebuild_keeps_the_previous_snapshot_and_is_counted(case):
    calls = []

    def reader(lake):
        from gpuledger.analytics.exporter.tables import read

        calls.append(1)
        if len(calls) > 1:
            raise OSError("the lake went away")
        return read(lake)

    exp = Exporter(case, idle_min_h=2.0, clock=lambda: NOW, reader=reader, check_every_s=0.05)
    exp.start()
    try:
        deadline = time.monotonic() + 20
        while exp.snapshot is None and time.monotonic() < deadline:
            time.sleep(0.05)
        state = exp.lake.state_folder("analytics")
        state.mkdir(parents=True, exist_ok=True)
        (state / "commit.json").write_text("1")
        while exp.errors == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        exp.stop()
    s = samples(registry(exp))
    assert value(s, "gpuledger_exporter_snapshot_errors_total") >= 1
    assert value(s, "gpuledger_fleet_gpus", cluster="default", gpu_model=H100) == 8  # still the last good one


def test_a_port_in_use_is_one_line(cli, case):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        r = cli("exporter", "--lake", case, "--port", busy.getsockname()[1])
    assert r.exit_code == 1 and r.output.count("\n") == 1
    assert "cannot serve the exporter on 127.0.0.1:" in r.output and "[exporter] port" in r.output


def test_a_model_with_no_waiting_job_or_lost_gpu_says_zero_not_nothing():
    """The fleet's models are known, so "no job waits" is 0 there, not a series that vanishes (and reads as no
    data); a model only `frame` names (no fleet row) is kept; no fleet at all (no analytics): nothing is invented."""
    import polars as pl

    from gpuledger.analytics.exporter.figures import _known_zeros

    fleet = pl.DataFrame({"cluster": ["c", "c", "c"], "gpu_model": ["H100", "L40S", "H100"]})
    pending = pl.DataFrame(
        {"cluster": ["c", "c", "c"], "tenant": ["a", "b", "a"], "gpu_model": ["H100", "H100", "B200"],
         "jobs": [2, 1, 1], "gpus": [3, 8, 4]}
    )  # fmt: skip
    got = _known_zeros(pending, fleet, "jobs", "gpus").sort("gpu_model")
    assert got.rows() == [("c", "B200", 1.0, 4.0), ("c", "H100", 3.0, 11.0), ("c", "L40S", 0.0, 0.0)]
    assert _known_zeros(pending.clear(), fleet, "jobs").sort("gpu_model").rows() == [
        ("c", "H100", 0.0),
        ("c", "L40S", 0.0),
    ]
    assert _known_zeros(pending, fleet.clear(), "jobs").equals(pending)
