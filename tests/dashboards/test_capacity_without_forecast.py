"""The capacity page of a lake with demand but no forecast yet (no complete UTC day: the first hours of a new lake,
as `gpuledger up` makes it): a note saying why, not a server error (the page raised ColumnNotFoundError on the empty
forecast frame)."""

import datetime as dt
from types import SimpleNamespace

from gpuledger.config import defaults
from gpuledger.dashboards import filters
from gpuledger.dashboards.data import DashData
from gpuledger.dashboards.pages import capacity

from builders import END


def _texts(component) -> list[str]:
    """Every string in a Dash component tree."""
    if isinstance(component, str):
        return [component]
    if isinstance(component, (list, tuple)):
        return [t for c in component for t in _texts(c)]
    children = getattr(component, "children", None)
    return [] if children is None else _texts(children)


def test_the_capacity_page_of_a_lake_without_a_forecast(tmp_path):
    from gpuledger.analytics.runner import run
    from gpuledger.collector.sim.backfill import backfill

    lake = tmp_path / "lake"
    start = END - 20 * 3600  # 04:00-24:00 UTC of one day, analysed before its end: no complete day
    # A fleet that starts empty at `start` (epoch_s): a new one would bring the jobs of its warm-up day (the day
    # before), among them the services it deploys as it starts, which hold GPUs all through that day.
    backfill(
        defaults(),
        lake,
        start,
        END - 1,
        600,
        nodes=2,
        gpus_per_node=4,
        models=("H100",),
        workers=1,
        seed=3,
        epoch_s=start,
    )
    run(lake, until_s=END - 1)
    data = DashData(lake)
    try:
        assert data.has("fleet_hourly") and not data.has("demand_forecast")
        day = dt.date(2026, 11, 1)
        page = capacity.layout(SimpleNamespace(data=data, whatif=None), filters.Filters(day, day))
        text = " ".join(_texts(page))
        assert "Not enough history to forecast: no complete UTC day of demand yet" in text
    finally:
        data.close()
