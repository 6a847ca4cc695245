"""Hostile input to the served dashboards: Authorization headers, dates out of range, what-if values.

Every request goes through the real app's Flask server (its test client): a page render or a callback is one
POST to /_dash-update-component, as the browser sends it. None may answer 500.
"""

import base64
import datetime as dt
import http.client
import threading

import pytest
from werkzeug.serving import make_server

from gpuledger.dashboards import filters
from gpuledger.dashboards.app import PAGES, create_app

H100 = "NVIDIA H100 80GB HBM3"
TOKEN = base64.b64encode(b"ops:s3cret").decode()


# -- basic auth (RFC 7617; the scheme is case-insensitive, RFC 7235 section 2.1) -----------------------------
@pytest.mark.parametrize(
    "header,status",
    [
        (f"Basic {TOKEN}", 200),
        (f"basic {TOKEN}", 200),
        (f"BASIC {TOKEN}", 200),
        (f"bAsIc   {TOKEN}  ", 200),  # extra spaces around the token are allowed
        (TOKEN, 401),  # no scheme: accepted before
        (f"  {TOKEN}  ", 401),  # no scheme, padded: accepted before
        (f"Bearer {TOKEN}", 401),
        (f"Basic{TOKEN}", 401),  # no space after the scheme
        ("Basic " + TOKEN.rstrip("=") + "!!", 401),  # not base64
        ("Basic " + TOKEN + "%%", 401),  # base64 with characters outside the alphabet after it
        ("Basic " + base64.b64encode(b"opss3cret").decode(), 401),  # no colon
        ("Basic " + base64.b64encode(b"ops:s3cret:").decode(), 401),
        ("Basic " + base64.b64encode(b"ops:guess").decode(), 401),
        ("Basic ", 401),
        ("Basic ÄÖÜ", 401),
        ("", 401),
    ],
)
def test_basic_auth_takes_the_basic_scheme_in_any_case_and_nothing_else(tmp_path, header, status):
    client = create_app(tmp_path, auth=("ops", "s3cret")).server.test_client()
    r = client.get("/", headers={"Authorization": header} if header else {})
    assert r.status_code == status
    if status == 401:
        assert r.headers["WWW-Authenticate"] == 'Basic realm="gpuledger"'


def test_basic_auth_over_a_real_connection(tmp_path):
    """The same rule through a real HTTP server and client (the header as it travels on the wire)."""
    server = make_server("127.0.0.1", 0, create_app(tmp_path, auth=("ops", "s3cret")).server, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    headers = [f"basic {TOKEN}", f"BASIC {TOKEN}", TOKEN, f"Bearer {TOKEN}", "Basic b3BzczNjcmV0"]  # last: no colon
    got = []
    try:
        for header in headers:
            conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=30)
            conn.request("GET", "/_dash-layout", headers={"Authorization": header})
            r = conn.getresponse()
            got.append((r.status, r.getheader("WWW-Authenticate")))
            conn.close()
    finally:
        server.shutdown()
    challenge = (401, 'Basic realm="gpuledger"')
    assert got == [(200, None), (200, None), challenge, challenge, challenge]


# -- dates out of range in the URL: clamped to the lake's days and named, never a 500 ------------------------
BOUNDS = (dt.date(2026, 9, 28), dt.date(2026, 11, 1))
TODAY = dt.date(2026, 12, 3)
WINDOW = "2026-09-28 to 2026-12-03 (the days with data, up to today)"


