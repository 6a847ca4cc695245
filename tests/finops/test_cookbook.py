"""The cookbook of docs/finops.md, run: every `-- cookbook:` query goes through Lake on an analysed simulated lake, and
each answer is checked against the same figure worked out in polars from the lake's tables (never by re-running SQL).

The lake is the session's small simulated one (3 nodes x 4 GPUs, the day before conftest.END) plus five October jobs
imported from a jobs file (one of them with no tenant), so "last month", several weeks, unclaimed GPU time and FOCUS
rows without a GPU all exist. It is analysed with a config whose budgets differ from the built-in ones and whose H100
price changes at 12:00 on 2026-11-01, so a query that took budgets or prices from anywhere but the lake would not match.
"""

import dataclasses
import datetime as dt
import re
import shlex
import shutil

import polars as pl
import pytest
from click.testing import CliRunner

from gpuledger.analytics.imports.jobs_file import import_jobs_file
from gpuledger.analytics.runner import run
from gpuledger.cli import main
from gpuledger.config import DEFAULT_RATES, DEFAULT_TENANTS, Rate, defaults
from gpuledger.lake import scan
from gpuledger.query import Lake

from builders import END, at
from conftest import REPO

DOC = REPO / "docs" / "finops.md"
NAMES = {
    "cost_per_tenant_last_month",
    "top_idle_jobs",
    "wait_p90_by_model_week",
    "budget_burn_down",
    "fragmentation_lost",
    "efficiency_by_tenant",
    "focus_cost_by_tenant",
}
H100 = "NVIDIA H100 80GB HBM3"
NOON = at(1, 12)
BUDGETS = {"vision": 5000.0, "nlp": 4000.0, "recsys": 1500.0, "research": 1000.0, "platform": None}
CFG = dataclasses.replace(
    defaults(),
    tenants=tuple(dataclasses.replace(t, budget_usd_per_month=BUDGETS[t.name]) for t in DEFAULT_TENANTS),
    rates=(*DEFAULT_RATES, Rate(H100, 2.99, NOON)),
)
OCTOBER_JOBS = """\
job_id,tenant,gpu_model,gpus,submitted_at,scheduled_at,finished_at,status
oct-1,vision,NVIDIA H100 80GB HBM3,2,2026-10-13T08:00:00Z,2026-10-13T08:10:00Z,2026-10-13T12:10:00Z,succeeded
oct-2,nlp,NVIDIA H100 80GB HBM3,1,2026-10-14T09:00:00Z,2026-10-14T09:30:00Z,2026-10-14T11:30:00Z,succeeded
oct-3,nlp,NVIDIA A100-SXM4-80GB,4,2026-10-20T00:00:00Z,2026-10-20T01:00:00Z,2026-10-20T03:00:00Z,failed
oct-4,research,NVIDIA A100-SXM4-80GB,1,2026-10-21T10:00:00Z,2026-10-21T10:00:30Z,2026-10-21T20:00:30Z,succeeded
oct-5,,NVIDIA L40S,1,2026-10-22T09:00:00Z,2026-10-22T09:05:00Z,2026-10-22T15:05:00Z,succeeded
"""
# The parameters each query is run with: the first set is the one every query must return rows for.
PARAMS = {
    "cost_per_tenant_last_month": [{"month": "2026-11-01"}, {"month": "2026-10-01"}, {"month": "2026-09-01"}],
    "top_idle_jobs": [{"since": "2026-10-01"}, {"since": "2026-11-01"}],
    "wait_p90_by_model_week": [{"since": "2026-10-01"}, {"since": "2026-10-19"}],
    "budget_burn_down": [{"now": "2026-11-02T00:00:00Z"}, {"now": "2026-10-31T18:00:00Z"}],
    "fragmentation_lost": [{"month": "2026-11-01"}, {"month": "2026-10-01"}],
    "efficiency_by_tenant": [{"month": "2026-11-01"}, {"month": "2026-10-01"}],
    "focus_cost_by_tenant": [{"month": "2026-11-01"}, {"month": "2026-10-01"}],
}


