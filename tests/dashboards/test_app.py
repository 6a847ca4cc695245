"""The dashboards without a browser: URL filters, basic auth, read-only routes, callbacks called directly."""

import base64
import datetime as dt

import pytest

from gpuledger.dashboards import filters
from gpuledger.dashboards.app import PAGES, create_app

from builders import page_request

BOUNDS = (dt.date(2026, 9, 28), dt.date(2026, 11, 1))


def test_default_range_is_the_last_30_days_with_data():
    f, bad = filters.parse("", BOUNDS)
    assert (f.start, f.end, f.tenant, f.model, bad) == (dt.date(2026, 10, 3), dt.date(2026, 11, 1), None, None, [])
    assert f.days == 30 and f.end_ts == dt.datetime(2026, 11, 2, tzinfo=dt.timezone.utc)


def test_a_short_history_starts_at_its_first_day():
    f, _ = filters.parse("", (dt.date(2026, 10, 25), dt.date(2026, 11, 1)))
    assert f.start == dt.date(2026, 10, 25)


@pytest.mark.parametrize(
    "search,problem",
    [
        ("?start=yesterday", "start 'yesterday' is not a date (YYYY-MM-DD): showing 2026-10-03"),
        ("?end=2026-13-01", "end '2026-13-01' is not a date (YYYY-MM-DD): showing 2026-11-01"),
        ("?start=2026-11-01&end=2026-10-01", "start 2026-11-01 is after end 2026-10-01: showing 2026-10-01 only"),
        ("?colour=red", "unknown URL parameter(s) ignored: colour"),
    ],
)
def test_bad_url_values_are_named_and_replaced(search, problem):
    f, bad = filters.parse(search, BOUNDS)
    assert bad == [problem] and f.start <= f.end


def test_filters_round_trip_through_the_url():
    f = filters.Filters(dt.date(2026, 10, 1), dt.date(2026, 10, 31), "vision", "NVIDIA H100 80GB HBM3")
    assert f.search() == "?start=2026-10-01&end=2026-10-31&tenant=vision&model=NVIDIA+H100+80GB+HBM3"
    assert filters.parse(f.search(), BOUNDS) == (f, [])


def _render(app, path, search=""):
    return app.server.test_client().post("/_dash-update-component", json=page_request(path, search))


def test_basic_auth_guards_pages_and_callbacks(tmp_path):
    app = create_app(tmp_path, auth=("ops", "s3cret"))
    client = app.server.test_client()
    assert client.get("/").status_code == 401
    assert client.get("/").headers["WWW-Authenticate"] == 'Basic realm="gpuledger"'
    assert _render(app, "/").status_code == 401
    wrong = base64.b64encode(b"ops:guess").decode()
    assert client.get("/", headers={"Authorization": f"Basic {wrong}"}).status_code == 401
    right = base64.b64encode(b"ops:s3cret").decode()
    assert client.get("/", headers={"Authorization": f"Basic {right}"}).status_code == 200


def test_no_route_writes(dash_lake):
    """Read-only: the app's routes are Dash's own (layout, dependencies, callbacks, assets), none takes a file."""
    app = create_app(dash_lake)
    rules = {r.rule for r in app.server.url_map.iter_rules()}
    assert all("upload" not in r for r in rules)
    before = sorted(p.relative_to(dash_lake) for p in dash_lake.rglob("*") if p.is_file())
    for page in PAGES:
        assert _render(app, page.PATH).status_code == 200
    after = sorted(p.relative_to(dash_lake) for p in dash_lake.rglob("*") if p.is_file())
    assert before == after


def _ids(tree) -> set[str]:
    """The ids of every component in a rendered layout (Dash's JSON: {type, namespace, props: {id, children}})."""
    if isinstance(tree, list):
        return set().union(*map(_ids, tree)) if tree else set()
    if not isinstance(tree, dict):
        return set()
    props = tree.get("props", {})
    return ({props["id"]} if isinstance(props.get("id"), str) else set()) | _ids(props.get("children"))


