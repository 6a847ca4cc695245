"""`gpuledger report`: the month's numbers in the HTML equal the SQL views' (read back from each element's
data-value), the reconciliation holds to the cent, the file fetches nothing, bad input is one line, it works on
both stores, and headless Chromium draws it (a screenshot for docs/ when GPULEDGER_SCREENSHOTS names a folder).

The hand-built month (November 2026, two H100s at $2 per GPU-hour reporting all of Nov 2, and all of Oct 31 for the
month before; node n1 is listed with 3 GPUs, so one never reports):
- A, vision: all of G1, Nov 2 00:00-12:00: 12 GPU-hours, $24 (G1 50 % busy all day);
- B, nlp: all of G2, Nov 2 06:00-10:00: 4 GPU-hours, $8, every one idle (G2 at 0 % then): 4 idle GPU-hours;
- U, no tenant (namespace scratch): all of G2, Nov 2 12:00-14:00: 2 GPU-hours, $4;
- idle: G1 12 h + G2 18 h = 30 GPU-hours, $60. Month: $96.
- October: C, vision, all of G1 for Oct 31: $48; G2 idle all day: $48. Month: $96.
Idle policy none: vision 24, nlp 8, no tenant 4, idle line 60 (October: vision 48, idle 48).
Idle policy proportional: the $60 by cost 24 : 8 : 4: vision 64, nlp 21.33, no tenant 10.67 (October: vision 96).
Capacity of Nov 2: 3 GPUs x 24 h = 72 GPU-hours: 48 reported, 24 down; allocated 18, of which active 14 (hour by
hour: 6 + 1 x 4 + 2 + 2; 06:00-10:00 only G1 is busy), unallocated 30.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
import shutil
import subprocess
from pathlib import Path

import lxml.html
import pytest

from gpuledger.analytics.runner import run
from gpuledger.config import Rate, defaults
from gpuledger.query import Lake
from gpuledger.report import write_report

from builders import H100, at, epoch_us, finished_job, write_rows
from conftest import REPO

SHOTS = os.environ.get("GPULEDGER_SCREENSHOTS")  # a folder: save the report's screenshot there (docs/screenshots)
RATES = (Rate("H100", 2.0, dt.date(2026, 1, 1)),)


def config(policy: str):
    cfg = defaults()
    return dataclasses.replace(cfg, rates=RATES, analytics=dataclasses.replace(cfg.analytics, idle_policy=policy))


# -- reading the report back ---------------------------------------------------------------------------------------
def parse(path: Path):
    return lxml.html.fromstring(path.read_text())


def _num(v: str | None):
    """A data-value: None when empty, a float when it reads as one, else its text (a date, a flag)."""
    if v in (None, ""):
        return None
    try:
        return float(v)
    except ValueError:
        return v


def value(doc, id_: str):
    return _num(doc.get_element_by_id(id_).get("data-value"))


def rows(doc, table_id: str) -> dict[str, dict[str, float | str | None]]:
    """data-key -> column -> its data-value (a float, or None), or a text cell's text."""
    out = {}
    for tr in doc.get_element_by_id(table_id).iter("tr"):
        if tr.get("data-key") is None:
            continue
        out[tr.get("data-key")] = {
            td.get("data-col"): (_num(td.get("data-value")) if "data-value" in td.attrib else td.text_content())
            for td in tr.iter("td")
        }
    return out


def sql(lake, query: str, params=None) -> list[dict]:
    names = set(re.findall(r"\$(\w+)", query))
    with Lake(lake) as q:
        return q.execute(query, {k: v for k, v in (params or {}).items() if k in names}).frame.to_dicts()


def same(a, b):
    """Equal to the cent and to 1e-9 relative: the report's sums run over the same rows as the test's."""
    if a is None or b is None:
        return a is None and b is None
    return round(a, 2) == round(b, 2) and a == pytest.approx(b, rel=1e-9, abs=1e-9)


