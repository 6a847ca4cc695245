"""Who sees what: a sign-in proxy's user and groups, trusted only from its addresses, mapped to tenants and to the
admin role; every page, the tenant list and a crafted request narrowed to the viewer's tenants."""

import dataclasses
import json
import logging
import shutil
import subprocess
import sys
import time

import pytest

from gpuledger.dashboards import filters
from gpuledger.dashboards.access import Access, Refusal, Viewer, groups_of, resolve
from gpuledger.dashboards.app import PAGES, create_app

from builders import page_request
from conftest import REPO

PROXY = "10.0.0.7"
RULES = Access(
    trusted_proxies=("10.0.0.0/29", "fd00::/64"),
    admin_groups=("gpu-admins",),
    tenant_groups={"team-vision": ("vision",), "ml": ("vision", "nlp"), "empty": ()},
)
# The tenants of the default config that alice (team-vision) must never see, and that an admin does see.
OTHERS = ("recsys", "nlp", "research")


def who(address, **headers):
    return resolve(RULES, address, {k.replace("_", "-"): v for k, v in headers.items()})


# -- the rules, without a server ---------------------------------------------------------------------------------
def test_groups_map_to_tenants_and_to_the_admin_role():
    assert who(PROXY, X_Forwarded_User="alice", X_Forwarded_Groups="team-vision") == Viewer(
        "alice", ("vision",), "proxy", ("team-vision",)
    )
    # Several groups: the union of their tenants, sorted; spaces around oauth2-proxy's commas are dropped.
    assert who(PROXY, X_Forwarded_User="dana", X_Forwarded_Groups=" ml , team-vision,").tenants == ("nlp", "vision")
    admin = who(PROXY, X_Forwarded_User="bob", X_Forwarded_Groups="team-vision,gpu-admins")
    assert admin.tenants is None and admin.admin
    # In no mapped group (or one mapped to nothing): signed in, with no tenant.
    for groups in ("", "payroll", "empty"):
        carol = who(PROXY, X_Forwarded_User="carol", X_Forwarded_Groups=groups)
        assert carol.no_tenant and not carol.admin and carol.user == "carol"


def test_a_trusted_proxy_is_matched_by_range_and_v4_mapped_addresses():
    for address in ("10.0.0.1", "10.0.0.7", "::ffff:10.0.0.3", "fd00::12"):
        assert who(address, X_Forwarded_User="alice").how == "proxy", address
    for address in ("10.0.0.8", "127.0.0.1", "fd01::1", "", None, "not-an-ip"):
        assert isinstance(who(address, X_Forwarded_User="alice"), Refusal), address


def test_a_forged_header_from_another_address_is_ignored_and_logged(caplog):
    with caplog.at_level(logging.WARNING, logger="gpuledger.dashboards.access"):
        got = who("192.0.2.9", X_Forwarded_User="mallory", X_Forwarded_Groups="gpu-admins")
    assert got == Refusal(403, "gpuledger: sign in through the dashboards' sign-in proxy")
    assert caplog.messages == [
        "dashboards: ignored X-Forwarded-User and X-Forwarded-Groups from 192.0.2.9, which is not a trusted proxy "
        "([dashboard] trusted_proxies)"
    ]
    # With basic auth too, a direct request must give the password; the forged header gives nothing.
    both = Access(basic=("ops", "pw"), trusted_proxies=RULES.trusted_proxies, tenant_groups=RULES.tenant_groups)
    assert resolve(both, "192.0.2.9", {"X-Forwarded-User": "mallory"}).status == 401
    token = "Basic b3BzOnB3"  # ops:pw
    assert resolve(both, "192.0.2.9", {"Authorization": token, "X-Forwarded-User": "x"}) == Viewer("ops", None, "basic")