def cookbook() -> dict[str, str]:
    """Name -> SQL of every fenced ```sql block of the doc whose first line is `-- cookbook: <name>`."""
    out = {}
    for block in re.findall(r"^```sql\n(.*?)^```$", DOC.read_text(), re.S | re.M):
        m = re.fullmatch(r"-- cookbook: (\S+)", block.split("\n", 1)[0])
        if m:
            assert m[1] not in out, f"two cookbook queries named {m[1]}"
            out[m[1]] = block
    return out


@pytest.fixture(scope="module")
def lake(small_lake, tmp_path_factory):
    root = tmp_path_factory.mktemp("cookbook")
    lake = root / "lake"
    shutil.copytree(small_lake, lake)
    (root / "october.csv").write_text(OCTOBER_JOBS)
    assert import_jobs_file(root / "october.csv", lake, CFG).rows_imported == 5
    run(lake, until_s=END, cfg=CFG)
    return lake


def ask(lake, name: str, **params) -> pl.DataFrame:
    with Lake(lake) as q:
        return q.execute(cookbook()[name], params).frame


def table(lake, name: str) -> pl.DataFrame:
    return scan(lake, name).collect()


def in_month(col: str, month: str) -> pl.Expr:
    """Rows whose `col` (a UTC timestamp or date) lies in the calendar month starting on `month`."""
    start = dt.date.fromisoformat(month)
    end = dt.date(start.year + start.month // 12, start.month % 12 + 1, 1)
    c = pl.col(col).dt.date() if col != "date" else pl.col(col)
    return (c >= start) & (c < end)


def price_at(model: str, at: dt.datetime) -> float:
    """The config's rate for an exact model name at an instant (the rate card, not the lake)."""
    return max(
        (r.effective_from, r.usd_per_gpu_hour) for r in CFG.rates if r.gpu_model == model and r.effective_from <= at
    )[1]


def same(got: pl.DataFrame, want: pl.DataFrame, keys: list[str]) -> None:
    """Every column of `want` equals `got`'s (floats approximately), row by row after sorting both by `keys`."""
    assert got.height == want.height, (got, want)
    got, want = got.sort(keys, nulls_last=True), want.sort(keys, nulls_last=True)
    for c in want.columns:
        g, w = got[c].to_list(), want[c].to_list()
        if want[c].dtype.is_float() or got[c].dtype.is_decimal():
            assert [v is None for v in g] == [v is None for v in w], c
            g, w = [float(v) for v in g if v is not None], [v for v in w if v is not None]
            assert g == pytest.approx(w, rel=1e-9, abs=1e-9), c
        else:
            assert g == w, c


# -- the doc's cookbook, as a whole -------------------------------------------------------------------------------
def test_the_cookbook_has_exactly_the_agreed_queries():
    queries = cookbook()
    assert set(queries) == NAMES
    # A cookbook comment anywhere else (a block with another fence, or the comment not first) would be skipped.
    assert DOC.read_text().count("-- cookbook:") == len(queries)


@pytest.mark.parametrize("name", sorted(NAMES))
def test_each_query_takes_exactly_its_parameters_and_returns_rows(lake, name):
    sql = cookbook()[name]
    code = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())  # parameters named in comments don't count
    for params in PARAMS[name]:
        assert set(re.findall(r"\$(\w+)", code)) == set(params), name
    assert ask(lake, name, **PARAMS[name][0]).height > 0


def test_the_documented_command_lines_run(lake, tmp_path):
    """Each `gpuledger sql --file <name>.sql --param ...` line of the doc runs that query and gives its rows."""
    cookbook_section = DOC.read_text().split("\n## Cookbook\n", 1)[1]
    lines = re.findall(r"^gpuledger sql --file (\w+)\.sql(.*)$", cookbook_section, re.M)
    assert {name for name, _ in lines} == NAMES
    queries = cookbook()
    for name, rest in lines:
        (tmp_path / f"{name}.sql").write_text(queries[name])
        args = shlex.split(rest)
        params = dict(a.split("=", 1) for a in args[1::2] if "=" in a)
        r = CliRunner().invoke(
            main, ["sql", "--lake", str(lake), "--file", str(tmp_path / f"{name}.sql"), *args, "--format", "csv"]
        )
        assert r.exit_code == 0, (name, r.output)
        want = ask(lake, name, **params)
        assert want.height > 0 and r.output.count("\n") == want.height + 1, name


