"""The dashboards in a real browser (headless Chromium via dash[testing]): every page loads with a clean console,
the filters change the figures and live in the URL, and a number on each page equals the same figure in SQL."""

import datetime as dt
import functools
import re
import shutil

import polars as pl
import pytest

from gpuledger.dashboards.app import PAGES, create_app
from gpuledger.lake import LakeWriter
from gpuledger.query import Lake

from builders import save_screenshot
from conftest import REPO

pytestmark = pytest.mark.skipif(
    shutil.which("chromedriver") is None,
    reason="Debian packages chromium and chromium-driver not installed (.ci/run installs them)",
)
RANGE = "?start=2026-10-03&end=2026-11-01"  # the last 30 of the lake's 35 days: the pages' default
H100 = "NVIDIA H100 80GB HBM3"


def app_on(lake):
    """The app as the CLI wires it: the capacity what-if, and the placement replay with the lake and rate card bound."""
    from gpuledger.analytics.placement_whatif import placement_whatif
    from gpuledger.analytics.whatif import for_dashboard
    from gpuledger.config import defaults

    placement = functools.partial(placement_whatif, lake, defaults().rates)
    return create_app(lake, whatif=for_dashboard, placement=placement)


def sql(lake, query, params=None):
    with Lake(lake) as q:
        return q.execute(query, params or []).rows[0][0]


def number(dash_duo, selector) -> float:
    return float(dash_duo.find_element(selector).text.replace(",", ""))


def open_page(dash_duo, path, search=RANGE, title=None):
    dash_duo.wait_for_page(url=dash_duo.server_url + path + search)
    dash_duo.wait_for_text_to_equal("h2", title or next(p.NAME for p in PAGES if p.PATH == path))


def test_every_page_loads_with_a_clean_console(dash_duo, dash_lake):
    dash_duo.start_server(app_on(dash_lake))
    for page in PAGES:
        open_page(dash_duo, page.PATH)
        dash_duo.wait_for_element("#page section, #page .kpi, #no-data")
        assert dash_duo.get_logs() == [], page.PATH
        assert not dash_duo.find_elements("#url-problems")
        save_screenshot(dash_duo, f"{page.NAME.lower()}.png")  # with GPULEDGER_SCREENSHOTS set


def test_each_page_shows_the_figure_sql_gives(dash_duo, dash_lake):
    start, end = dt.date(2026, 10, 3), dt.date(2026, 11, 1)
    dash_duo.start_server(app_on(dash_lake))

    open_page(dash_duo, "/")
    gpus = sql(dash_lake, "SELECT sum(gpus) FROM fleet_hourly WHERE hour = (SELECT max(hour) FROM fleet_hourly)")
    assert gpus == 16 and number(dash_duo, "#ov-gpus") == gpus

    open_page(dash_duo, "/capacity")
    mape = sql(
        dash_lake, "SELECT backtest_mape_pct FROM demand_forecast WHERE kind = 'backtest' AND gpu_model = ?", [H100]
    )
    dash_duo.wait_for_element('#cap-backtest .ag-cell[col-id="backtest_mape_pct"]')  # drawn after the page
    cells = dash_duo.find_elements('#cap-backtest .ag-cell[col-id="backtest_mape_pct"]')
    assert mape is not None and f"{mape:,.1f}" in [c.text for c in cells]

    open_page(dash_duo, "/tenants")
    cost = sql(
        dash_lake,
        "SELECT sum(cost_usd) FROM cost_daily WHERE date BETWEEN ? AND ? AND tenant IS NOT NULL",
        [start, end],
    )
    assert cost > 0 and number(dash_duo, "#ten-cost-total") == round(cost, 2)

    open_page(dash_duo, "/queue")
    jobs = sql(
        dash_lake, "SELECT count(*) FROM job_stats WHERE date BETWEEN ? AND ? AND queue_s IS NOT NULL", [start, end]
    )
    assert jobs > 0 and number(dash_duo, "#q-jobs") == jobs

    open_page(dash_duo, "/fragmentation")
    rate = sql(
        dash_lake,
        "SELECT 100 * sum(fragmented_gpus) / sum(free_gpus) FROM fragmentation WHERE date BETWEEN ? AND ?",
        [start, end],
    )
    assert number(dash_duo, "#fr-rate") == round(rate, 1)

    open_page(dash_duo, "/waste")
    idle = sql(
        dash_lake,
        "SELECT sum(idle_gpu_hours) FROM job_hourly WHERE date BETWEEN ? AND ? AND tenant IS NOT NULL",
        [start, end],
    )
    assert idle > 0 and number(dash_duo, "#ws-idle-h") == round(idle, 1)
    assert dash_duo.get_logs() == []


