"""The Quota requests page on a lake with requests in every state: what waits, the grants in force and every step,
each table's headers registered labels, and a tenant user seeing only their tenant's requests (the page as the router
draws it, and through the app behind the sign-in proxy rules)."""

import datetime as dt
import shutil

import dash_ag_grid as dag
import pytest
from dash import html

from gpuledger import quota_requests as qr
from gpuledger.config import defaults
from gpuledger.dashboards import filters
from gpuledger.dashboards import format as fmt
from gpuledger.dashboards.access import Access
from gpuledger.dashboards.app import Context, create_app
from gpuledger.dashboards.data import DashData
from gpuledger.dashboards.pages import quota_requests as page

from builders import page_request, save_screenshot

UTC = dt.timezone.utc
NOW = dt.datetime.now(UTC).replace(microsecond=0)  # the view's clock is DuckDB's now()
DAY = dt.timedelta(days=1)
TODAY = f"?start={NOW.date()}&end={NOW.date()}"
PROXY = "10.0.0.7"
RULES = Access(trusted_proxies=("10.0.0.0/29",), admin_groups=("gpu-admins",), tenant_groups={"tv": ("vision",)})


@pytest.fixture(scope="module")
def lake(analysed_lake, tmp_path_factory):
    """The analysed small lake with requests: vision's pending one, its grant in force and a rejected one; nlp's
    pending one; recsys's grant approved for tomorrow."""
    path = tmp_path_factory.mktemp("quota-page") / "lake"
    shutil.copytree(analysed_lake, path)
    cfg, mp = defaults(), pytest.MonkeyPatch()
    mp.setattr(qr, "utc_now", lambda: NOW - dt.timedelta(hours=2))
    try:

        def ask(tenant, model, gpus, start, end, reason):
            return qr.request(path, cfg, [], tenant, model, gpus, start.isoformat(), end.isoformat(), reason, "alice")

        ids = {
            "vision-pending": ask("vision", "H100", "2", NOW, NOW + DAY, "sweep"),
            "vision-active": ask("vision", "A100", "4", NOW - DAY, NOW + DAY, "deadline"),
            "vision-rejected": ask("vision", "H100", "8", NOW, NOW + DAY, "too many"),
            "nlp-pending": ask("nlp", "H100", "1", NOW, NOW + DAY, "nlp eval"),
            "recsys-later": ask("recsys", "L40S", "3", NOW + DAY, NOW + 2 * DAY, "recsys launch"),
        }
        mp.setattr(qr, "utc_now", lambda: NOW - dt.timedelta(hours=1))
        for name in ("vision-active", "recsys-later"):
            qr.decide(path, ids[name], "approve", "bob", "ok")
        qr.decide(path, ids["vision-rejected"], "reject", "bob", "not this week")
    finally:
        mp.undo()
    return path, ids


def _walk(tree):
    if isinstance(tree, list | tuple):
        for c in tree:
            yield from _walk(c)
    elif hasattr(tree, "_prop_names"):
        yield tree
        yield from _walk(getattr(tree, "children", None))


def drawn(path, search=TODAY, scope=None):
    data = DashData(path)
    try:
        f, problems = filters.parse(search, data.bounds(), scope=scope)
        assert problems == []
        return list(_walk(page.layout(Context(data), f)))
    finally:
        data.close()


def grids(components) -> dict[str, list[dict]]:
    return {c.id: c.rowData for c in components if isinstance(c, dag.AgGrid)}


def kpis(components) -> dict[str, str]:
    spans = [c for c in components if isinstance(c, html.Span)]
    return {c.id: c.children for c in spans if str(getattr(c, "id", "")).startswith("qr-")}