# -- each answer against polars ---------------------------------------------------------------------------------
@pytest.mark.parametrize("month", ["2026-11-01", "2026-10-01"])
def test_cost_per_tenant_last_month(lake, month):
    got = ask(lake, "cost_per_tenant_last_month", month=month)
    want = (
        table(lake, "cost_daily")
        .filter(in_month("day_start", month))
        .with_columns(
            pl.when(pl.col("tenant").is_not_null())
            .then("tenant")
            .when(pl.col("gpu_hours") > 0)
            .then(pl.lit("(no tenant)"))
            .otherwise(pl.lit("(idle, not shared)"))
            .alias("tenant")
        )
        .group_by("cluster", "tenant")
        .agg(pl.col("gpu_hours").sum(), pl.col("cost_usd").sum(), pl.col("idle_share_usd").sum())
        .with_columns((pl.col("cost_usd") + pl.col("idle_share_usd")).alias("total_usd"))
        .with_columns((100 * pl.col("total_usd") / pl.col("total_usd").sum().over("cluster")).alias("share_pct"))
    )
    same(got, want, ["cluster", "tenant"])
    assert got["total_usd"].to_list() == sorted(got["total_usd"].to_list(), reverse=True)
    if month == "2026-10-01":  # the imported jobs and the sim's jobs of Oct 31; no telemetry, so no idle capacity
        held_in_october = (
            table(lake, "jobs").filter(pl.col("scheduled_at") < at(1)).select(pl.col("tenant").fill_null("(no tenant)"))
        )
        assert set(got["tenant"]) == set(held_in_october["tenant"]) >= {"vision", "nlp", "research", "(no tenant)"}
        assert got["idle_share_usd"].sum() == 0
    else:
        assert set(got["tenant"]) == set(BUDGETS) and got["idle_share_usd"].sum() > 0
    assert ask(lake, "cost_per_tenant_last_month", month="2026-09-01").height == 0


@pytest.mark.parametrize("since", ["2026-10-01", "2026-11-01"])
def test_top_idle_jobs(lake, since):
    got = ask(lake, "top_idle_jobs", since=since)
    alloc = table(lake, "cost_allocation").filter(pl.col("job_id").is_not_null())
    price = alloc.group_by("cluster", "job_id").agg(
        (pl.col("cost_usd").sum() / pl.col("gpu_hours").sum()).alias("usd_per_gpu_hour")
    )
    jobs = table(lake, "job_stats").filter(
        (pl.col("idle_gpu_hours") > 0) & (pl.col("date") >= dt.date.fromisoformat(since))
    )
    want = (
        jobs.join(price, on=["cluster", "job_id"])
        .with_columns(
            (pl.col("idle_gpu_hours") * pl.col("usd_per_gpu_hour")).alias("idle_usd"),
            (pl.col("idle_gpu_hours") / pl.col("allocated_gpu_hours")).alias("idle_ratio"),
        )
        .sort(["idle_usd", "job_id"], descending=[True, False])
        .head(10)
        .select("job_id", "tenant", "idle_gpu_hours", "idle_ratio", "usd_per_gpu_hour", "idle_usd", "cost_usd")
    )
    assert got["job_id"].to_list() == want["job_id"].to_list()  # the order matters: it is a ranking
    same(got, want, ["job_id"])
    assert want.height == min(10, jobs.height)
    # Where no price changed during the job, its price is the rate card's (the H100 changed at noon on Nov 1).
    for row in got.filter(pl.col("gpu_model") != H100).iter_rows(named=True):
        assert row["usd_per_gpu_hour"] == pytest.approx(price_at(row["gpu_model"], NOON))


def test_top_idle_jobs_shows_the_ten_most_costly_of_more(dash_lake):
    """The cut at ten, on the session's 35-day lake: the small lake's day has fewer idle jobs than that (9 since the
    simulator runs workload classes: its idle jobs are parked notebooks, stalled training runs and services at
    night, fewer and longer than the idle jobs it drew before)."""
    got = ask(dash_lake, "top_idle_jobs", since="2026-10-01")
    jobs = table(dash_lake, "job_stats").filter(
        (pl.col("idle_gpu_hours") > 0) & (pl.col("date") >= dt.date(2026, 10, 1))
    )
    assert jobs.height > 10 and got.height == 10
    # A ranking: the most costly idle time first (test_top_idle_jobs checks the figures against polars).
    assert got["idle_usd"].min() > 0 and got["idle_usd"].to_list() == sorted(got["idle_usd"], reverse=True)


