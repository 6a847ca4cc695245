"""The fragmentation page's "What a better scheduler would save" section, callback by callback through the served
app (a POST to /_dash-update-component, as the browser sends it), on the hand-built lake of tests/placement_case.py:
the table carries the hand-computed figures, the page's filters reach the replay, a range it cannot replay is named.
"""

import functools

import pytest

from gpuledger.analytics.placement_whatif import placement_whatif
from gpuledger.dashboards.app import create_app

from builders import page_request
from placement_case import RATES, build_lake


@pytest.fixture
def app(tmp_path):
    lake = build_lake(tmp_path / "lake")
    return create_app(lake, placement=functools.partial(placement_whatif, lake, RATES))


def replay(app, search):
    body = {
        "output": "fr-wi-out.children",
        "outputs": {"id": "fr-wi-out", "property": "children"},
        "inputs": [{"id": "fr-wi-run", "property": "n_clicks", "value": 1}],
        "changedPropIds": ["fr-wi-run.n_clicks"],
        "state": [{"id": "url", "property": "search", "value": search}],
    }
    r = app.server.test_client().post("/_dash-update-component", json=body)
    assert r.status_code == 200, r.data[:300]
    return r.json["response"]["fr-wi-out"]["children"]


def find(component, id_):
    """The component with this id in a serialised Dash tree."""
    if isinstance(component, list):
        return next((f for c in component if (f := find(c, id_)) is not None), None)
    if not isinstance(component, dict):
        return None
    props = component.get("props", {})
    if props.get("id") == id_:
        return component
    return find(props.get("children"), id_)


def test_the_page_offers_the_replay_behind_a_button(app):
    r = app.server.test_client().post("/_dash-update-component", json=page_request("/fragmentation", "?cluster=c"))
    page = r.json["response"]["page"]["children"]
    assert find(page, "fr-wi-run")["props"]["children"] == "Replay"
    assert find(page, "fr-wi-out") is not None


def test_the_replay_shows_the_hand_computed_savings(app):
    out = replay(app, "?start=2026-11-02&end=2026-11-02&cluster=c")
    rows = find(out, "fr-wi-table")["props"]["rowData"]
    # tests/placement_case.py: FGD leaves no fragmented GPU at the measured load of 3 GPUs, BestFit 0.8 of 3 free;
    # both place 5 of the 7 GPUs arrived at capacity; FGD frees 1.0 GPU (72 USD), BestFit 0.2 (14.40 USD).
    assert [r["policy"] for r in rows] == ["measured", "fgd", "bestfit"]
    fgd, bestfit = rows[1], rows[2]
    assert fgd["fragmentation %"] == 0.0 and bestfit["fragmentation %"] == pytest.approx(80 / 3)
    assert fgd["GPUs allocated"] == bestfit["GPUs allocated"] == 5.0
    assert fgd["pods unplaced"] == bestfit["pods unplaced"] == 1
    assert fgd["GPUs freed"] == pytest.approx(1.0) and fgd["USD freed"] == pytest.approx(72.0)
    assert bestfit["GPUs freed"] == pytest.approx(0.2) and bestfit["USD freed"] == pytest.approx(14.4)
    curve = find(out, "fr-wi-curve")["props"]["figure"]
    assert {t["name"] for t in curve["data"]} == {"fgd, T4", "bestfit, T4"}


def test_the_model_filter_reaches_the_replay_and_a_range_without_jobs_is_named(app):
    rows = find(replay(app, "?start=2026-11-02&end=2026-11-02&cluster=c&model=T4"), "fr-wi-table")["props"]["rowData"]
    assert rows[1]["GPUs freed"] == pytest.approx(1.0)
    out = replay(app, "?start=2026-11-02&end=2026-11-02&cluster=c&model=A100")  # no A100 node
    assert out["props"]["id"] == "fr-wi-error"
    assert out["props"]["children"].startswith("Not run: no GPU nodes in the lake's nodes table for cluster 'c'")