# -- the hand-built month ------------------------------------------------------------------------------------------
def samples(start, end, busy, jobs):
    """G1 and G2 every 5 minutes in [start, end); busy(gpu, t) -> utilization %; the pod of the job holding it."""
    rows_, t = [], start
    while t < end:
        for g in ("G1", "G2"):
            pod = next(
                (
                    f"pod-{j['job_id']}"
                    for j in jobs
                    if j["gpu_uuids"] == [g] and j["scheduled_at"] <= epoch_us(t) < j["finished_at"]
                ),
                None,
            )
            row = dict(
                cluster="default", node="n1", gpu_uuid=g, model=H100, util_gpu_pct=busy(g, t), source="t", pod=pod
            )
            rows_.append(row | {"ts": epoch_us(t)})
        t += dt.timedelta(minutes=5)
    return rows_


job = finished_job  # tests/builders.py


@pytest.fixture(scope="module", params=["none", "proportional"])
def hand_lake(request, tmp_path_factory):
    lake = tmp_path_factory.mktemp(f"report-{request.param}") / "lake"
    b_idle = (at(2, 6), at(2, 10))
    jobs = [
        job("C", "vision", "G1", at(31, month=10), at(1)),
        job("A", "vision", "G1", at(2, 0), at(2, 12)),
        job("B", "nlp", "G2", at(2, 6), at(2, 10)),
        job("U", None, "G2", at(2, 12), at(2, 14), namespace="scratch"),
    ]
    write_rows(
        lake,
        "gpu_samples",
        samples(at(31, month=10), at(1), lambda g, t: 50.0, jobs)
        + samples(at(2), at(3), lambda g, t: 0.0 if g == "G2" and b_idle[0] <= t < b_idle[1] else 50.0, jobs),
    )
    write_rows(lake, "jobs", jobs)
    node = dict(
        cluster="default",
        node="n1",
        gpu_model=H100,
        gpu_count=3,
        source="t",
        first_seen=epoch_us(at(31, month=10)),
        last_seen=epoch_us(at(2, 23, 55)),
    )
    write_rows(lake, "nodes", [node])
    cfg = config(request.param)
    run(lake, until_s=at(3).timestamp(), cfg=cfg)
    return request.param, lake, cfg