def test_a_filter_changes_the_figures_and_lives_in_the_url(dash_duo, dash_lake):
    dash_duo.start_server(app_on(dash_lake))
    open_page(dash_duo, "/")
    assert number(dash_duo, "#ov-gpus") == 16
    dash_duo.select_dcc_dropdown("#f-model", value=H100)
    h100 = sql(
        dash_lake,
        "SELECT sum(gpus) FROM fleet_hourly WHERE gpu_model = ? AND hour = (SELECT max(hour) FROM fleet_hourly)",
        [H100],
    )
    dash_duo.wait_for_text_to_equal("#ov-gpus", f"{h100:,.0f}")
    assert "model=NVIDIA+H100+80GB+HBM3" in dash_duo.driver.current_url
    # The URL alone brings the same view back (a bookmark), and carries over to the other pages' links.
    open_page(dash_duo, "/", "?start=2026-10-03&end=2026-11-01&model=NVIDIA+H100+80GB+HBM3")
    dash_duo.wait_for_text_to_equal("#ov-gpus", f"{h100:,.0f}")
    link = dash_duo.find_element("#nav a[href^='/queue']")
    assert "model=NVIDIA+H100" in link.get_attribute("href")
    assert dash_duo.get_logs() == []


def test_bad_url_values_are_named_not_a_traceback(dash_duo, dash_lake):
    dash_duo.start_server(app_on(dash_lake))
    open_page(dash_duo, "/queue", "?start=yesterday&end=2026-11-01&colour=red")
    text = dash_duo.find_element("#url-problems").text
    assert "start 'yesterday' is not a date (YYYY-MM-DD)" in text and "colour" in text
    assert number(dash_duo, "#q-jobs") > 0  # the page still draws, with the default start
    open_page(dash_duo, "/nowhere", "", title="Not found")


def test_dates_and_what_if_values_out_of_range_are_named_in_the_browser(dash_duo, dash_lake):
    """Before: ?end=0001-01-01 was an HTTP 500 (an empty page), and 10,000,000 GPUs replayed for ~90 s."""
    dash_duo.start_server(app_on(dash_lake))
    open_page(dash_duo, "/capacity", "?end=0001-01-01&model=" + H100.replace(" ", "+"))
    assert "end 0001-01-01 is outside " in dash_duo.find_element("#url-problems").text
    dash_duo.wait_for_element("#cap-demand")  # the page draws, on the clamped range
    delta = dash_duo.find_element("#cap-wi-delta")
    delta.clear()
    delta.send_keys("10000000")
    dash_duo.find_element("#cap-wi-run").click()
    dash_duo.wait_for_contains_text("#cap-wi-error", "GPUs to add must be between -8 and +64 for " + H100)
    assert dash_duo.get_logs() == []


def test_the_what_if_replays_recent_demand(dash_duo, dash_lake):
    dash_duo.start_server(app_on(dash_lake))
    open_page(dash_duo, "/capacity", RANGE + "&model=" + H100.replace(" ", "+"))
    dash_duo.find_element("#cap-wi-run").click()
    dash_duo.wait_for_element('#cap-wi-table .ag-cell[col-id="variant"]', timeout=30)
    variants = [c.text for c in dash_duo.find_elements('#cap-wi-table .ag-cell[col-id="variant"]')]
    assert {"measured", "today", "scenario"} <= set(variants)
    assert "+8 NVIDIA H100 80GB HBM3 GPUs" in dash_duo.find_element("#cap-wi-out").text
    assert dash_duo.get_logs() == []


def test_the_placement_replay_compares_the_policies_with_what_was_measured(dash_duo, dash_lake):
    dash_duo.start_server(app_on(dash_lake))
    open_page(dash_duo, "/fragmentation")
    dash_duo.find_element("#fr-wi-run").click()
    dash_duo.wait_for_element("#fr-wi-table", timeout=60)
    dash_duo.wait_for_element('#fr-wi-table .ag-cell[col-id="policy"]')
    policies = [c.text for c in dash_duo.find_elements('#fr-wi-table .ag-cell[col-id="policy"]')]
    assert policies == ["measured", "fgd", "bestfit"]
    dash_duo.wait_for_element("#fr-wi-curve .main-svg")
    assert dash_duo.get_logs() == []