def test_the_header_names_are_configurable_and_the_proxy_must_name_a_user():
    rules = Access(
        trusted_proxies=("10.0.0.7",),
        user_header="X-Auth-Request-User",
        groups_header="X-Auth-Groups",
        tenant_groups={"g": ("vision",)},
    )
    got = resolve(rules, PROXY, {"X-Auth-Request-User": "alice", "X-Auth-Groups": "g"})
    assert got == Viewer("alice", ("vision",), "proxy", ("g",))
    assert resolve(rules, PROXY, {"X-Forwarded-User": "alice"}) == Refusal(
        401, "gpuledger: the sign-in proxy sent no X-Auth-Request-User header"
    )


def test_groups_header_parsing():
    assert groups_of("a,b, a ,,c") == ("a", "b", "c") and groups_of("") == ()
    assert groups_of("foo|bar|baz", "|") == ("bar", "baz", "foo")  # authentik's X-authentik-groups


def test_a_tenant_outside_the_scope_is_dropped_from_the_filters_and_said():
    f, bad = filters.parse("?tenant=recsys", None, scope=("vision",))
    assert f.tenant is None and f.scope == ("vision",)
    assert bad == ["the URL's tenant is not one of yours (vision): showing yours"]
    assert filters.parse("?tenant=vision", None, scope=("vision",))[0].tenant == "vision"
    assert filters.parse("?tenant=recsys", None)[0].tenant == "recsys"  # no scope: an admin picks any


# -- the config --------------------------------------------------------------------------------------------------
def test_the_config_checks_the_mapping(tmp_path):
    from gpuledger.config import load
    from gpuledger.errors import ConfigError

    path = tmp_path / "c.toml"
    path.write_text(
        '[dashboard]\ntrusted_proxies = ["10.0.0.0/8", "proxy.local"]\nuser_header = "X User"\n'
        '[dashboard.tenant_groups]\n"team-vision" = ["vision", "visoin"]\n'
    )
    with pytest.raises(ConfigError) as e:
        load(path)
    text = str(e.value)
    assert (
        "dashboard.trusted_proxies[1]: expected an IP address or CIDR range (10.0.0.0/8, ::1), got 'proxy.local'"
    ) in text
    assert "dashboard.user_header: expected an HTTP header name, got 'X User'" in text
    assert "dashboard.tenant_groups.team-vision: no tenant named 'visoin'" in text
    path.write_text('[dashboard]\nadmin_groups = ["ops"]\n')
    with pytest.raises(ConfigError, match="set dashboard.trusted_proxies to its address"):
        load(path)
    path.write_text(
        '[dashboard]\ntrusted_proxies = ["10.0.0.0/8"]\n[dashboard.tenant_groups]\nml = ["vision", "nlp"]\n'
    )
    assert load(path).dashboard.tenant_groups == {"ml": ("vision", "nlp")}


# -- every page and the layout, through the app ------------------------------------------------------------------
@pytest.fixture(scope="module")
def client(dash_lake):
    return create_app(dash_lake, access_cfg=RULES).server.test_client()


def as_user(client, user, groups, path="/", search="", address=PROXY):
    headers = {"X-Forwarded-User": user, "X-Forwarded-Groups": groups}
    base = {"REMOTE_ADDR": address}
    if path == "layout":
        return client.get("/_dash-layout", headers=headers, environ_base=base)
    return client.post("/_dash-update-component", json=page_request(path, search), headers=headers, environ_base=base)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.PATH)
def test_a_tenant_user_sees_only_their_tenant_on_every_page(client, page):
    for search in ("", "?tenant=recsys", "?tenant=nlp&model=NVIDIA+H100+80GB+HBM3"):  # crafted for another tenant
        r = as_user(client, "alice", "team-vision", page.PATH, search)
        assert r.status_code == 200, (page.PATH, search)
        text = r.get_data(as_text=True)
        leaked = [t for t in OTHERS if t in text]
        assert leaked == [], (page.PATH, search, leaked)