def test_the_hand_built_month_is_what_the_hand_computation_says(hand_lake, tmp_path):
    policy, lake, cfg = hand_lake
    out = tmp_path / "nov.html"
    s = write_report(lake, cfg, "2026-11", out)
    doc = parse(out)
    assert s.partial and doc.get_element_by_id("partial").get("data-value") == "true"
    assert value(doc, "total-usd") == 96.0 and value(doc, "prev-total-usd") == 96.0
    cb = rows(doc, "chargeback")
    if policy == "none":
        expect = {"vision": 24.0, "nlp": 8.0, "(jobs of no tenant)": 4.0, "(idle, not shared)": 60.0}
        prev = {"vision": 48.0, "(idle, not shared)": 48.0}
    else:
        expect = {"vision": 64.0, "nlp": 96 * 8 / 36, "(jobs of no tenant)": 96 * 4 / 36}
        prev = {"vision": 96.0}
    for key, usd in expect.items():
        assert cb[key]["total_usd"] == pytest.approx(usd, abs=1e-9), key
    for key, usd in prev.items():
        assert cb[key]["prev_total_usd"] == pytest.approx(usd, abs=1e-9), key
    assert (policy == "none") == ("(idle, not shared)" in cb)
    # Tenants of the config with no cost still show their budget: research's 8,000, nothing used.
    assert cb["research"]["budget_usd"] == 8000.0 and cb["research"]["budget_used_pct"] == 0.0
    assert cb["vision"]["budget_used_pct"] == pytest.approx(100 * expect["vision"] / 40000)
    # The reconciliation: tenants + jobs of no tenant + idle not shared = 96, to the cent.
    assert doc.get_element_by_id("reconciliation").get("data-holds") == "true" and s.reconciles
    parts = [value(doc, i) for i in ("recon-tenants-usd", "recon-unclaimed-usd", "recon-idle-usd")]
    assert parts == pytest.approx(
        [
            96 - expect["(jobs of no tenant)"] - (60.0 if policy == "none" else 0.0),
            expect["(jobs of no tenant)"],
            60.0 if policy == "none" else 0.0,
        ],
        abs=1e-9,
    )
    assert round(sum(parts), 2) == round(value(doc, "recon-total-usd"), 2) == 96.0
    assert abs(value(doc, "recon-diff-usd")) < 0.005
    assert cb["total"]["total_usd"] == pytest.approx(96.0)
    # Active against allocated, per tenant and per model; the capacity states add up to 72 GPU-hours.
    use = rows(doc, "usage")
    assert (use["vision"]["allocated_gpu_hours"], use["vision"]["active_gpu_hours"]) == pytest.approx((12.0, 6.0))
    assert (use["nlp"]["allocated_gpu_hours"], use["nlp"]["idle_gpu_hours"]) == pytest.approx((4.0, 4.0))
    cap = rows(doc, "capacity")[f"default/{H100}"]
    states = [
        cap[c] for c in ("active_gpu_hours", "allocated_idle_gpu_hours", "unallocated_gpu_hours", "down_gpu_hours")
    ]
    assert states == pytest.approx([14.0, 4.0, 30.0, 24.0]) and cap["capacity_gpu_hours"] == 72.0
    assert cap["inventory_gpus"] == 3
    assert value(doc, "active-gpu-hours") == pytest.approx(14.0) and value(doc, "allocated-gpu-hours") == 18.0
    # The top idle holder is B, all 4 of its GPU-hours idle.
    top = rows(doc, "idle-jobs")
    assert list(top) == ["B"] and top["B"]["idle_gpu_hours"] == pytest.approx(4.0)
    assert doc.get_element_by_id("idle-method").get("data-value") == policy
    assert f'idle_policy = "{policy}"' in doc.get_element_by_id("idle-method").text_content()


# -- the simulated lake: every number equals the views' ------------------------------------------------------------
MONTH = {"start": dt.date(2026, 10, 1), "end": dt.date(2026, 11, 1), "prev": dt.date(2026, 9, 1)}


