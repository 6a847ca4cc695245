"""The dashboards over an object-store lake (moto's S3 server in its own process): an analysed local lake uploaded
to a bucket, a page in a real browser (headless Chromium via dash[testing]) shows what SQL on the local lake gives,
and every page renders."""

from __future__ import annotations

import shutil

import pytest
from s3_server import upload

from gpuledger.dashboards.app import PAGES, create_app
from gpuledger.query import Lake
from gpuledger.store import Store, open_store

from builders import page_request


@pytest.fixture
def s3_lake(s3, analysed_lake) -> Store:
    lake = open_store(f"s3://{s3.bucket}/dash")
    upload(analysed_lake, lake)
    return lake


@pytest.mark.skipif(shutil.which("chromedriver") is None, reason="chromium-driver not installed (.ci/run does)")
def test_the_overview_page_shows_the_fleet_from_s3(dash_duo, s3_lake, analysed_lake):
    with Lake(analysed_lake) as q:
        gpus = q.execute("SELECT sum(gpus) FROM fleet_hourly WHERE hour = (SELECT max(hour) FROM fleet_hourly)")
    assert gpus.rows[0][0] == 12  # 3 nodes x 4 GPUs
    dash_duo.start_server(create_app(s3_lake))
    dash_duo.wait_for_page(url=dash_duo.server_url + "/")
    dash_duo.wait_for_text_to_equal("h2", PAGES[0].NAME)
    dash_duo.wait_for_element("#ov-gpus")
    assert float(dash_duo.find_element("#ov-gpus").text.replace(",", "")) == 12
    assert not dash_duo.find_elements("#no-data")
    assert dash_duo.get_logs() == []


def _render(app, path):
    return app.server.test_client().post("/_dash-update-component", json=page_request(path))


def test_every_page_renders_from_s3_as_from_the_local_lake(s3_lake, analysed_lake):
    remote, local = create_app(s3_lake), create_app(analysed_lake)
    with_data = 0
    for page in PAGES:
        got, want = _render(remote, page.PATH), _render(local, page.PATH)
        assert got.status_code == 200, (page.PATH, got.data[:300])
        assert (b'"no-data"' in got.data) == (b'"no-data"' in want.data), page.PATH
        with_data += b'"no-data"' not in got.data
    assert with_data >= 5  # the enforcement page has no admissions in this lake