def test_the_admin_sees_every_tenant_where_alice_sees_one(client):
    # The same question both ways, so the check above could fail: the tenants page names them all for an admin.
    admin = as_user(client, "bob", "gpu-admins", "/tenants").get_data(as_text=True)
    alice = as_user(client, "alice", "team-vision", "/tenants").get_data(as_text=True)
    assert all(t in admin for t in ("vision", *OTHERS)) and "vision" in alice
    options = json.dumps(as_user(client, "alice", "team-vision", "layout").get_json())
    assert "vision" in options and not any(t in options for t in OTHERS)  # the tenant filter offers only hers
    assert "recsys" in json.dumps(as_user(client, "bob", "gpu-admins", "layout").get_json())


def test_a_user_in_no_mapped_group_gets_a_page_saying_so_and_no_data(client):
    page = client.get(
        "/", headers={"X-Forwarded-User": "carol", "X-Forwarded-Groups": "payroll"}, environ_base={"REMOTE_ADDR": PROXY}
    )
    assert page.status_code == 200 and b"id='no-tenant'" in page.data
    assert b"carol" in page.data and b"payroll" in page.data
    r = as_user(client, "carol", "payroll", "/capacity")
    assert r.status_code == 403 and b"GPUs" not in r.data  # a crafted callback: no figures
    layout = as_user(client, "carol", "payroll", "layout")  # the app's layout: the same page, not the layout
    assert b"id='no-tenant'" in layout.data and b"vision" not in layout.data


def test_a_forged_header_gets_nothing_and_the_probe_stays_open(client):
    r = as_user(client, "bob", "gpu-admins", "/tenants", address="192.0.2.9")
    assert r.status_code == 403 and b"recsys" not in r.data
    assert client.get("/healthz", environ_base={"REMOTE_ADDR": "192.0.2.9"}).status_code == 200


# -- two users in a real browser, each through their own sign-in proxy (a process) ------------------------------
chromium = pytest.mark.skipif(
    shutil.which("chromedriver") is None,
    reason="Debian packages chromium and chromium-driver not installed (.ci/run installs them)",
)


def start_proxy(upstream, **headers):
    args = [f"{k.replace('_', '-')}={v}" for k, v in headers.items()]
    p = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "header_proxy.py"), upstream, *args], stdout=subprocess.PIPE, text=True
    )
    line = p.stdout.readline()
    assert line.startswith("listening on "), line
    return p, f"http://127.0.0.1:{int(line.split()[-1])}"


@chromium
def test_two_users_in_chromium_see_their_own(dash_duo, dash_lake):
    rules = dataclasses.replace(RULES, trusted_proxies=("127.0.0.1",))
    dash_duo.start_server(create_app(dash_lake, access_cfg=rules), navigate=False)  # only the proxies may ask
    proxies = []
    try:
        upstream = dash_duo.server.url
        alice, alice_url = start_proxy(upstream, X_Forwarded_User="alice", X_Forwarded_Groups="team-vision")
        bob, bob_url = start_proxy(upstream, X_Forwarded_User="bob", X_Forwarded_Groups="gpu-admins")
        proxies = [alice, bob]
        seen = {}
        for name, url in (("alice", alice_url), ("bob", bob_url)):
            dash_duo.driver.get(url + "/tenants?tenant=recsys")
            dash_duo.wait_for_text_to_equal("h2", "Tenants", timeout=30)
            dash_duo.wait_for_element("#ten-cost", timeout=30)
            time.sleep(0.5)  # the figures' text is drawn after the element appears
            seen[name] = dash_duo.find_element("body").text
            assert dash_duo.find_element("#viewer").text.startswith(name)
        assert "not one of yours" in seen["alice"] and not any(t in seen["alice"] for t in OTHERS)
        assert "recsys" in seen["bob"]
        assert dash_duo.get_logs() == []
    finally:
        for p in proxies:
            p.terminate()
            p.wait(10)