@pytest.mark.parametrize("since", ["2026-10-01", "2026-10-19"])
def test_wait_p90_by_model_week(lake, since):
    got = ask(lake, "wait_p90_by_model_week", since=since)
    want = (
        table(lake, "job_stats")
        .filter(
            pl.col("scheduled_at").is_not_null()
            & (pl.col("submitted_at") >= dt.datetime.fromisoformat(since + "T00:00:00+00:00"))
        )
        .group_by("cluster", "gpu_model", pl.col("submitted_at").dt.date().dt.truncate("1w").alias("week"))
        .agg(
            pl.len().alias("jobs"),
            pl.col("queue_s").quantile(0.5, "linear").alias("wait_p50_s"),
            pl.col("queue_s").quantile(0.9, "linear").alias("wait_p90_s"),
            pl.col("queue_s").max().alias("wait_max_s"),
        )
    )
    same(got, want, ["cluster", "gpu_model", "week"])
    weeks = {dt.date(2026, 10, 12), dt.date(2026, 10, 19), dt.date(2026, 10, 26)}  # Mondays
    assert set(got["week"]) == (weeks if since == "2026-10-01" else weeks - {dt.date(2026, 10, 12)})


@pytest.mark.parametrize("now", [at(2), at(31, 18, month=10)])
def test_budget_burn_down(lake, now):
    got = ask(lake, "budget_burn_down", now=now.isoformat())
    start = now.replace(day=1, hour=0)
    end = start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
    elapsed = (now - start) / (end - start)
    cost = table(lake, "cost_daily")
    spent = dict(
        cost.filter(pl.col("tenant").is_not_null() & (pl.col("day_start") >= start) & (pl.col("day_start") < now))
        .group_by("tenant")
        .agg((pl.col("cost_usd").fill_null(0) + pl.col("idle_share_usd").fill_null(0)).sum())
        .iter_rows()
    )
    rows = []
    for t in CFG.tenants:  # budgets from the config the lake was analysed with, not from the lake
        s, b = spent.get(t.name, 0.0), t.budget_usd_per_month
        rows.append(
            {
                "tenant": t.name,
                "month": start.date(),
                "budget_usd": b,
                "spent_usd": s,
                "left_usd": None if b is None else b - s,
                "used_pct": None if b is None else 100 * s / b,
                "month_elapsed_pct": 100 * elapsed,
                "projected_usd": s / elapsed,
                "projected_pct": None if b is None else 100 * s / elapsed / b,
            }
        )
    same(got, pl.DataFrame(rows), ["tenant"])
    assert got["projected_pct"].drop_nulls().to_list() == sorted(got["projected_pct"].drop_nulls(), reverse=True)
    # Every tenant spent in November; in October the three with imported jobs did, and any the simulated fleet's
    # jobs of Oct 31 belong to.
    spent_by = {t for t, usd in spent.items() if usd > 0}
    assert set(got.filter(pl.col("spent_usd") > 0)["tenant"]) == spent_by
    assert spent_by == set(BUDGETS) if now.month == 11 else spent_by >= {"vision", "nlp", "research"}


@pytest.mark.parametrize("month", ["2026-11-01", "2026-10-01"])
def test_fragmentation_lost(lake, month):
    got = ask(lake, "fragmentation_lost", month=month)
    frag = table(lake, "fragmentation").filter(in_month("date", month))
    priced = frag.with_columns(
        pl.struct("gpu_model", "ts")
        .map_elements(lambda r: price_at(r["gpu_model"], r["ts"]), return_dtype=pl.Float64)
        .alias("usd_per_gpu_hour")
    )
    want = (
        priced.group_by("cluster", "gpu_model", pl.col("date").alias("day"))
        .agg(
            pl.len().alias("hours"),
            pl.col("free_gpus").sum().alias("free_gpu_hours"),
            pl.col("fragmented_gpus").sum().alias("fragmented_gpu_hours"),
            (pl.col("fragmented_gpus") * pl.col("usd_per_gpu_hour")).sum().alias("fragmented_usd"),
        )
        .with_columns((pl.col("fragmented_gpu_hours") / pl.col("free_gpu_hours")).alias("fragmented_share"))
    )
    same(got, want, ["cluster", "gpu_model", "day"])
    if month == "2026-11-01":
        assert set(got["hours"]) == {24} and got["fragmented_gpu_hours"].sum() > 0
        # The H100's noon price change is in the dollars: they differ from pricing the whole day at one rate.
        h = got.filter(pl.col("gpu_model") == H100).row(0, named=True)
        assert h["fragmented_usd"] != pytest.approx(h["fragmented_gpu_hours"] * price_at(H100, NOON))
    else:
        assert got.height == 0  # no telemetry in October


