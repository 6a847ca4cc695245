"""Two clusters in one lake (issue 16 item 3): every table and view keeps them apart.

Two simulated fleets, `eu-1` (seed 7, 3 nodes) and `us-1` (seed 8, 2 nodes), are written by `gpuledger simulate`
with a config each into one lake, and each alone into a lake of its own (the reference). Every us-1 job then takes
the id of an eu-1 job (the simulator hashes the cluster into its ids, so they would not collide by themselves; two
clusters' schedulers can well hand out the same id). `gpuledger analyze` runs once per cluster config on the shared
lake, as each cluster's analytics would. Then, for every lake table and every sql/ view, the shared lake's rows of a
cluster must be the rows of that cluster's own lake: nothing lost, nothing added from the other cluster.

A table (or view over it) that mixes the clusters today is marked xfail(strict=True) with what is wrong, for the
analytics to fix: when it is fixed, the strict xfail fails and the mark comes off.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest
from focus_rules import check_focus
from polars.testing import assert_frame_equal

from gpuledger import schema
from gpuledger.lake import has_data
from gpuledger.query import Lake, sql_files

CLUSTERS = {"eu-1": {"seed": 7, "nodes": 3}, "us-1": {"seed": 8, "nodes": 2}}
END_ISO = "2026-11-03T00:00:00Z"  # two days, both in November: one FOCUS billing period
VOLATILE = ("computed_at",)  # the time an analysis ran: two runs never share it


def _config(folder: Path, cluster: str) -> Path:
    path = folder / f"{cluster}.toml"
    path.write_text(f'cluster = "{cluster}"\n')
    return path


def _simulate(cli, lake: Path, config: Path, seed: int, nodes: int) -> None:
    r = cli(
        "simulate", "--lake", lake, "--config", config, "--nodes", nodes, "--gpus-per-node", 4, "--days", 2,
        "--step-s", 600, "--seed", seed, "--models", "H100,A100", "--end", END_ISO, "--workers", 1,
    )  # fmt: skip
    assert r.exit_code == 0, r.output


def _first_seen_ids(lake: Path) -> list[str]:
    jobs = pl.read_parquet(lake / "jobs" / "**" / "*.parquet")
    return jobs.group_by("job_id").agg(pl.col("updated_at").min()).sort("updated_at", "job_id")["job_id"].to_list()


def _rename_jobs(lake: Path, cluster: str, ids: dict[str, str]) -> None:
    """Give `cluster`'s jobs in `lake` the ids `ids` maps them to (rows of other clusters untouched)."""
    for f in sorted((lake / "jobs").rglob("*.parquet")):
        rows = pl.read_parquet(f)
        mine = pl.col("cluster") == cluster
        rows.with_columns(
            pl.when(mine).then(pl.col("job_id").replace(ids)).otherwise("job_id").alias("job_id")
        ).write_parquet(f)


@pytest.fixture(scope="module")
def lakes(tmp_path_factory) -> dict[str, Path]:
    """{"eu-1": its own lake, "us-1": its own lake, "both": the shared one}, each analysed per cluster config."""
    from click.testing import CliRunner

    from gpuledger.cli import main

    runner = CliRunner()

    def cli(*args):
        return runner.invoke(main, [str(a) for a in args], catch_exceptions=False)

    root = tmp_path_factory.mktemp("multi")
    out = {name: root / name for name in (*CLUSTERS, "both")}
    configs = {c: _config(root, c) for c in CLUSTERS}
    for c, fleet in CLUSTERS.items():
        for lake in (out[c], out["both"]):
            _simulate(cli, lake, configs[c], **fleet)
    # Every us-1 job takes the id of the eu-1 job first seen in the same order (us-1 has fewer jobs).
    collide = dict(zip(_first_seen_ids(out["us-1"]), _first_seen_ids(out["eu-1"]), strict=False))
    for lake in (out["us-1"], out["both"]):
        _rename_jobs(lake, "us-1", collide)
    for c in CLUSTERS:
        for lake in (out[c], out["both"]):
            r = cli("analyze", "--lake", lake, "--config", configs[c], "--to", END_ISO)
            assert r.exit_code == 0, r.output
            assert "claimed by two machines" not in r.output  # node names repeat across clusters, not within one
    return out


def _sortable(df: pl.DataFrame) -> list[str]:
    return [c for c, t in df.schema.items() if not t.is_nested()]


def assert_same_rows(mine: pl.DataFrame, alone: pl.DataFrame, what: str) -> None:
    """The same rows in any order (volatile columns aside; floats to 1e-9: sums in another order)."""
    drop = [c for c in VOLATILE if c in alone.columns]
    mine, alone = mine.drop(drop), alone.drop(drop).select(mine.drop(drop).columns)
    assert mine.height == alone.height, f"{what}: {mine.height} rows in the shared lake, {alone.height} alone"
    key = _sortable(alone)
    assert_frame_equal(mine.sort(key, nulls_last=True), alone.sort(key, nulls_last=True), rel_tol=1e-9)


def _xfail(name: str, reason: str):
    return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=reason))


