"""Dashboard response times over one year of a 1,000-GPU fleet: every callback, and each page's first load.

    python benchmarks/dashboards.py --lake DIR [--runs 20]
    (DIR: `gpuledger simulate --nodes 125 --gpus-per-node 8 --days 365 --step-s 3600`, then `gpuledger analyze`)
    python benchmarks/dashboards.py --tiny
    (2 nodes x 2 GPUs for 3 days, built and analysed in a temp dir, 2 runs per callback and one browser load of
    the first page, seconds in all, so the test suite runs this script)

Callbacks are timed server-side, as Dash's renderer calls them (POST /_dash-update-component through Flask's test
client, in this process), `--runs` times each, after one warm-up: the page render for every page with the
default range (the last 30 days) and with the whole year, the filter-to-URL sync, the model filter applied, and
the capacity what-if. Baseline in the same run: the router's "not found" page (Dash, Flask and the router, no
query), so ratio = what the page's own work costs on top of the framework.

First page load: a headless Chromium (Debian chromium + chromium-driver, as the tests use) opens each page on a
real server (werkzeug, threaded) and waits until the page's figures and tables are in the DOM; best of 3, median
reported too. Needs chromedriver on PATH; without it the browser part is skipped and says so.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

# The repository first: this script's own folder (sys.path[0]) holds a dashboards.py that hides the package.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _proc import gpuledger as gl  # noqa: E402

from gpuledger.analytics.whatif import for_dashboard  # noqa: E402
from gpuledger.dashboards.app import PAGES, create_app  # noqa: E402

END = "2026-12-01T00:00:00Z"  # the end of the --tiny lake


def render_body(path: str, search: str) -> dict:
    return {
        "output": "..page.children...nav.children...freshness.children..",
        "outputs": [
            {"id": "page", "property": "children"},
            {"id": "nav", "property": "children"},
            {"id": "freshness", "property": "children"},
        ],
        "inputs": [
            {"id": "url", "property": "pathname", "value": path},
            {"id": "url", "property": "search", "value": search},
            {"id": "refresh", "property": "n_intervals", "value": None},
        ],
        "changedPropIds": ["url.search"],
        "state": [],
    }


def sync_body(search: str, model: str) -> dict:
    ids = [
        ("url", "search"),
        ("f-range", "start_date"),
        ("f-range", "end_date"),
        ("f-tenant", "value"),
        ("f-model", "value"),
        ("f-cluster", "value"),
    ]
    values = [search, "2026-11-01", "2026-11-30", None, model, None]  # cluster None: every cluster, the default
    return {
        "output": "..url.search...f-range.start_date...f-range.end_date...f-tenant.value...f-model.value"
        "...f-cluster.value..",
        "outputs": [{"id": i, "property": p} for i, p in ids],
        "inputs": [{"id": i, "property": p, "value": v} for (i, p), v in zip(ids, values, strict=True)],
        "changedPropIds": ["f-model.value"],
        "state": [],
    }


def whatif_body(model: str, search: str) -> dict:
    return {
        "output": "cap-wi-out.children",
        "outputs": {"id": "cap-wi-out", "property": "children"},
        "inputs": [{"id": "cap-wi-run", "property": "n_clicks", "value": 1}],
        "changedPropIds": ["cap-wi-run.n_clicks"],
        "state": [
            {"id": "cap-wi-model", "property": "value", "value": model},
            {"id": "cap-wi-delta", "property": "value", "value": 64},
            {"id": "cap-wi-idle", "property": "value", "value": None},
            {"id": "url", "property": "search", "value": search},
        ],
    }


def timed(client, body, runs: int) -> tuple[float, float, float]:
    r = client.post("/_dash-update-component", json=body)
    if r.status_code not in (200, 204):
        sys.exit(f"callback failed ({r.status_code}): {r.data[:500]!r}")
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        client.post("/_dash-update-component", json=body)
        times.append(time.perf_counter() - t0)
    times.sort()
    p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
    return statistics.median(times), p95, times[-1]


def browser_loads(app, pages, search: str, loads: int = 3) -> dict[str, tuple[float, float]] | None:
    if shutil.which("chromedriver") is None:
        print("first page load: skipped (no chromedriver on PATH)")
        return None
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.remote_connection import RemoteConnection
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait
    from werkzeug.serving import make_server

    RemoteConnection.set_timeout(60)  # selenium 3.141 with urllib3 2 (see tests/conftest.py)
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request would bury the figures
    server = make_server("127.0.0.1", 0, app.server, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    options = Options()
    for arg in ("--headless", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options)
    out = {}

    def load(page) -> float:
        driver.get("about:blank")
        t0 = time.perf_counter()
        driver.get(url + page.PATH + search)
        WebDriverWait(driver, 60).until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, "h2"), page.NAME))
        WebDriverWait(driver, 60).until(
            lambda d: (
                d.find_elements(By.CSS_SELECTOR, "#page section, #page .kpi, #no-data")
                and not d.find_elements(By.CSS_SELECTOR, "._dash-loading, [data-dash-is-loading='true']")
            )
        )
        return time.perf_counter() - t0

    try:
        # A browser's first visit downloads and compiles the scripts (Dash, plotly.js, AG Grid: about 8 MB), and
        # Chromium compiles a script fully only from its second run: the first two loads of the first page pay that,
        # whichever page it is. Said apart, then every page with the scripts cached, as after that first visit.
        if loads > 1:
            out["(cold browser: first visit, then second)"] = (load(pages[0]), load(pages[0]))
        for page in pages:
            times = [load(page) for _ in range(loads)]
            out[getattr(page, "LABEL", page.NAME)] = (min(times), statistics.median(times))
    finally:
        driver.quit()
        server.shutdown()
    return out


def fleet_targets(data) -> dict[str, str]:
    """Paths of the fleet pages for the first node of the lake, and the GPU and job of its latest allocation."""
    from gpuledger.dashboards import links

    node = data.frame("SELECT cluster, node FROM nodes ORDER BY cluster, node LIMIT 1").row(0, named=True)
    gpu, job, tenant = data.frame(
        "SELECT gpu_uuid, job_id, tenant FROM gpu_allocations WHERE cluster = ? AND node = ? AND gpu_uuid IS NOT NULL "
        "ORDER BY start DESC LIMIT 1",
        [node["cluster"], node["node"]],
        lake=True,
    ).row(0)
    return {
        "cluster": links.cluster_href(node["cluster"]),
        "node": links.node_href(node["cluster"], node["node"]),
        "GPU": links.gpu_href(gpu),
        "job": links.job_href(node["cluster"], job),
        "tenant": tenant,
    }


def fleet_rows(client, paths: dict[str, str], hi, year: str, runs: int) -> list[tuple[str, tuple]]:
    """The fleet pages at each resolution their range picks: 2 days (every sample), 7 days (5-minute buckets), the
    default 30 days (hours) and the whole year (days from the hours); a GPU seen by one tenant (its holds)."""
    ranges = {
        "2 days": f"?start={hi - dt.timedelta(days=1)}&end={hi}",
        "7 days": f"?start={hi - dt.timedelta(days=6)}&end={hi}",
        "default 30 days": "",
        "whole year": year,
    }
    rows = []
    for label in ("cluster", "node", "GPU"):
        for k, search in ranges.items():
            if label == "cluster" and k in ("2 days", "7 days"):
                continue  # the cluster page reads the hourly rollup at any range
            rows.append((f"Fleet: {label}, {k}", timed(client, render_body(paths[label], search), runs)))
    rows.append(("Fleet: job", timed(client, render_body(paths["job"], ""), runs)))
    one = ranges["2 days"] + "&tenant=" + paths["tenant"]
    rows.append(("Fleet: GPU, 2 days, one tenant's holds", timed(client, render_body(paths["GPU"], one), runs)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lake", type=Path, default=None, help="an analysed lake (required unless --tiny)")
    ap.add_argument("--runs", type=int, default=None, help="[20; 2 with --tiny]")
    ap.add_argument("--tiny", action="store_true", help="a 4-GPU lake for 3 days, 2 runs: checks it runs")
    a = ap.parse_args()
    a.runs = a.runs or (2 if a.tiny else 20)
    if a.lake is None and not a.tiny:
        ap.error("--lake DIR is required (or --tiny)")
    tmp = None
    if a.lake is None:
        tmp = Path(tempfile.mkdtemp(prefix="gl-dash-"))
        a.lake = tmp / "lake"
        sim = ["--nodes", "2", "--gpus-per-node", "2", "--days", "3", "--step-s", "3600", "--end", END]
        gl("simulate", "--lake", str(a.lake), *sim)
        gl("analyze", "--lake", str(a.lake), "--to", END)
    try:
        run(a)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def run(a) -> None:
    import resource

    app = create_app(a.lake, whatif=for_dashboard)
    client = app.server.test_client()
    data = app.server.config["GPULEDGER_CONTEXT"].data
    t0 = time.perf_counter()
    data.rebuild()  # what a server does once at start (and in the background after each analytics run)
    rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(
        f"snapshot of the analytics tables: built in {time.perf_counter() - t0:.1f} s; process peak RSS {rss_gb:.2f} GB"
    )
    lo, hi = data.bounds()
    month = f"?start={(hi.replace(day=1)).isoformat()}&end={hi.isoformat()}"
    year = f"?start={lo.isoformat()}&end={hi.isoformat()}"
    model = data.models()[0]
    print(f"lake {a.lake}: {lo} to {hi}; {a.runs} runs per callback after one warm-up; seconds")
    base = timed(client, render_body("/nowhere", ""), a.runs)
    print(f"{'callback':44s} {'p50':>7s} {'p95':>7s} {'max':>7s} {'p95/base':>9s}")
    print(f"{'baseline: router, no query (not found)':44s} {base[0]:7.3f} {base[1]:7.3f} {base[2]:7.3f}")
    worst = 0.0
    rows = []
    for page in PAGES:
        for label, search in (
            ("default 30 days", ""),
            ("whole year", year),
            (f"model {model}", year + "&model=" + model.replace(" ", "+")),
        ):
            t = timed(client, render_body(page.PATH, search), a.runs)
            rows.append((f"{page.NAME}: {label}", t))
    paths = fleet_targets(data)
    rows += fleet_rows(client, paths, hi, year, a.runs)
    rows.append(("filter bar -> URL (sync)", timed(client, sync_body(month, model), a.runs)))
    rows.append(("what-if, 7 days of jobs, +64 GPUs", timed(client, whatif_body(model, month), max(3, a.runs // 4))))
    for label, t in rows:
        print(f"{label:44s} {t[0]:7.3f} {t[1]:7.3f} {t[2]:7.3f} {t[1] / base[1]:8.1f}x")
        if not label.startswith("what-if"):
            worst = max(worst, t[1])
    print(f"slowest callback p95 (what-if apart): {worst:.3f} s (target < 0.5 s)")
    # --tiny: one load of one page shows the browser part still runs; all seven pages would add ~10 s.
    # The fleet's node and GPU pages too (the default range: hours), under the labels they print as.
    drill = [SimpleNamespace(PATH=paths[k], NAME="Fleet", LABEL=f"Fleet: {k}") for k in ("node", "GPU")]
    loads = browser_loads(app, PAGES[:1], "", loads=1) if a.tiny else browser_loads(app, [*PAGES, *drill], "")
    if loads:
        print(f"{'first page load in Chromium (default range)':44s} {'best':>7s} {'median':>7s}")
        for name, (best, med) in loads.items():
            print(f"{name:44s} {best:7.3f} {med:7.3f}")
        pages = {k: v for k, v in loads.items() if not k.startswith("(cold")}
        print(f"slowest first load (median): {max(m for _, m in pages.values()):.3f} s (target < 2 s)")


if __name__ == "__main__":
    main()