def test_a_grid_sorts_numerically_and_exports_the_rows_it_holds(dash_duo, dash_lake):
    """The tenants' cost grid: human headers, numbers formatted in the browser but sorted as numbers, and the CSV
    export (the grid's own, as the Export button runs it) holds every row the server sent, in the headers' units."""
    dash_duo.start_server(app_on(dash_lake))
    open_page(dash_duo, "/tenants")
    cell = '#ten-cost-table .ag-cell[col-id="total_usd"]'
    dash_duo.wait_for_element(cell)
    headers = [h.text for h in dash_duo.find_elements("#ten-cost-table .ag-header-cell-text")]
    assert headers == ["Cluster", "Tenant", "Own jobs' cost (USD)", "Idle capacity share (USD)", "Total cost (USD)"]
    want = sql(
        dash_lake,
        "SELECT count(DISTINCT tenant) FROM cost_daily WHERE date BETWEEN ? AND ? AND tenant IS NOT NULL",
        [dt.date(2026, 10, 3), dt.date(2026, 11, 1)],
    )
    dash_duo.find_element('#ten-cost-table .ag-header-cell[col-id="total_usd"]').click()  # ascending
    dash_duo.wait_for_element('#ten-cost-table .ag-header-cell[col-id="total_usd"][aria-sort="ascending"]')
    shown = [float(c.text.replace(",", "")) for c in dash_duo.find_elements(cell)]
    assert len(shown) == want and shown == sorted(shown)
    assert all(re.fullmatch(r"[\d,]+\.\d\d", c.text) for c in dash_duo.find_elements(cell))  # 1,234.50
    csv = dash_duo.driver.execute_script("return dash_ag_grid.getApi('ten-cost-table').getDataAsCsv();")
    lines = csv.strip().splitlines()
    assert lines[0].split(",")[-1] == '"Total cost (USD)"' and len(lines) == want + 1
    assert [round(float(r.split(",")[-1].strip('"')), 2) for r in lines[1:]] == shown  # plain numbers, sorted
    dash_duo.find_element('#page button.csv-export[data-grid="ten-cost-table"]').click()
    assert dash_duo.get_logs() == []


def test_an_empty_lake_explains_itself(dash_duo, tmp_path):
    dash_duo.start_server(app_on(tmp_path / "empty"))
    for page in PAGES:
        open_page(dash_duo, page.PATH, "")
        assert "gpuledger" in dash_duo.find_element("#no-data").text
    assert dash_duo.get_logs() == []


def test_enforcement_page_once_decisions_exist(dash_duo, dash_lake, tmp_path):
    lake = tmp_path / "lake"
    shutil.copytree(dash_lake, lake)
    t = dt.datetime(2026, 10, 30, 12, tzinfo=dt.timezone.utc)
    rows = [
        {
            "ts": t + dt.timedelta(minutes=i),
            "cluster": "default",
            "uid": f"u{i}",
            "tenant": "vision",
            "gpu_model": H100,
            "gpus": 4.0,
            "decision": d,
            "policy": "quota",
            "mode": "enforce",
            "reason": "tenant vision uses 14 of 16 H100; this pod asks 4" if d == "deny" else None,
            "dry_run": False,
            "latency_s": 0.001,
        }
        for i, d in enumerate(["allow", "allow", "deny"])
    ]
    LakeWriter(lake).write("admission_decisions", pl.DataFrame(rows), "webhook-0")
    dash_duo.start_server(app_on(lake))
    open_page(dash_duo, "/enforcement")
    assert number(dash_duo, "#en-total") == 3
    dash_duo.wait_for_contains_text("#en-denials", "tenant vision uses 14 of 16 H100")
    assert dash_duo.get_logs() == []


def test_the_docs_show_a_screenshot_of_every_page():
    """Each page has the screenshot `GPULEDGER_SCREENSHOTS=docs/screenshots` saves for it (named for the page, so a
    renamed page without a new one fails), each a PNG the browser drew: its header gives the window's width,
    1400 (tests/conftest.py's --window-size). Every screenshot the README and docs/ show is one of them."""
    shots = REPO / "docs" / "screenshots"
    for page in PAGES:
        data = (shots / f"{page.NAME.lower()}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", page.NAME
        assert data[12:16] == b"IHDR" and int.from_bytes(data[16:20], "big") == 1400, page.NAME
    readme = (REPO / "README.md").read_text()
    assert "](docs/screenshots/capacity.png)" in readme
    shown = [REPO / m for m in re.findall(r"\]\((docs/screenshots/[^)]+)\)", readme)]
    for doc in (REPO / "docs").glob("*.md"):
        shown += [doc.parent / m for m in re.findall(r"\]\((screenshots/[^)]+)\)", doc.read_text())]
    assert len(shown) >= 3
    assert [p for p in shown if p.resolve().parent != shots or not p.is_file()] == []


def test_the_overview_page_shows_the_fleet_of_the_lake_on_each_store(dash_duo, analysed_store):
    """The page in the browser reads the store itself: analysed_lake's 3 nodes x 4 GPUs in its latest hour."""
    dash_duo.start_server(create_app(analysed_store))
    dash_duo.wait_for_page(url=dash_duo.server_url + "/")
    dash_duo.wait_for_text_to_equal("h2", PAGES[0].NAME)
    dash_duo.wait_for_element("#ov-gpus")
    assert number(dash_duo, "#ov-gpus") == 12
    assert not dash_duo.find_elements("#no-data")
    assert dash_duo.get_logs() == []