@pytest.mark.parametrize(
    "search,start,end,problems",
    [
        (
            "?end=0001-01-01",
            "2026-09-28",
            "2026-09-28",
            [f"end 0001-01-01 is outside {WINDOW}: showing 2026-09-28"],
        ),
        (
            "?start=9999-12-31",
            "2026-11-01",
            "2026-11-01",
            [
                f"start 9999-12-31 is outside {WINDOW}: showing 2026-12-03",
                "start 2026-12-03 is after end 2026-11-01: showing 2026-11-01 only",
            ],
        ),
        (
            "?start=0001-01-01",
            "2026-09-28",
            "2026-11-01",
            [f"start 0001-01-01 is outside {WINDOW}: showing 2026-09-28"],
        ),
        ("?end=9999-12-31", "2026-11-04", "2026-12-03", [f"end 9999-12-31 is outside {WINDOW}: showing 2026-12-03"]),
        ("?start=2026-09-28&end=2026-12-03", "2026-09-28", "2026-12-03", []),  # the window's edges are inside it
    ],
)
def test_dates_outside_the_lake_are_clamped_and_named(search, start, end, problems):
    f, bad = filters.parse(search, BOUNDS, today=TODAY)
    assert (f.start.isoformat(), f.end.isoformat(), bad) == (start, end, problems)
    assert f.end_ts.date() == f.end + dt.timedelta(days=1)


def test_an_empty_lake_clamps_to_today():
    f, bad = filters.parse("?start=0001-01-01&end=9999-12-31", None, today=TODAY)
    window = "1970-01-01 to 2026-12-03 (the days with data, up to today)"
    assert (f.start, f.end) == (dt.date(1970, 1, 1), TODAY)
    assert bad == [
        f"end 9999-12-31 is outside {window}: showing 2026-12-03",
        f"start 0001-01-01 is outside {window}: showing 1970-01-01",
    ]


def post(app, output, outputs, inputs, changed, state=()):
    body = {"output": output, "outputs": outputs, "inputs": inputs, "changedPropIds": changed, "state": list(state)}
    return app.server.test_client().post("/_dash-update-component", json=body)


def render(app, path, search):
    return post(
        app,
        "..page.children...nav.children...freshness.children..",
        [
            {"id": "page", "property": "children"},
            {"id": "nav", "property": "children"},
            {"id": "freshness", "property": "children"},
        ],
        [
            {"id": "url", "property": "pathname", "value": path},
            {"id": "url", "property": "search", "value": search},
            {"id": "refresh", "property": "n_intervals", "value": None},
        ],
        ["url.pathname"],
    )


def sync(app, search):
    """The filter bar's callback on a page load: the URL's filters into the date picker and dropdowns."""
    ids = [
        ("url", "search"),
        ("f-range", "start_date"),
        ("f-range", "end_date"),
        ("f-tenant", "value"),
        ("f-model", "value"),
        ("f-cluster", "value"),
    ]
    return post(
        app,
        "..url.search...f-range.start_date...f-range.end_date...f-tenant.value...f-model.value...f-cluster.value..",
        [{"id": i, "property": p} for i, p in ids],
        [{"id": i, "property": p, "value": search if i == "url" else None} for i, p in ids],
        ["url.search"],
    )


def whatif(app, model, delta, idle_h, search=""):
    return post(
        app,
        "cap-wi-out.children",
        {"id": "cap-wi-out", "property": "children"},
        [{"id": "cap-wi-run", "property": "n_clicks", "value": 1}],
        ["cap-wi-run.n_clicks"],
        [
            {"id": "cap-wi-model", "property": "value", "value": model},
            {"id": "cap-wi-delta", "property": "value", "value": delta},
            {"id": "cap-wi-idle", "property": "value", "value": idle_h},
            {"id": "url", "property": "search", "value": search},
        ],
    )


@pytest.fixture(scope="module")
def app(dash_lake):
    from gpuledger.analytics.whatif import for_dashboard

    return create_app(dash_lake, whatif=for_dashboard)


BAD_DATES = {  # the URL, and the parameter named first
    "?end=0001-01-01": "end 0001-01-01",
    "?start=9999-12-31": "start 9999-12-31",
    "?start=0001-01-01": "start 0001-01-01",
    "?end=9999-12-31": "end 9999-12-31",
    "?start=0001-01-01&end=0001-01-01": "end 0001-01-01",
    "?start=9999-12-31&end=9999-12-31": "end 9999-12-31",
}