def test_the_page_lists_what_waits_the_grants_and_every_step(lake):
    path, ids = lake
    components = drawn(path)
    g = grids(components)
    assert [r["request_id"] for r in g["qr-pending-table"]] == sorted([ids["vision-pending"], ids["nlp-pending"]])
    granted = {r["request_id"]: r["state"] for r in g["qr-granted"]}
    assert granted == {ids["vision-active"]: "active", ids["recsys-later"]: "approved"}
    # Five requests and three decisions, all today.
    assert len(g["qr-history"]) == 8 and {r["action"] for r in g["qr-history"]} == {"request", "approve", "reject"}
    # One grant in force (vision's 4 A100): 1 grant, 4 GPUs; 2 requests waiting.
    assert kpis(components) == {"qr-pending": "2", "qr-active": "1", "qr-granted-gpus": "4.0"}
    for c in components:
        if isinstance(c, dag.AgGrid):
            for d in c.columnDefs:
                assert d["field"] in fmt.REGISTRY and d["headerName"] == fmt.header(d["field"]), (c.id, d)


def test_the_model_filter_keeps_the_requests_whose_key_names_it(lake):
    path, ids = lake
    g = grids(drawn(path, TODAY + "&model=NVIDIA+H100+80GB+HBM3"))
    assert [r["request_id"] for r in g["qr-pending-table"]] == sorted([ids["vision-pending"], ids["nlp-pending"]])
    assert "qr-granted" not in g  # the two grants are on A100 and L40S: a sentence, no table
    assert {r["gpu_model"] for r in g["qr-history"]} == {"H100"}


def test_a_tenant_user_sees_only_their_tenants_requests(lake):
    path, ids = lake
    g = grids(drawn(path, scope=("vision",)))
    assert [r["request_id"] for r in g["qr-pending-table"]] == [ids["vision-pending"]]
    assert [r["request_id"] for r in g["qr-granted"]] == [ids["vision-active"]]
    assert {r["tenant"] for r in g["qr-history"]} == {"vision"} and len(g["qr-history"]) == 5
    client = create_app(path, access_cfg=RULES).server.test_client()
    for search in (TODAY, TODAY + "&tenant=nlp", TODAY + "&tenant=recsys"):  # crafted for another tenant
        r = client.post(
            "/_dash-update-component",
            json=page_request(page.PATH, search),
            headers={"X-Forwarded-User": "alice", "X-Forwarded-Groups": "tv"},
            environ_base={"REMOTE_ADDR": PROXY},
        )
        text = r.get_data(as_text=True)
        assert r.status_code == 200 and ids["vision-pending"] in text, search
        assert not any(t in text for t in ("nlp", "recsys", ids["nlp-pending"], ids["recsys-later"])), search
    admin = client.post(
        "/_dash-update-component",
        json=page_request(page.PATH, TODAY),
        headers={"X-Forwarded-User": "root", "X-Forwarded-Groups": "gpu-admins"},
        environ_base={"REMOTE_ADDR": PROXY},
    ).get_data(as_text=True)
    assert ids["nlp-pending"] in admin and ids["recsys-later"] in admin  # the same question sees them all


def test_a_lake_without_requests_says_how_to_make_one(analysed_lake):
    (only,) = [c for c in drawn(analysed_lake, "") if getattr(c, "id", None) == "no-data"]
    assert "gpuledger quota request" in only.children


@pytest.mark.skipif(shutil.which("chromedriver") is None, reason="Debian's chromium-driver not installed")
def test_the_page_in_a_browser(dash_duo, lake):
    """Drawn in Chromium with a clean console: the counts, and vision's grant in its table (the screenshot in
    docs/screenshots with GPULEDGER_SCREENSHOTS set)."""
    path, ids = lake
    dash_duo.start_server(create_app(path))
    dash_duo.wait_for_page(url=dash_duo.server_url + page.PATH + TODAY)
    dash_duo.wait_for_text_to_equal("h2", page.NAME)
    dash_duo.wait_for_text_to_equal("#qr-pending", "2")
    assert dash_duo.find_element("#qr-active").text == "1"
    dash_duo.wait_for_contains_text("#qr-granted", ids["vision-active"])
    dash_duo.wait_for_contains_text("#qr-history", "not this week")
    assert dash_duo.get_logs() == []
    save_screenshot(dash_duo, "quota requests.png")