# What is wrong today, per analytics table; the views over them inherit it (see VIEW_XFAILS).
TABLE_XFAILS = {
    "decisions": "decisions: each cluster's analyze replaces the whole table, so only the last cluster's rows remain",
    "tenants": "tenants: each cluster's analyze replaces the whole table, so only the last cluster's rows remain",
    "queue_depth": "queue_depth: each cluster's analyze rewrites it with every cluster's pending jobs under its "
    "own cluster name (the other cluster's rows are gone, its jobs counted in this one's queue)",
    "fragmentation": "fragmentation: the second cluster's analyze writes only the last few hours of its series, "
    "replacing the first cluster's rows of those hours (a watermark shared by the clusters, by the look of it)",
    "fleet_hourly": "fleet_hourly: pending_gpus, pending_gpus_max, pending_jobs_max and demand_gpus count every "
    "cluster's queued jobs (queue_depth mixes them), so the rows differ from the cluster's own lake",
    "demand_forecast": "demand_forecast: actual_gpus differs from the cluster's own lake (built on fleet_hourly's "
    "mixed demand)",
    "job_hourly": "job_hourly: idle_gpu_hours of a job joins idle time by job_id alone, so a colliding id of the "
    "other cluster changes it",
    "job_stats": "job_stats: idle_gpu_hours joins by job_id alone, so a colliding id of the other cluster changes it",
}


@pytest.mark.parametrize(
    "table", [_xfail(t, TABLE_XFAILS[t]) if t in TABLE_XFAILS else t for t in schema.TABLES]
)  # fmt: skip
def test_each_cluster_has_the_rows_of_its_own_lake(lakes, table):
    for c in CLUSTERS:
        if not has_data(lakes[c], table) and not has_data(lakes["both"], table):
            continue
        shared = _read(lakes["both"], table).filter(pl.col("cluster") == c)
        assert_same_rows(shared, _read(lakes[c], table), f"{table} of {c}")


def _read(lake: Path, table: str) -> pl.DataFrame:
    if not has_data(lake, table):
        return pl.DataFrame(schema=schema.table(table).polars_schema)
    return pl.read_parquet(lake / table / "**" / "*.parquet", hive_partitioning=True).select(
        schema.table(table).polars_schema.keys()
    )


def test_job_ids_collide_across_the_clusters(lakes):
    with Lake(lakes["both"]) as q:
        ids = q.execute("SELECT cluster, count(DISTINCT job_id) AS n FROM jobs GROUP BY 1 ORDER BY 1").rows
        shared = q.execute(
            "SELECT count(*) FROM (SELECT job_id FROM jobs GROUP BY job_id HAVING count(DISTINCT cluster) = 2)"
        ).rows
    (n_eu, n_us) = (n for _, n in ids)
    assert n_us < n_eu and shared == [(n_us,)]  # every us-1 job has an eu-1 twin


# The cluster column of a view that names it otherwise.
CLUSTER_COLUMN = {"focus_cost": "SubAccountId"}
# Views over the tables above that mix the clusters, and the ones built on them.
VIEW_XFAILS = {
    **TABLE_XFAILS,
    "tenant_daily": "tenant_daily: built on job_hourly, whose idle_gpu_hours mixes colliding job ids",
    "chargeback_monthly": "chargeback_monthly: built on tenants, which keeps only the last analysed cluster "
    "(the other cluster's budgets are gone)",
}


@pytest.mark.parametrize(
    "view", [_xfail(v, VIEW_XFAILS[v]) if v in VIEW_XFAILS else v for v in sql_files()]
)  # fmt: skip
def test_each_view_keeps_the_clusters_apart(lakes, view):
    col = CLUSTER_COLUMN.get(view, "cluster")
    for c in CLUSTERS:
        with Lake(lakes["both"]) as q:
            shared = q.execute(f"SELECT * FROM {view} WHERE {col} = $c", {"c": c}, timeout_s=None).frame
        with Lake(lakes[c]) as q:
            alone = q.execute(f"SELECT * FROM {view}", timeout_s=None).frame
        assert set(alone[col]) <= {c}
        assert_same_rows(shared, alone, f"{view} of {c}")


def test_focus_export_carries_the_cluster_as_sub_account(lakes, tmp_path):
    from gpuledger.config import defaults
    from gpuledger.focus_export import export_focus

    frames = {}
    for name, lake in lakes.items():
        out = tmp_path / f"{name}.parquet"
        export_focus(lake, defaults(), "2026-11", out)
        frames[name] = pl.read_parquet(out)
    both = frames["both"]
    assert check_focus(both) == []
    assert (both["SubAccountId"] == both["SubAccountName"]).all() and set(both["SubAccountType"]) == {"Cluster"}
    assert sorted(set(both["SubAccountId"])) == sorted(CLUSTERS)
    for c in CLUSTERS:
        mine = both.filter(pl.col("SubAccountId") == c)
        assert mine["BilledCost"].sum() == frames[c]["BilledCost"].sum() > 0  # Decimal: exact
        assert set(mine["InvoiceId"]) == {f"{c}/2026-11"}
        assert_same_rows(mine, frames[c], f"focus_cost of {c}")
    assert dt.date(2026, 11, 1) <= both["ChargePeriodStart"].min().date()
