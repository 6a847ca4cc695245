"""The cluster filter without a browser: the URL round trip, the per-cluster labels, and the pages' questions on a
lake holding two clusters (eu-1: 3 nodes of 4 GPUs, 12 GPUs; us-1: 2 nodes, 8; all: 20, counted by hand)."""

import dataclasses
import datetime as dt

import polars as pl
import pytest

from gpuledger.config import defaults
from gpuledger.dashboards import filters
from gpuledger.dashboards.data import DashData
from gpuledger.dashboards.pages import capacity, overview, tenants

from builders import END

FLEETS = {"eu-1": {"nodes": 3, "seed": 7}, "us-1": {"nodes": 2, "seed": 8}}
GPUS = {"eu-1": 12, "us-1": 8, None: 20}


def test_the_cluster_lives_in_the_url():
    f, problems = filters.parse("?start=2026-11-01&end=2026-11-01&cluster=eu-1", None, dt.date(2026, 11, 2))
    assert problems == [] and f.cluster == "eu-1"
    assert f.search() == "?start=2026-11-01&end=2026-11-01&cluster=eu-1"
    assert f.model_args == ["eu-1", "eu-1", None, None]
    assert filters.parse("?start=2026-11-01", None, dt.date(2026, 11, 2))[0].cluster is None  # all clusters


def test_a_figure_of_several_clusters_draws_one_series_per_cluster():
    one = pl.DataFrame({"cluster": ["eu-1", "eu-1"], "gpu_model": ["H100", "A100"]})
    assert filters.by_cluster(one, "gpu_model").equals(one)
    two = pl.DataFrame({"cluster": ["eu-1", "us-1"], "gpu_model": ["H100", "H100"]})
    assert filters.by_cluster(two, "gpu_model")["gpu_model"].to_list() == ["eu-1 / H100", "us-1 / H100"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from gpuledger.analytics.runner import run
    from gpuledger.collector.sim.backfill import backfill

    path = tmp_path_factory.mktemp("clusters") / "lake"
    for cluster, fleet in FLEETS.items():
        cfg = dataclasses.replace(defaults(), cluster=cluster)
        backfill(cfg, path, END - 2 * 86400, END, 600, gpus_per_node=4, models=("H100", "A100"), workers=1, **fleet)
        run(path, until_s=END, cfg=cfg)
    d = DashData(path)
    yield d
    d.close()


@pytest.mark.parametrize("cluster", ["eu-1", "us-1", None])
def test_the_pages_questions_narrow_to_the_cluster(data, cluster):
    f = filters.Filters(dt.date(2026, 10, 31), dt.date(2026, 11, 1), cluster=cluster)
    assert data.clusters() == ["eu-1", "us-1"]
    now = overview.now_by_model(data, f)
    assert now["gpus"].sum() == GPUS[cluster]
    assert set(now["cluster"]) == ({cluster} if cluster else set(FLEETS))
    peaks = capacity.peaks(data, f)  # per cluster and model, never summed over the clusters
    assert peaks["gpus"].sum() == GPUS[cluster] and peaks.height == 2 * (1 if cluster else 2)
    cost = tenants.cost(data, f)
    assert set(cost["cluster"]) == ({cluster} if cluster else set(FLEETS)) and cost["cost_usd"].sum() > 0
