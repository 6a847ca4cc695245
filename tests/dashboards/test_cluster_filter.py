"""The cluster filter in a real browser (headless Chromium via dash[testing]), on a lake holding two clusters.

eu-1 is 3 nodes of 4 GPUs, us-1 2 nodes of 4 GPUs, simulated into one lake and analysed once per cluster config.
By hand: the fleet is 12 GPUs in eu-1, 8 in us-1, 20 in all. The cost of each cluster's tenants is summed from the
lake's cost_daily files with polars (not through the dashboards' SQL).
"""

import dataclasses
import shutil

import polars as pl
import pytest

from gpuledger.config import defaults
from gpuledger.dashboards.app import PAGES, create_app

from builders import END

pytestmark = pytest.mark.skipif(
    shutil.which("chromedriver") is None,
    reason="Debian packages chromium and chromium-driver not installed (.ci/run installs them)",
)
FLEETS = {"eu-1": {"nodes": 3, "seed": 7}, "us-1": {"nodes": 2, "seed": 8}}
GPUS = {"eu-1": 12, "us-1": 8, None: 20}  # nodes x 4 GPUs


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    from gpuledger.analytics.runner import run
    from gpuledger.collector.sim.backfill import backfill

    path = tmp_path_factory.mktemp("clusters") / "lake"
    for cluster, fleet in FLEETS.items():
        cfg = dataclasses.replace(defaults(), cluster=cluster)
        backfill(cfg, path, END - 2 * 86400, END, 600, gpus_per_node=4, models=("H100", "A100"), workers=1, **fleet)
        run(path, until_s=END, cfg=cfg)
    return path


def tenants_cost_usd(lake, cluster: str | None) -> float:
    cost = pl.read_parquet(lake / "cost_daily" / "**" / "*.parquet").filter(pl.col("tenant").is_not_null())
    return cost.filter(pl.col("cluster") == cluster)["cost_usd"].sum() if cluster else cost["cost_usd"].sum()


def number(dash_duo, selector) -> float:
    return float(dash_duo.find_element(selector).text.replace(",", ""))


def open_page(dash_duo, path, search=""):
    dash_duo.wait_for_page(url=dash_duo.server_url + path + search)
    dash_duo.wait_for_text_to_equal("h2", next(p.NAME for p in PAGES if p.PATH == path))


def cells(dash_duo, table: str, column: str) -> set[str]:
    """The texts of one column's cells in a grid (AG Grid draws its rows after the page: waited for)."""
    dash_duo.wait_for_element(f'#{table} .ag-cell[col-id="{column}"]')
    return {c.text for c in dash_duo.find_elements(f'#{table} .ag-cell[col-id="{column}"]')}


def test_the_cluster_filter_narrows_every_figure_to_one_cluster(dash_duo, lake):
    assert GPUS["eu-1"] + GPUS["us-1"] == GPUS[None]
    dash_duo.start_server(create_app(lake))
    open_page(dash_duo, "/")
    assert number(dash_duo, "#ov-gpus") == GPUS[None]  # all clusters by default
    assert cells(dash_duo, "ov-now", "cluster") == {"eu-1", "us-1"}
    dash_duo.select_dcc_dropdown("#f-cluster", value="eu-1")
    dash_duo.wait_for_text_to_equal("#ov-gpus", f"{GPUS['eu-1']}")
    assert "cluster=eu-1" in dash_duo.driver.current_url
    assert cells(dash_duo, "ov-now", "cluster") == {"eu-1"}
    # The URL alone brings the view back, and the other pages' links carry the cluster.
    open_page(dash_duo, "/", "?cluster=us-1")
    dash_duo.wait_for_text_to_equal("#ov-gpus", f"{GPUS['us-1']}")
    assert "cluster=us-1" in dash_duo.find_element("#nav a[href^='/tenants']").get_attribute("href")

    # The cost page: the tenants' cost per cluster, and a per-cluster row for each in the table of all clusters.
    for cluster in ("eu-1", "us-1", None):
        open_page(dash_duo, "/tenants", f"?cluster={cluster}" if cluster else "")
        want = tenants_cost_usd(lake, cluster)
        assert want > 0 and number(dash_duo, "#ten-cost-total") == round(want, 2)
        assert cells(dash_duo, "ten-cost-table", "cluster") == ({cluster} if cluster else set(FLEETS))

    # Capacity planning: supply per cluster and model, never summed over the clusters.
    open_page(dash_duo, "/capacity")
    assert cells(dash_duo, "cap-peaks", "cluster") == set(FLEETS)
    open_page(dash_duo, "/capacity", "?cluster=eu-1")
    assert cells(dash_duo, "cap-peaks", "cluster") == {"eu-1"}
    supply = [float(c.text) for c in dash_duo.find_elements("#cap-peaks .ag-row .ag-cell[col-id='gpus']")]
    assert len(supply) == 2 and sum(supply) == GPUS["eu-1"]
    assert dash_duo.get_logs() == []