@pytest.mark.parametrize("search", BAD_DATES)
def test_every_page_and_the_filter_bar_take_dates_out_of_range(app, search):
    """Before: HTTP 500 (OverflowError: date value out of range) on every page for ?end=0001-01-01."""
    lo, hi = filters.window(app.server.config["GPULEDGER_CONTEXT"].data.bounds())
    named = f"{BAD_DATES[search]} is outside {lo} to {hi} (the days with data, up to today): showing "
    for page in PAGES:
        r = render(app, page.PATH, search)
        assert r.status_code == 200, (page.PATH, r.data[:200])
        assert named in r.get_data(as_text=True), page.PATH
    r = sync(app, search)
    assert r.status_code == 200
    start, end = (r.json["response"]["f-range"][k] for k in ("start_date", "end_date"))
    assert lo.isoformat() <= start <= end <= hi.isoformat()
    r = whatif(app, H100, 8, None, search)
    assert r.status_code == 200 and "jobs submitted" in r.get_data(as_text=True)


# -- what-if inputs: a number, within what the fleet makes sensible, or a message naming it -------------------
# The lake: 4 nodes x 4 GPUs (16), two of them H100 (8 GPUs); the range's last 7 days are replayed (168 h).
RANGE = "?start=2026-10-03&end=2026-11-01"
TOO_MANY = (
    "GPUs to add must be between -8 and +64 for NVIDIA H100 80GB HBM3, not {:+d} (it has 8 GPUs to remove; "
    "at most 4x the fleet's 16 GPUs can be added)"
)


@pytest.mark.parametrize(
    "model,delta,idle_h,message",
    [
        (H100, "abc", None, "GPUs to add must be a whole number (negative to remove), not 'abc'."),
        (H100, "8.5", None, "GPUs to add must be a whole number (negative to remove), not '8.5'."),
        (H100, "nan", None, "GPUs to add must be a whole number (negative to remove), not 'nan'."),
        (
            H100,
            10**400,
            None,
            f"GPUs to add must be a whole number (negative to remove), not 1{'0' * 29}... (401 characters).",
        ),
        (H100, True, None, "GPUs to add must be a whole number (negative to remove), not True."),
        (H100, [8], None, "GPUs to add must be a whole number (negative to remove), not [8]."),
        (H100, 8, "abc", "The reclaim time must be a number of hours (empty: none), not 'abc'."),
        (H100, 8, "inf", "The reclaim time must be a number of hours (empty: none), not 'inf'."),
        (H100, 10_000_000, None, "Not run: " + TOO_MANY.format(10_000_000) + "."),
        (H100, 65, None, "Not run: " + TOO_MANY.format(65) + "."),
        (H100, -9, None, "Not run: " + TOO_MANY.format(-9) + "."),
        (H100, 8, -1, "Not run: the reclaim time must be between 0 and 168 hours (the replayed window), not -1."),
        (
            H100,
            8,
            1e300,
            "Not run: the reclaim time must be between 0 and 168 hours (the replayed window), not 1e+300.",
        ),
        ("no such GPU", 8, None, "Not run: GPU model 'no such GPU' is not in this fleet (its nodes have: "),
        (None, 8, None, "Not run: GPUs to add needs a GPU model."),
    ],
)
def test_what_if_inputs_out_of_bounds_are_named_with_their_range(app, model, delta, idle_h, message):
    """Before: 'abc' (delta or hours) was HTTP 500; 10,000,000 GPUs ran for ~90 s; -9 and unknown models ran."""
    r = whatif(app, model, delta, idle_h, RANGE)
    assert r.status_code == 200, r.data[:300]
    out = r.json["response"]["cap-wi-out"]["children"]["props"]
    assert out["id"] == "cap-wi-error" and out["children"].startswith(message), out["children"]


@pytest.mark.parametrize(
    "delta,idle_h,scenario", [(64, None, "+64 NVIDIA H100"), (-8, 168, "-8 NVIDIA H100"), ("8", "0", "+8")]
)
def test_what_if_inputs_at_their_bounds_run(app, delta, idle_h, scenario):
    r = whatif(app, H100, delta, idle_h, RANGE)
    assert (
        r.status_code == 200 and scenario in r.get_data(as_text=True) and "cap-wi-error" not in r.get_data(as_text=True)
    )