def test_every_page_renders_on_the_lake_and_on_nothing(dash_lake, tmp_path):
    """Each page draws itself under its own title: its figures on the analysed lake, its no-data note on a lake
    that does not exist (the enforcement and quota requests pages' on both: the analysed lake has no admission
    decisions and no quota requests)."""
    for lake in (dash_lake, tmp_path / "missing"):
        app = create_app(lake)
        for page in PAGES:
            r = _render(app, page.PATH, "?model=NVIDIA+H100+80GB+HBM3")
            assert r.status_code == 200, (lake, page.PATH, r.data[:300])
            content = r.json["response"]["page"]["children"]["props"]["children"]
            assert content[0]["props"]["children"] == page.NAME
            ids = _ids(content)
            empty = lake != dash_lake or page.PATH in ("/enforcement", "/quota-requests")
            assert ("no-data" in ids) == empty, (lake, page.PATH)
            if not empty:  # figures or tables drawn from the lake
                assert len(ids) >= 3, (page.PATH, ids)


def test_the_waste_pages_idle_now_table_equals_sql_on_idle_holds(dash_lake):
    from gpuledger.dashboards.data import DashData
    from gpuledger.dashboards.filters import Filters
    from gpuledger.dashboards.pages import waste
    from gpuledger.query import Lake

    data = DashData(dash_lake)
    f = Filters(dt.date(2000, 1, 1), dt.date(2100, 1, 1))
    got = waste.idle_now(data, f)
    with Lake(dash_lake) as q:
        want = q.execute("SELECT pod, sum(share) FROM idle_holds GROUP BY pod ORDER BY 2 DESC, pod").rows
    assert want and sorted(zip(got["pod"], got["idle_gpus"], strict=True)) == sorted(want)
    # Up to the end of the last complete hour, from the start of the idle run or of the hold: a hold that began
    # within that hour (a service deployed at night) is idle for part of it.
    assert (got["idle_h"] > 0).all()


def test_every_page_renders_from_the_analysed_lake_on_each_store(analysed_store):
    """Each page draws its figures from the store (the enforcement page its no-data note: no admission decisions),
    the quota requests page from a request made on it."""
    from gpuledger import quota_requests
    from gpuledger.config import defaults

    today = dt.datetime.now(dt.timezone.utc).date()
    until = (today + dt.timedelta(days=2)).isoformat()
    quota_requests.request(analysed_store, defaults(), [], "vision", "H100", "2", today.isoformat(), until, "x", "al")
    app = create_app(analysed_store)
    for page in PAGES:
        r = _render(app, page.PATH)
        assert r.status_code == 200, (page.PATH, r.data[:300])
        content = r.json["response"]["page"]["children"]["props"]["children"]
        assert content[0]["props"]["children"] == page.NAME
        ids = _ids(content)
        assert ("no-data" in ids) == (page.PATH == "/enforcement"), page.PATH
        if page.PATH != "/enforcement":
            assert len(ids) >= 3, (page.PATH, ids)


def test_the_snapshot_holds_what_its_queries_give_on_the_lake(analysed_store):
    """The dashboards' in-memory snapshot, built from the store, holds each table as its query gives it on the lake."""
    from polars.testing import assert_frame_equal

    from gpuledger.dashboards.data import SNAPSHOT, DashData
    from gpuledger.query import Lake

    from builders import canonical

    d = DashData(analysed_store)
    try:
        d.rebuild()
        filled = 0
        with Lake(analysed_store) as lake:
            for table, (_, query) in SNAPSHOT.items():
                want = lake.execute(query, timeout_s=None).frame
                got = d._snap.execute(f"SELECT * FROM {table}").frame
                assert got.columns == want.columns, table
                assert_frame_equal(canonical(got), canonical(want), check_exact=False, rel_tol=1e-9, abs_tol=1e-9)
                filled += want.height > 0
        assert filled >= len(SNAPSHOT) - 2  # the comparison is of rows, not of empty tables
    finally:
        d.close()