@pytest.fixture(scope="module")
def october(dash_lake, tmp_path_factory):
    from click.testing import CliRunner

    from gpuledger.cli import main

    out = tmp_path_factory.mktemp("report") / "october.html"
    r = CliRunner().invoke(main, ["report", "--lake", str(dash_lake), "--month", "2026-10", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("wrote the 2026-10 report (complete month, 5 tenant(s), ")
    return out


def test_the_reports_numbers_equal_the_views(october, dash_lake):
    doc = parse(october)
    p = dict(MONTH)
    total = sql(
        dash_lake,
        "SELECT CAST(sum(BilledCost) AS DOUBLE) AS t FROM focus_cost WHERE ChargePeriodStart >= "
        "CAST($start AS TIMESTAMPTZ) AND ChargePeriodStart < CAST($end AS TIMESTAMPTZ)",
        p,
    )[0]["t"]
    assert total > 1000 and same(value(doc, "total-usd"), total)
    cb = rows(doc, "chargeback")
    views = sql(dash_lake, "SELECT * FROM chargeback_monthly WHERE month IN ($start, $prev)", p)
    now = {v["tenant"]: v for v in views if v["month"] == p["start"]}
    before = {v["tenant"]: v for v in views if v["month"] == p["prev"]}
    assert set(now) == {k for k in cb if k != "total"}
    for tenant, v in now.items():
        for col in ("cost_usd", "idle_share_usd", "total_usd", "budget_usd", "budget_used_pct"):
            assert same(cb[tenant][col], v[col]), (tenant, col)
        assert same(cb[tenant]["prev_total_usd"], before[tenant]["total_usd"]), tenant
    assert same(value(doc, "recon-tenants-usd"), sum(v["total_usd"] for v in now.values()))
    # Budgets against spend: the tenants that have one.
    budgeted = [v for v in now.values() if v["budget_usd"] is not None]
    assert same(value(doc, "budget-usd"), sum(v["budget_usd"] for v in budgeted))
    assert same(value(doc, "budgeted-spend-usd"), sum(v["total_usd"] for v in budgeted))
    # Spend per day against last month, and the last 7 days against the 7 before.
    days = sql(
        dash_lake,
        "SELECT count(DISTINCT date) FILTER (WHERE date >= $start) AS d, count(DISTINCT date) "
        "FILTER (WHERE date < $start) AS p FROM cost_daily WHERE date >= $prev AND date < $end",
        p,
    )[0]
    spend = rows(doc, "spend")
    week = {
        r["tenant"]: r
        for r in sql(
            dash_lake,
            "SELECT tenant, sum(cost_usd + idle_share_usd) AS usd FROM "
            "cost_daily WHERE date BETWEEN '2026-10-25' AND '2026-10-31' GROUP BY 1",
        )
    }
    for tenant, v in now.items():
        assert same(spend[tenant]["daily_usd"], v["total_usd"] / days["d"]), tenant
        assert same(spend[tenant]["prev_daily_usd"], before[tenant]["total_usd"] / days["p"]), tenant
        assert same(spend[tenant]["last7_usd"], week[tenant]["usd"]), tenant
    # Active against allocated per tenant (job_hourly), capacity per model (fleet_hourly, nodes).
    use = rows(doc, "usage")
    for r in sql(
        dash_lake,
        "SELECT tenant, sum(allocated_gpu_hours) AS a, sum(busy_gpu_hours) AS b, "
        "sum(idle_gpu_hours) AS i FROM job_hourly WHERE date >= $start AND date < $end GROUP BY 1",
        p,
    ):
        got = use[r["tenant"]]
        assert same(got["allocated_gpu_hours"], r["a"]) and same(got["active_gpu_hours"], r["b"])
        assert same(got["idle_gpu_hours"], r["i"])
    cap = rows(doc, "capacity")
    for r in sql(
        dash_lake,
        "SELECT cluster, gpu_model, CAST(sum(gpus) AS DOUBLE) AS g, sum(least(allocated_gpus, "
        "gpus)) AS a FROM fleet_hourly WHERE date >= $start AND date < $end GROUP BY ALL",
        p,
    ):
        got = cap[f"{r['cluster']}/{r['gpu_model']}"]
        assert same(got["active_gpu_hours"] + got["allocated_idle_gpu_hours"], r["a"])
        assert same(got["active_gpu_hours"] + got["allocated_idle_gpu_hours"] + got["unallocated_gpu_hours"], r["g"])
        assert got["down_gpu_hours"] == 0.0 and got["capacity_gpu_hours"] == r["g"]  # every GPU reported
    # The top idle holders: the jobs with the most idle GPU-hours.
    top = sql(
        dash_lake,
        "SELECT job_id, sum(idle_gpu_hours) AS i FROM job_hourly WHERE date >= $start AND date < "
        "$end GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10",
        p,
    )
    # The same jobs in the same order; each sum to the last bits (DuckDB adds a job's hours in no fixed order, and
    # the simulator's services and parked notebooks sum hundreds of them).
    held = rows(doc, "idle-jobs")
    assert list(held) == [t["job_id"] for t in top]
    assert all(same(held[t["job_id"]]["idle_gpu_hours"], t["i"]) for t in top)
    # Queue waits as queue_stats computes them, over the jobs submitted in the month; fragmentation.
    queue = rows(doc, "queue")
    for r in sql(
        dash_lake,
        "SELECT cluster, gpu_model, count(*) AS n, quantile_cont(queue_s, 0.9) AS p90 FROM "
        "job_stats WHERE date >= $start AND date < $end AND scheduled_at IS NOT NULL GROUP BY ALL",
        p,
    ):
        got = queue[f"{r['cluster']}/{r['gpu_model']}"]
        assert got["scheduled"] == r["n"] and same(got["wait_p90_s"], r["p90"])
    for r in sql(
        dash_lake,
        "SELECT cluster, gpu_model, 100 * sum(fragmented_gpus) / sum(free_gpus) AS f FROM "
        "fragmentation WHERE date >= $start AND date < $end GROUP BY ALL",
        p,
    ):
        assert same(queue[f"{r['cluster']}/{r['gpu_model']}"]["frag_pct"], r["f"])
    # The capacity forecast: the chosen method, its error against seasonal naive, when demand exceeds supply.
    fc = rows(doc, "forecast")
    for r in sql(
        dash_lake,
        "SELECT DISTINCT cluster, gpu_model, method, backtest_mape_pct, baseline_mape_pct, "
        "exceeds_supply_earliest_day FROM demand_forecast WHERE kind = 'forecast'",
    ):
        got = fc[f"{r['cluster']}/{r['gpu_model']}"]
        assert got["method"] == r["method"]
        assert same(got["backtest_mape_pct"], r["backtest_mape_pct"])
        assert same(got["baseline_mape_pct"], r["baseline_mape_pct"])
        day = r["exceeds_supply_earliest_day"]
        assert got["exceeds_supply_earliest_day"] == (day.isoformat() if day else None)


def test_the_reconciliation_holds_to_the_cent(october):
    doc = parse(october)
    assert doc.get_element_by_id("reconciliation").get("data-holds") == "true"
    parts = sum(value(doc, i) for i in ("recon-tenants-usd", "recon-unclaimed-usd", "recon-idle-usd"))
    assert round(parts, 2) == round(value(doc, "recon-total-usd"), 2) == round(value(doc, "total-usd"), 2)
    assert rows(doc, "chargeback")["total"]["total_usd"] == pytest.approx(value(doc, "total-usd"), abs=0.005)


def test_a_partial_month_is_marked_and_a_complete_one_is_not(october, dash_lake, tmp_path):
    assert parse(october).get_element_by_id("partial").get("data-value") == "false"
    assert not parse(october).xpath('//*[@id="projected-usd"]')
    out = tmp_path / "nov.html"
    s = write_report(dash_lake, defaults(), "2026-11", out)  # the lake ends on Nov 2 00:00
    doc = parse(out)
    assert s.partial and doc.get_element_by_id("partial").get("data-value") == "true"
    assert "PARTIAL MONTH: data up to 2026-11-02 00:00 UTC" in doc.get_element_by_id("partial").text_content()
    assert value(doc, "projected-usd") == pytest.approx(value(doc, "total-usd") * 30)  # 24 of 720 hours


def test_the_report_references_nothing_outside_itself(october):
    text = october.read_text()
    doc = parse(october)
    refs = [v for el in doc.iter() for k, v in el.attrib.items() if k in ("src", "href", "xlink:href", "action")]
    assert refs == []
    assert not re.search(r"https?://|url\(|@import|<script|<link|<img|<iframe", text, re.I)
    assert len(doc.xpath("//svg")) >= 3  # the figures are inline


BAD = [
    (
        ["--month", "2026-13"],
        "Error: usage error: --month '2026-13': expected a calendar month as YYYY-MM, e.g. 2026-11",
    ),
    (["--month", "nov"], "Error: usage error: --month 'nov': expected a calendar month as YYYY-MM, e.g. 2026-11"),
    (["--month", "2026-1"], "Error: usage error: --month '2026-1': expected a calendar month as YYYY-MM, e.g. 2026-11"),
    (
        ["--month", "2025-01"],
        "Error: usage error: --month 2025-01: no data for that month in the lake at {lake} (its "
        "cost covers 2026-10-31 to 2026-11-02; `gpuledger analyze` computes the cost of the telemetry there)",
    ),
    (
        ["--month", "2026-11", "--cluster", "east"],
        "Error: usage error: --cluster 'east': no cost in the lake for that cluster (clusters: default)",
    ),
    (
        ["--month", "2026-11", "--out", "{tmp}/no/such/r.html"],
        "Error: usage error: --out '{tmp}/no/such/r.html': the folder '{tmp}/no/such' does not exist",
    ),
]


@pytest.mark.parametrize("args, line", BAD)
def test_bad_input_is_one_line(args, line, cli, hand_lake, tmp_path):
    policy, lake, _ = hand_lake
    if policy != "none":
        pytest.skip("once is enough")
    out = tmp_path / "r.html"
    out.write_text("the last report")
    args = [a.format(tmp=tmp_path) for a in args]
    r = cli("report", "--lake", lake, *args, *([] if "--out" in args else ["--out", out]))
    assert r.exit_code == 1 and r.output.count("\n") == 1, r.output
    assert r.output.strip() == line.format(lake=lake, tmp=tmp_path)
    assert out.read_text() == "the last report"  # nothing written over it


def test_an_unwritable_out_is_one_line(cli, hand_lake, tmp_path):
    """We run as root, whom chmod does not stop: a read-only tmpfs does (skipped where mounting is not allowed)."""
    _, lake, _ = hand_lake
    mnt = tmp_path / "ro"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(mnt)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        r = cli("report", "--lake", lake, "--month", "2026-11", "--out", mnt / "r.html")
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)
    assert r.exit_code == 1 and r.output.count("\n") == 1, r.output
    assert r.output == (f"Error: usage error: --out '{mnt}/r.html': cannot write {mnt}/r.html: read-only file system\n")


def test_the_report_is_written_atomically(hand_lake, tmp_path):
    _, lake, cfg = hand_lake
    out = tmp_path / "r.html"
    write_report(lake, cfg, "2026-11", out)
    first = out.read_bytes()
    write_report(lake, cfg, "2026-11", out)  # over the last one: a rename, no temp file left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]
    assert len(out.read_bytes()) == len(first) and out.read_text().endswith("</html>\n")


def test_the_report_of_an_s3_lake_is_the_local_ones(s3, hand_lake, tmp_path):
    from gpuledger.store import open_store

    from s3_server import upload

    _, lake, cfg = hand_lake
    remote = open_store(f"s3://{s3.bucket}/fleet/lake")
    assert upload(lake, remote) > 10
    local, there = tmp_path / "local.html", tmp_path / "s3.html"
    write_report(lake, cfg, "2026-11", local)
    write_report(remote, cfg, "2026-11", there)

    def numbers(path):
        return [
            (el.get("id"), el.get("data-col"), el.get("data-value"))
            for el in parse(path).iter()
            if el.get("data-value") is not None
        ]

    assert numbers(there) == numbers(local) and len(numbers(local)) > 100
    assert f"Lake s3://{s3.bucket}/fleet/lake" in there.read_text()


# -- in a browser --------------------------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("chromedriver") is None, reason="Debian chromium and chromium-driver not installed")
def test_chromium_draws_the_report_and_fetches_nothing(october):
    from selenium import webdriver
    from selenium.webdriver.remote.remote_connection import RemoteConnection

    from conftest import pytest_setup_options

    RemoteConnection.set_timeout(60)  # tests/conftest.py says why
    driver = webdriver.Chrome(options=pytest_setup_options())
    try:
        driver.get(october.as_uri())
        assert driver.find_element_by_id("total-usd").text == f"{value(parse(october), 'total-usd'):,.2f}"
        assert driver.execute_script("return performance.getEntriesByType('resource').length") == 0
        assert driver.get_log("browser") == []
        for fig in ("fig-daily", "fig-capacity", "fig-forecast-0"):
            size = driver.find_element_by_id(fig).size
            assert size["width"] > 300 and size["height"] > 100, fig
        if SHOTS:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            height = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(1400, height + 140)  # the window's chrome: the page, whole, 1400 px wide
            driver.save_screenshot(str(Path(SHOTS) / "report.png"))
    finally:
        driver.quit()


def test_the_docs_show_the_reports_screenshot():
    data = (REPO / "docs" / "screenshots" / "report.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(data[16:20], "big") == 1400
    assert "](screenshots/report.png)" in (REPO / "docs" / "report.md").read_text()
