"""Two clusters in one lake (issue 16 item 3): every table and view keeps them apart.

Two simulated fleets, `eu-1` (seed 7, 3 nodes) and `us-1` (seed 8, 2 nodes), are written by `gpuledger simulate`
with a config each into one lake, and each alone into a lake of its own (the reference). Every us-1 job then takes
the id of an eu-1 job (the simulator hashes the cluster into its ids, so they would not collide by themselves; two
clusters' schedulers can well hand out the same id). `gpuledger analyze` runs once on the shared lake (with eu-1's
config: one analytics for the whole lake computes every cluster in it), and once more with us-1's config, which must
change nothing. Then, for every lake table and every sql/ view, the shared lake's rows of a cluster must be the rows
of that cluster's own lake: nothing lost, nothing added from the other cluster. The one exception is by design: a
tenant's budget is spent across clusters, so `decisions`' spending columns sum both clusters' cost.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import polars as pl
import pytest
from focus_rules import check_focus
from polars.testing import assert_frame_equal, assert_series_equal

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
def analysed(tmp_path_factory) -> tuple[dict[str, Path], list[str], list[str]]:
    """({"eu-1": its own lake, "us-1": its own lake, "both": the shared one}, each analysed once; the shared lake's
    table files that analysing it again with the other cluster's config changed; what that run and the next, with
    the same config, each recomputed)."""
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
    for lake, c in ((out["eu-1"], "eu-1"), (out["us-1"], "us-1"), (out["both"], "eu-1")):
        r = cli("analyze", "--lake", lake, "--config", configs[c], "--to", END_ISO)
        assert r.exit_code == 0, r.output
        assert "claimed by two machines" not in r.output  # node names repeat across clusters, not within one
    first = _table_files(out["both"])
    # The other cluster's config, twice: the first must do no more than a re-run (the second) does.
    again = [cli("analyze", "--lake", out["both"], "--config", configs["us-1"], "--to", END_ISO) for _ in range(2)]
    assert [r.exit_code for r in again] == [0, 0], again[0].output + again[1].output
    work = [re.sub(r" in [0-9.]+ s$", "", r.output, flags=re.M) for r in again]
    after = _table_files(out["both"])
    changed = [
        f for f in first.keys() | after.keys() if f not in first or f not in after or not first[f].equals(after[f])
    ]
    return out, sorted(changed), work


@pytest.fixture(scope="module")
def lakes(analysed) -> dict[str, Path]:
    return analysed[0]


def _table_files(lake: Path) -> dict[str, pl.DataFrame]:
    """Every table's files and their rows, sorted (a re-run may write a day's rows in another order)."""
    out = {}
    for t in schema.TABLES:
        for f in sorted((lake / t).rglob("*.parquet")) if (lake / t).is_dir() else []:
            rows = pl.read_parquet(f)
            out[str(f.relative_to(lake))] = rows.sort(_sortable(rows), nulls_last=True)
    return out


def test_analysing_again_with_the_other_clusters_config_changes_nothing(analysed):
    """One analysis computes every cluster of the lake; the config's `cluster` names none of its rows, and costs
    no more than a re-run (a recomputation of every day, as a changed setting would do, printed 365 job_hourly rows
    over 4 days where a re-run prints 235 over 2)."""
    _, changed, work = analysed
    assert changed == []
    assert work[0] == work[1]


def _sortable(df: pl.DataFrame) -> list[str]:
    return [c for c, t in df.schema.items() if not t.is_nested()]


def assert_same_rows(mine: pl.DataFrame, alone: pl.DataFrame, what: str) -> None:
    """The same rows in any order (volatile columns aside; floats to 1e-9: sums in another order)."""
    drop = [c for c in VOLATILE if c in alone.columns]
    mine, alone = mine.drop(drop), alone.drop(drop).select(mine.drop(drop).columns)
    assert mine.height == alone.height, f"{what}: {mine.height} rows in the shared lake, {alone.height} alone"
    key = _sortable(alone)
    assert_frame_equal(mine.sort(key, nulls_last=True), alone.sort(key, nulls_last=True), rel_tol=1e-9)


# A tenant's monthly budget is spent across clusters (docs/finops.md): these columns of a cluster's decision rows
# count every cluster's cost this month, so they differ from the cluster's own lake (test_a_budget_...).
ACROSS_CLUSTERS = {"decisions": ("spent_usd", "budget_left_usd", "budget_used_pct", "spent_gpu_h")}


@pytest.mark.parametrize("table", schema.TABLES)
def test_each_cluster_has_the_rows_of_its_own_lake(lakes, table):
    for c in CLUSTERS:
        if not has_data(lakes[c], table) and not has_data(lakes["both"], table):
            continue
        shared = _read(lakes["both"], table).filter(pl.col("cluster") == c)
        alone = _read(lakes[c], table)
        across = list(ACROSS_CLUSTERS.get(table, ()))
        assert_same_rows(shared.drop(across), alone.drop(across), f"{table} of {c}")


def test_a_budget_is_spent_across_clusters(lakes):
    """Each cluster's decision row of a tenant says what the tenant spent this month in every cluster."""
    key = ["tenant", "gpu_model"]
    alone = {c: _read(lakes[c], "decisions") for c in CLUSTERS}
    spent = (
        pl.concat([alone[c].filter(pl.col("gpu_model").is_null()).select("tenant", "spent_usd") for c in CLUSTERS])
        .group_by("tenant")
        .agg(pl.col("spent_usd").sum().alias("both_usd"))
    )
    assert spent["both_usd"].min() > 0 and spent.height == len(alone["eu-1"]["tenant"].unique())
    for c in CLUSTERS:
        shared = _read(lakes["both"], "decisions").filter(pl.col("cluster") == c).join(spent, on="tenant")
        assert shared.height == alone[c].height
        assert_series_equal(shared["spent_usd"], shared["both_usd"], check_names=False, rel_tol=1e-9)
        left = shared["budget_usd"] - shared["both_usd"]
        assert_series_equal(shared["budget_left_usd"], left, check_names=False, rel_tol=1e-9)
        mine = shared.join(alone[c].select(*key, "spent_gpu_h"), on=key, nulls_equal=True, suffix="_alone")
        assert (mine["spent_gpu_h"] > mine["spent_gpu_h_alone"]).all()  # the other cluster's GPU-hours too


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


@pytest.mark.parametrize("view", sql_files())
def test_each_view_keeps_the_clusters_apart(lakes, view):
    col = CLUSTER_COLUMN.get(view, "cluster")
    for c in CLUSTERS:
        with Lake(lakes["both"]) as q:
            shared = q.execute(f"SELECT * FROM {view} WHERE {col} = $c", {"c": c}, timeout_s=None).frame
        with Lake(lakes[c]) as q:
            alone = q.execute(f"SELECT * FROM {view}", timeout_s=None).frame
        assert set(alone[col]) <= {c}
        across = list(ACROSS_CLUSTERS.get(view, ()))
        assert_same_rows(shared.drop(across), alone.drop(across), f"{view} of {c}")


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
