"""The drill-down in a real browser (headless Chromium via dash[testing]) on the simulated dash_lake: from the fleet
to a cluster, a node and a GPU by clicking, and from a tenant's jobs to a job's GPUs, with a clean console."""

import shutil

import pytest

from gpuledger.dashboards.app import create_app

from builders import save_screenshot

pytestmark = pytest.mark.skipif(
    shutil.which("chromedriver") is None,
    reason="Debian packages chromium and chromium-driver not installed (.ci/run installs them)",
)
RANGE = "?start=2026-10-03&end=2026-11-01"


def click_first(dash_duo, selector, then):
    """Click the first link matching `selector` (a grid cell's link moves within the app) and wait for
    `then` on the page it opens."""
    dash_duo.wait_for_element(selector, timeout=20)
    link = dash_duo.find_elements(selector)[0]
    href = link.get_attribute("href")
    link.click()
    dash_duo.wait_for_element(then, timeout=20)
    return href


def shot(dash_duo, name):
    save_screenshot(dash_duo, name)  # with GPULEDGER_SCREENSHOTS set


def test_click_from_the_fleet_down_to_a_gpu(dash_duo, dash_lake):
    dash_duo.start_server(create_app(dash_lake))
    dash_duo.wait_for_page(url=dash_duo.server_url + "/fleet" + RANGE)
    dash_duo.wait_for_text_to_equal("h2", "Fleet")
    href = click_first(dash_duo, '#fl-clusters .ag-cell[col-id="cluster"] a', "#fl-c-nodes-table")
    assert "/fleet/cluster/default?start=2026-10-03&end=2026-11-01" in href
    href = click_first(dash_duo, '#fl-c-nodes-table .ag-cell[col-id="node"] a', "#fl-n-util")
    assert "/fleet/node/default/" in href
    dash_duo.wait_for_element("#fl-n-util .main-svg")
    shot(dash_duo, "fleet-node.png")
    href = click_first(dash_duo, '#fl-n-gpus .ag-cell[col-id="gpu_uuid"] a', "#fl-g-series")
    assert "/fleet/gpu/GPU-" in href
    assert "hourly means, from gpu_hourly" in dash_duo.find_element("#fl-resolution").text  # 30 days
    # The range's last 2 days at native resolution: temperature, clocks and their reasons.
    dash_duo.find_element("#fl-resolution a").click()
    dash_duo.wait_for_element("#fl-g-temp", timeout=20)
    assert "every sample" in dash_duo.find_element("#fl-resolution").text
    dash_duo.wait_for_element("#fl-g-throttle")
    dash_duo.wait_for_element("#fl-g-series .main-svg")
    shot(dash_duo, "fleet-gpu.png")
    assert dash_duo.get_logs() == []


def test_from_a_tenants_jobs_to_the_gpus_a_job_held(dash_duo, dash_lake):
    dash_duo.start_server(create_app(dash_lake))
    dash_duo.wait_for_page(url=dash_duo.server_url + "/tenants" + RANGE + "&tenant=vision")
    dash_duo.wait_for_element("#ten-jobs")
    href = click_first(dash_duo, '#ten-jobs .ag-cell[col-id="job_id"] a', "#fl-j-gpus")
    assert "/fleet/job/default/" in href and "tenant=vision" in href
    href = click_first(dash_duo, '#fl-j-gpus .ag-cell[col-id="gpu_uuid"] a', "#fl-g-series")
    assert "/fleet/gpu/GPU-" in href and "tenant=vision" in href
    # The GPU's pods are vision's only (the tenant picked in the bar narrows them as a scope would).
    dash_duo.wait_for_element('#fl-pods .ag-cell[col-id="tenant"]')
    tenants = {c.text for c in dash_duo.find_elements('#fl-pods .ag-cell[col-id="tenant"]')}
    assert tenants == {"vision"}
    assert dash_duo.get_logs() == []
