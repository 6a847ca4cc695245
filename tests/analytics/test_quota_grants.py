"""Grants in the decisions, by hand: an approved quota request in force raises the quota of the rows that cap its model
and of the tenant's all-models row; overlapping grants add up; a row with no quota stays without one
(analytics/decisions.py, docs/governance.md)."""

import datetime as dt

import polars as pl

from gpuledger.analytics.decisions import decisions
from gpuledger.config import Tenant
from gpuledger.quota_requests import Grant

from builders import at

NOW = at(20, 12)
H100, A100, L40S = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S"
MODELS = [H100, A100, L40S]
DAY = dt.timedelta(days=1)


def grant(request_id, tenant, model, gpus, cluster="default"):
    return Grant(request_id, tenant, model, gpus, NOW - DAY, NOW + DAY, cluster)


def rows(tenants, allocs, grants=()):
    names = [t.name for t in tenants]
    spent = pl.DataFrame({"tenant": names, "usd": [0.0] * len(names), "gpu_h": [0.0] * len(names)})
    usage = pl.DataFrame({"tenant": names, "usage_decayed": [0.0] * len(names)})
    idle = pl.DataFrame(schema={"tenant": pl.String, "gpu_model": pl.String, "idle_gpus": pl.Float64})
    out = decisions(pl.DataFrame(allocs), spent, usage, idle, tenants, NOW, MODELS, grants)
    cols = ("allocated_gpus", "quota_gpus", "headroom_gpus")
    return {(r["tenant"], r["gpu_model"]): tuple(r[c] for c in cols) for r in out.to_dicts()}


# vision: its own H100 quota of 4 and 10 of any model; holds 3 H100 and 5 A100 (8 in all).
VISION = Tenant("vision", ("vision",), 1.0, {"H100": 4, "*": 10})
HELD = {"tenant": ["vision"] * 2, "gpu_model": [H100, A100], "share": [3.0, 5.0]}


def test_without_grants_the_quotas_are_the_configs():
    assert rows((VISION,), HELD) == {
        ("vision", H100): (3.0, 4.0, 1.0),  # its own key: 4 - 3 held
        ("vision", A100): (5.0, 10.0, 2.0),  # "*": 10 - 8 held in all
        ("vision", None): (8.0, 10.0, 2.0),
    }


def test_overlapping_grants_add_up_on_the_model_rows_and_the_total():
    # Two grants on H100 in force together, one naming it by a key's word, one by its full name: 2 + 1 = 3 more.
    grants = [grant("q-1", "vision", "H100", 2.0), grant("q-2", "vision", H100, 1.0)]
    assert rows((VISION,), HELD, grants) == {
        ("vision", H100): (3.0, 7.0, 4.0),  # 4 + 3 = 7; 7 - 3 held
        ("vision", A100): (5.0, 10.0, 2.0),  # not named by the grants: unchanged
        ("vision", None): (8.0, 13.0, 5.0),  # 10 + 3 = 13; 13 - 8 held
    }


def test_a_grant_on_a_model_capped_by_star_alone_raises_that_row_and_the_total_and_adds_its_row():
    # L40S has no key of its own and vision holds none: a grant of 4 gives it a row, capped by "*" + 4 on the total.
    assert rows((VISION,), HELD, [grant("q-3", "vision", "L40S", 4.0)]) == {
        ("vision", H100): (3.0, 4.0, 1.0),
        ("vision", A100): (5.0, 10.0, 2.0),
        ("vision", L40S): (0.0, 14.0, 6.0),  # "*" 10 + 4; 14 - 8 held in all
        ("vision", None): (8.0, 14.0, 6.0),
    }


def test_a_grant_names_each_model_a_key_would_and_raises_the_total_once():
    a100_40 = "NVIDIA A100-SXM4-40GB"
    tenant = Tenant("nlp", ("nlp",), 1.0, {"A100": 2, "*": 6})
    allocs = {"tenant": ["nlp"], "gpu_model": [A100], "share": [2.0]}
    spent = pl.DataFrame({"tenant": ["nlp"], "usd": [0.0], "gpu_h": [0.0]})
    usage = pl.DataFrame({"tenant": ["nlp"], "usage_decayed": [0.0]})
    idle = pl.DataFrame(schema={"tenant": pl.String, "gpu_model": pl.String, "idle_gpus": pl.Float64})
    out = decisions(
        pl.DataFrame(allocs), spent, usage, idle, (tenant,), NOW, [A100, a100_40], [grant("q-4", "nlp", "A100", 3.0)]
    )
    got = {r["gpu_model"]: (r["quota_gpus"], r["headroom_gpus"]) for r in out.to_dicts()}
    # "A100" names both A100 models: each row 2 + 3 = 5 (its own allocation capped: 5 - 2 and 5 - 0); the total
    # 6 + 3 = 9 once, not 6 + 6 (9 - 2 held).
    assert got == {A100: (5.0, 3.0), a100_40: (5.0, 5.0), None: (9.0, 7.0)}


def test_a_grant_changes_nothing_where_there_is_no_quota_or_for_another_tenant_or_model():
    free = Tenant("research", ("research",), 1.0, {})  # no quota at all: nothing to raise, no row added
    before = rows((VISION, free), HELD)
    grants = [grant("q-5", "research", "H100", 8.0), grant("q-6", "vision", "H200", 2.0)]  # no H200 here
    assert rows((VISION, free), HELD, grants) == before
    assert before[("research", None)] == (0.0, None, None)


def test_a_damaged_step_file_is_named_then_set_aside_by_the_run_and_the_rest_still_count(analysed_store, cli):
    """A quota_events file that is not Parquet: `quota list` names it in one line (exit 1); an analytics run sets it
    aside (quarantined_files) and still applies the good grant."""
    import dataclasses

    from gpuledger import quota_requests as qr
    from gpuledger.config import defaults
    from gpuledger.query import Lake

    from builders import END

    end = dt.datetime.fromtimestamp(END, dt.timezone.utc)
    cfg = dataclasses.replace(defaults(), tenants=(Tenant("vision", ("vision-train",), 1.0, {"H100": 1}),))
    rid = qr.request(analysed_store, cfg, [], "vision", "H100", "2", "2026-11-02", "2026-11-02", "why", "al", now=end)
    qr.decide(analysed_store, rid, "approve", "bob", now=end + dt.timedelta(minutes=1))
    bad = "quota_events/date=2026-11-02/part-q-20261102-deadbeef-request.parquet"
    analysed_store.put_new(bad, b"not a parquet file")
    r = cli("quota", "list", "--lake", str(analysed_store))
    assert r.exit_code == 1 and r.output.startswith(f"Error: lake error: quota_events: {analysed_store.url(bad)} ")
    assert r.output.count("\n") == 1, r.output

    from gpuledger.analytics.runner import run

    run(analysed_store, until_s=(end + dt.timedelta(hours=1)).timestamp(), cfg=cfg)
    with Lake(analysed_store) as q:
        (quota,) = q.execute(
            "SELECT quota_gpus FROM decisions WHERE tenant = 'vision' AND gpu_model = ? "
            "AND computed_at = (SELECT max(computed_at) FROM decisions)",
            [H100],
        ).rows[0]
        (found,) = q.execute("SELECT file FROM quarantined_files WHERE table_name = 'quota_events'").rows
    assert quota == 3.0 and found == (bad,)  # 1 + the grant's 2
    later = end + dt.timedelta(hours=1)
    assert analysed_store.get(bad) is None and qr.states(analysed_store, later)["state"].to_list() == ["active"]
