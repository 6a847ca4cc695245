"""The dashboards' probe endpoint: /healthz answers 200 without a password and says nothing about the lake, while
every page, callback and asset still needs the login (deploy/base/dashboard.yaml probes it)."""

import base64

from gpuledger.dashboards.app import HEALTH_PATH, create_app


def test_healthz_is_open_and_empty_while_the_pages_need_the_password(tmp_path):
    app = create_app(tmp_path, auth=("ops", "s3cret"))
    client = app.server.test_client()
    r = client.get("/healthz")
    assert (HEALTH_PATH, r.status_code, r.data, r.mimetype) == ("/healthz", 200, b"ok\n", "text/plain")
    for path in ("/", "/capacity", "/_dash-layout", "/_dash-dependencies", "/healthz/", "/healthzz"):
        assert client.get(path).status_code == 401, path
    assert client.post("/_dash-update-component", json={}).status_code == 401
    login = {"Authorization": "Basic " + base64.b64encode(b"ops:s3cret").decode()}
    assert client.get("/", headers=login).status_code == 200


def test_healthz_without_auth_configured(tmp_path):
    r = create_app(tmp_path / "no-lake-yet").server.test_client().get("/healthz")
    assert (r.status_code, r.data) == (200, b"ok\n")  # the probe passes before the first analytics run
