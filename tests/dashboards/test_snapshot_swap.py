"""The dashboards' snapshot swapped under live readers: no request reads a closed or closing connection.

Before the fix a rebuild closed the old in-memory connection while request threads still read it: a
ConnectionException in about 13,000 reads with rebuilds back to back, and once a connection leaked after a
ResourceInUseException. Here 8 threads run the pages' queries while another rebuilds the snapshot back to back.
The loops are bounded by counts (rebuilds, reads), never by time.
"""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from gpuledger import query
from gpuledger.dashboards import data as data_module
from gpuledger.dashboards.data import DashData
from gpuledger.dashboards.filters import Filters
from gpuledger.dashboards.pages import capacity, overview, queue, tenants, waste

READERS = 8
REBUILDS = 12
MIN_ROUNDS = 3  # each reader runs the pages' queries at least this often, however fast the rebuilds go


def page_queries(data: DashData, f: Filters) -> int:
    """Every snapshot query the pages ask on a load (the lake=True ones read the lake, not the snapshot)."""
    asked = [
        overview.fleet_series(data, f),
        overview.now_by_model(data, f),
        capacity.daily(data, f),
        capacity.peaks(data, f),
        capacity.wait_vs_load(data, f),
        capacity.forecast_rows(data, f),
        tenants.use(data, f),
        tenants.quotas(data, f),
        tenants.cost(data, f),
        tenants.burn_down(data, f),
        waste.by_tenant(data, f),
        waste.idle_now(data, f),
        data.models(),
        data.tenants(),
    ]
    overview.month_cost(data, f, f.end.replace(day=1))
    queue.quantiles(data, f)
    return len(asked) + 2


@pytest.fixture
def snapshots(monkeypatch):
    """Every snapshot the dashboards build, to count the ones left open."""
    built: list[query.Snapshot] = []

    class Recorded(query.Snapshot):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            built.append(self)

    monkeypatch.setattr(data_module, "Snapshot", Recorded)
    return built


def test_rebuilds_back_to_back_under_concurrent_reads_see_no_error(analysed_lake, snapshots):
    data = DashData(analysed_lake)
    f = Filters(dt.date(2000, 1, 1), dt.date(2100, 1, 1))
    expected = {n: data.frame(f"SELECT count(*) AS n FROM {n}")["n"][0] for n in ("fleet_hourly", "job_stats")}
    assert expected["fleet_hourly"] > 0 and expected["job_stats"] > 0
    done = threading.Event()
    start = threading.Barrier(READERS + 1)
    errors: list[str] = []
    reads = [0] * READERS
    wrong: list[str] = []

    def reader(i: int) -> None:
        start.wait()
        rounds = 0
        while rounds < MIN_ROUNDS or not done.is_set():
            try:
                reads[i] += page_queries(data, f)
                # Each read sees a whole snapshot: the same rows in every generation (the lake does not change).
                n = data.frame("SELECT count(*) AS n FROM fleet_hourly")["n"][0]
                if n != expected["fleet_hourly"]:
                    wrong.append(f"fleet_hourly has {n} rows, not {expected['fleet_hourly']}")
                reads[i] += 1
            except Exception as e:  # noqa: BLE001 - counted and named below: the test is that there are none
                errors.append(f"{type(e).__name__}: {e}")
            rounds += 1

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(READERS)]
    for t in threads:
        t.start()
    start.wait()
    try:
        for _ in range(REBUILDS):
            data.rebuild()
    finally:
        done.set()
        for t in threads:
            t.join()
    open_now = [s for s in snapshots if not s.closed]
    data.close()
    open_after_close = [s for s in snapshots if not s.closed]

    print(f"{sum(reads)} reads, {REBUILDS} rebuilds, {len(errors)} errors")
    assert errors == [], f"{len(errors)} errors in {sum(reads)} reads, first: {errors[:3]}"
    assert wrong == []
    assert len(snapshots) == REBUILDS + 1  # the first build, then one per rebuild
    assert len(open_now) == 1  # only the current one: each replaced one closed when its last reader left
    assert open_after_close == []