@pytest.mark.parametrize("month", ["2026-11-01", "2026-10-01"])
def test_efficiency_by_tenant(lake, month):
    got = ask(lake, "efficiency_by_tenant", month=month)
    hourly = table(lake, "job_hourly").filter(in_month("hour", month))
    measured = pl.col("measured")
    want = (
        hourly.group_by("cluster", "tenant")
        .agg(
            pl.col("allocated_gpu_hours").sum(),
            pl.col("allocated_gpu_hours").filter(measured).sum().alias("_m"),
            pl.col("busy_gpu_hours").filter(measured).sum().alias("_b"),
            measured.any().alias("_any"),
            pl.col("idle_gpu_hours").sum(),
        )
        .with_columns(
            pl.when("_any").then(pl.col("_m")).alias("measured_gpu_hours"),
            pl.when("_any").then(pl.col("_b")).alias("busy_gpu_hours"),
            pl.when(pl.col("_m") > 0).then(pl.col("_b") / pl.col("_m")).alias("efficiency"),
            (pl.col("idle_gpu_hours") / pl.col("allocated_gpu_hours")).alias("idle_share"),
        )
        .drop("_m", "_b", "_any")
    )
    same(got, want, ["cluster", "tenant"])
    if month == "2026-11-01":
        assert set(got["tenant"]) == set(BUDGETS) and got["efficiency"].is_between(0, 1).all()
    else:  # the October jobs that held GPUs ran before telemetry started: held, never measured
        assert set(got["tenant"]) == set(hourly["tenant"]) and got["efficiency"].is_null().all()


@pytest.mark.parametrize("month", ["2026-11-01", "2026-10-01"])
def test_focus_cost_by_tenant(lake, month):
    got = ask(lake, "focus_cost_by_tenant", month=month)
    alloc = table(lake, "cost_allocation").filter(in_month("period_start", month))
    label = (
        pl.when(pl.col("job_id").is_null())
        .then(pl.lit("(unallocated)"))
        .otherwise(pl.col("tenant").fill_null("(no tenant)"))
    )
    want = (
        # An idle row of 0 GPU-hours (a GPU its jobs held all period) is no charge.
        alloc.filter(pl.col("job_id").is_not_null() | (pl.col("gpu_hours").abs() > 1e-9))
        .group_by(pl.col("cluster"), label.alias("tenant"))
        .agg(
            pl.len().alias("charges"),
            pl.col("gpu_hours").sum(),
            (pl.col("gpu_hours") * pl.col("usd_per_gpu_hour")).sum().alias("billed_cost_usd"),
        )
        .with_columns(
            (100 * pl.col("billed_cost_usd") / pl.col("billed_cost_usd").sum().over("cluster")).alias("share_pct")
        )
    )
    # FOCUS rounds each quantity to 1e-9 GPU-hours and each price to 1e-6 USD: equal to well within a cent.
    g, w = got.sort("tenant"), want.sort("tenant")
    assert g["tenant"].to_list() == w["tenant"].to_list() and g["charges"].to_list() == w["charges"].to_list()
    for c in ("gpu_hours", "billed_cost_usd", "share_pct"):
        assert [float(v) for v in g[c]] == pytest.approx(w[c].to_list(), abs=1e-6), c
    assert got["billed_cost_usd"].dtype.is_decimal()
    assert ("(unallocated)" in got["tenant"]) == (month == "2026-11-01")  # October has no telemetry: nothing idle
