"""Live pages (issue 23 item 3): an open page redraws itself every `[dashboard] refresh_s`, a page with controls of
its own (capacity) does not, and every page says how recent its figures are and when the analytics last ran."""

import datetime as dt
import re
import shutil
import time

import pytest

from gpuledger.dashboards.app import create_app, freshness_text
from gpuledger.query import Lake

from builders import END

UTC = dt.timezone.utc


def test_the_freshness_line_by_hand():
    now = dt.datetime(2026, 11, 2, 12, 30, 5, tzinfo=UTC)
    data_to = dt.datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
    assert freshness_text(data_to, now - dt.timedelta(minutes=7), now) == (
        "figures to 2026-11-02 12:00 UTC · analytics ran 2026-11-02 12:23 UTC (7 min ago) · page drawn 12:30:05 UTC"
    )
    assert "(3 h ago)" in freshness_text(data_to, now - dt.timedelta(minutes=200), now)
    assert "(just now)" in freshness_text(data_to, now - dt.timedelta(seconds=20), now)
    assert freshness_text(None, None, now) == "no analytics output yet · page drawn 12:30:05 UTC"


def test_the_timer_is_off_at_zero_and_ticks_at_the_configured_interval(dash_lake):
    def interval(app):
        found = [c for c in _walk(app.layout()) if getattr(c, "id", None) == "refresh"]
        assert len(found) == 1
        return found[0].interval, found[0].disabled

    assert interval(create_app(dash_lake)) == (1000, True)  # the default of create_app: no timer
    assert interval(create_app(dash_lake, refresh_s=300)) == (300_000, False)


def _walk(component):
    yield component
    children = getattr(component, "children", None)
    for child in children if isinstance(children, list) else [children] if children is not None else []:
        if hasattr(child, "to_plotly_json"):
            yield from _walk(child)


@pytest.mark.skipif(shutil.which("chromedriver") is None, reason="Debian chromium-driver not installed")
def test_an_open_page_redraws_itself_and_the_capacity_page_does_not(dash_duo, dash_lake):
    dash_duo.start_server(create_app(dash_lake, refresh_s=1))
    dash_duo.wait_for_page(url=dash_duo.server_url + "/")
    dash_duo.wait_for_text_to_equal("h2", "Overview")
    with Lake(dash_lake) as q:
        last_hour, ran = q.execute(
            "SELECT (SELECT max(hour) FROM fleet_hourly), (SELECT max(computed_at) FROM tenants)"
        ).rows[0]
    line = dash_duo.find_element("#freshness").text
    assert line.startswith(f"figures to {last_hour + dt.timedelta(hours=1):%Y-%m-%d %H:%M} UTC · analytics ran ")
    assert f"{ran:%Y-%m-%d %H:%M} UTC" in line and ran == dt.datetime.fromtimestamp(END, UTC)
    first = _drawn(line)
    deadline = time.monotonic() + 20
    while _drawn(dash_duo.find_element("#freshness").text) == first and time.monotonic() < deadline:
        time.sleep(0.25)
    assert _drawn(dash_duo.find_element("#freshness").text) != first, "the overview was not redrawn"

    dash_duo.wait_for_page(url=dash_duo.server_url + "/capacity")
    dash_duo.wait_for_text_to_equal("h2", "Capacity")
    drawn = _drawn(dash_duo.find_element("#freshness").text)
    time.sleep(3.5)  # three ticks
    assert _drawn(dash_duo.find_element("#freshness").text) == drawn
    assert dash_duo.get_logs() == []


def _drawn(line: str) -> str:
    return re.search(r"page drawn (\d\d:\d\d:\d\d) UTC", line).group(1)
