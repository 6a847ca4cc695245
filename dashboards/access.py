"""Who is asking, and which tenants they may see: basic auth for small installs, a sign-in proxy's headers for many.

Three ways in, from the [dashboard] config:
- Open (no login configured): everyone sees everything, as on a laptop.
- Basic auth (`auth_user`, `auth_password_env`): one login, which sees everything.
- A sign-in proxy (oauth2-proxy and similar) in front (`trusted_proxies`): it authenticates the user and passes
  their name and groups in headers (`user_header`, `groups_header`). They are believed only from the proxy's
  addresses: the same headers from any other address are ignored and logged, since anyone can send them. Groups map
  to tenants (`tenant_groups`) and to the admin role (`admin_groups`); an admin sees every tenant. A user in no
  mapped group is told so, and sees nothing else. With basic auth too, a request that does not come through the
  proxy may sign in with it (a break-glass login for the platform team).

`resolve` is a pure function of the request's address and headers, tested without a server; `guard` puts its answer
on every request (flask.g) before Dash sees it, and `scope()` hands the viewer's tenants to the filters
(dashboards/filters.py binds them into every query of a table with a tenant column).
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from html import escape

import flask

log = logging.getLogger(__name__)
HEALTH_PATH = "/healthz"  # open to Kubernetes' probes (deploy/base/dashboard.yaml); every other route needs a login


@dataclass(frozen=True)
class Access:
    """The [dashboard] keys that decide who sees what, checked once by the config (gpuledger/config.py)."""

    basic: tuple[str, str] | None = None  # (user, password)
    trusted_proxies: tuple[str, ...] = ()  # addresses or CIDR ranges
    user_header: str = "X-Forwarded-User"
    groups_header: str = "X-Forwarded-Groups"
    groups_separator: str = ","
    admin_groups: tuple[str, ...] = ()
    tenant_groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @cached_property
    def _networks(self) -> tuple:
        return tuple(ipaddress.ip_network(n.strip(), strict=False) for n in self.trusted_proxies)

    def trusted(self, address: str | None) -> bool:
        try:
            ip = ipaddress.ip_address((address or "").split("%")[0])
        except ValueError:
            return False
        if ip.version == 6 and ip.ipv4_mapped is not None:  # ::ffff:10.0.0.5 on a dual-stack socket
            ip = ip.ipv4_mapped
        return any(ip in n for n in self._networks)


@dataclass(frozen=True)
class Viewer:
    user: str
    tenants: tuple[str, ...] | None  # None: every tenant (an admin, basic auth, or no login configured)
    how: str  # "open", "basic", "proxy"
    groups: tuple[str, ...] = ()

    @property
    def admin(self) -> bool:
        return self.tenants is None

    @property
    def no_tenant(self) -> bool:
        return self.tenants == ()


@dataclass(frozen=True)
class Refusal:
    status: int
    text: str
    headers: tuple[tuple[str, str], ...] = ()


BASIC_CHALLENGE = (("WWW-Authenticate", 'Basic realm="gpuledger"'),)


def groups_of(header: str, separator: str = ",") -> tuple[str, ...]:
    """A groups header: oauth2-proxy's is comma-separated (--pass-user-headers), authentik's |-separated; spaces
    around each group are dropped."""
    return tuple(sorted({g.strip() for g in header.split(separator) if g.strip()}))


def resolve(access: Access, address: str | None, headers: Mapping[str, str]) -> Viewer | Refusal:
    """Who sent a request from `address` with `headers`, or why it is refused."""
    proxy = bool(access.trusted_proxies)
    if proxy and access.trusted(address):
        user = (headers.get(access.user_header) or "").strip()
        if not user:
            return Refusal(401, f"gpuledger: the sign-in proxy sent no {access.user_header} header")
        groups = groups_of(headers.get(access.groups_header) or "", access.groups_separator)
        if set(groups) & set(access.admin_groups):
            return Viewer(user, None, "proxy", groups)
        tenants = sorted({t for g in groups for t in access.tenant_groups.get(g, ())})
        return Viewer(user, tuple(tenants), "proxy", groups)
    forged = [h for h in (access.user_header, access.groups_header) if h in headers]
    if forged:
        # Anyone can send these headers: only the proxy's are believed. Say who tried, for the operator.
        log.warning(
            "dashboards: ignored %s from %s, which is not a trusted proxy ([dashboard] trusted_proxies)",
            " and ".join(forged),
            address,
        )
    if access.basic is not None:
        expected = f"{access.basic[0]}:{access.basic[1]}".encode()  # RFC 7617: user-pass as UTF-8
        given = basic_credentials(headers.get("Authorization") or "")
        if given is None or not hmac.compare_digest(given, expected):
            return Refusal(401, "gpuledger: sign in", BASIC_CHALLENGE)
        return Viewer(access.basic[0], None, "basic")
    if proxy:
        return Refusal(403, "gpuledger: sign in through the dashboards' sign-in proxy")
    return Viewer("", None, "open")


def guard(server: flask.Flask, access: Access) -> None:
    """Resolve the viewer of every request but the probes' before Dash sees it; refuse the ones `resolve` refuses,
    and show a user with no tenant one page saying so (the app, its callbacks and assets stay closed to them)."""

    @server.before_request
    def _check():
        if flask.request.path == HEALTH_PATH:
            return None
        who = resolve(access, flask.request.remote_addr, flask.request.headers)
        if isinstance(who, Refusal):
            return flask.Response(who.text, who.status, dict(who.headers), mimetype="text/plain")
        flask.g.viewer = who
        if who.no_tenant:
            return no_tenant_response(who, flask.request.method == "GET")
        return None


def no_tenant_response(who: Viewer, page: bool) -> flask.Response:
    """Not an error: a signed-in user whom no group maps to a tenant. A page for the browser; a 403 for a callback."""
    groups = ", ".join(who.groups) or "none"
    text = (
        f"You are signed in as {who.user}, but none of your groups ({groups}) is mapped to a tenant, so there is "
        "nothing here for you to see. Ask the platform team to add one of your groups to [dashboard] tenant_groups."
    )
    if not page:
        return flask.Response(text, 403, mimetype="text/plain")
    body = (
        "<!doctype html><html><head><meta charset='utf-8'><title>gpuledger</title></head><body>"
        f"<h2>No tenant</h2><p id='no-tenant'>{escape(text)}</p></body></html>"
    )
    return flask.Response(body, 200, mimetype="text/html")


def viewer() -> Viewer:
    """The viewer of the request being served (open access outside one, as in a test calling a layout directly)."""
    if flask.has_request_context():
        return flask.g.get("viewer") or Viewer("", None, "open")
    return Viewer("", None, "open")


def scope() -> tuple[str, ...] | None:
    """The tenants the current viewer may see; None: all."""
    return viewer().tenants


def basic_credentials(header: str) -> bytes | None:
    """The decoded `user:password` of a Basic Authorization header, or None for any other header.

    The scheme is matched case-insensitively (RFC 7235 section 2.1: `basic` and `BASIC` are the same scheme), and
    only it: no scheme, another scheme, base64 with characters outside its alphabet or a token without a colon
    is refused. (Werkzeug's parser would read a missing colon as an empty password.)
    """
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True)
    except ValueError:  # binascii.Error (not base64) and non-ASCII text are both ValueErrors
        return None
    return decoded if b":" in decoded else None
