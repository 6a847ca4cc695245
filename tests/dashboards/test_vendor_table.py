"""The overview's and capacity page's table per vendor, by hand, on a lake the analytics ran over.

Samples every minute, Nov 2 10:00 to 12:00 (two hours), of one GPU per vendor: an H100 written without a vendor
(nvidia by its name), an MI300X (amd) with a CPX child row, a 910A chip (huawei), and a card no rule names (unknown).
Rates: H100 $2.49 (the built-in card), MI300X $1, the 910A $0.50 per GPU-hour; the unknown card has none.
"""

import dataclasses
import datetime as dt

import pytest

from gpuledger.analytics.runner import run
from gpuledger.config import Rate, defaults
from gpuledger.dashboards import filters
from gpuledger.dashboards.data import DashData
from gpuledger.dashboards.pages import capacity, overview
from gpuledger.dashboards.vendors import by_vendor

from builders import at, epoch_us, job_state, write_rows

GPUS = [
    ("GPU-h100", None, "NVIDIA H100 80GB HBM3", None),
    ("MI-1", None, "AMD Instinct MI300X OAM", "amd"),
    ("MI-1/p1", "MI-1", "AMD Instinct MI300X OAM", "amd"),
    ("NPU-0", None, "910A-Ascend-V1", "huawei"),
    ("X-0", None, "Acme Tensor 9", None),
]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("vendors") / "lake"
    rows, t = [], at(2, 10)
    while t < at(2, 12):
        for uuid, parent, model, vendor in GPUS:
            rows.append(
                dict(cluster="c", node="n1", gpu_uuid=uuid, parent_gpu_uuid=parent, model=model, vendor=vendor)
                | dict(util_gpu_pct=50.0, power_w=100.0, source="t", ts=epoch_us(t), pod=None)
            )
        t += dt.timedelta(minutes=1)
    write_rows(path, "gpu_samples", rows)
    # the analytics need a jobs table: one job waiting (for nothing these figures count)
    waiting = job_state("J1", "pending", at(2, 10), tenant="nlp", namespace="nlp", gpu_model="Acme Tensor 9", gpus=1.0)
    write_rows(path, "jobs", [waiting | {"cluster": "c", "submitted_at": epoch_us(at(2, 10))}])
    # the built-in card's NVIDIA prices; its MI300X example price (under the exporter's full name, which an exact
    # key wins over `MI300X`) is left out for this test's own
    builtin = tuple(r for r in defaults().rates if r.gpu_model != "AMD Instinct MI300X OAM")
    rates = (*builtin, Rate("MI300X", 1.0, at(1, month=1)), Rate("910A", 0.5, at(1, month=1)))
    run(path, until_s=at(2, 12).timestamp(), cfg=dataclasses.replace(defaults(), cluster="c", rates=rates))
    d = DashData(path)
    yield d
    d.close()


def test_by_vendor(data):
    f = filters.Filters(dt.date(2026, 11, 2), dt.date(2026, 11, 2))
    got = {r["vendor"]: r for r in by_vendor(data, f).iter_rows(named=True)}
    assert set(got) == {"nvidia", "amd", "huawei", "unknown"}
    # one physical device each, every hour (the MI300X's CPX child is part of it); nobody holds one
    assert {v: r["gpus_mean"] for v, r in got.items()} == dict.fromkeys(got, 1.0)
    assert {v: r["allocated_gpus_mean"] for v, r in got.items()} == dict.fromkeys(got, 0.0)
    # two hours of 100 W: 0.2 kWh each (24 buckets of 5 samples a minute apart, each covering 5 minutes)
    assert {v: round(r["energy_kwh"], 9) for v, r in got.items()} == dict.fromkeys(got, 0.2)
    # two idle GPU-hours each (nobody held one: the idle line of cost_daily), at its rate: 2 x 2.49, 2 x 1,
    # 2 x 0.5; the unknown card has no rate, so its idle line costs nothing
    assert got["nvidia"]["total_usd"] == pytest.approx(4.98)
    assert got["amd"]["total_usd"] == pytest.approx(2.0)
    assert got["huawei"]["total_usd"] == pytest.approx(1.0)
    assert got["unknown"]["total_usd"] == 0.0


def test_the_pages_show_it(data):
    f = filters.Filters(dt.date(2026, 11, 2), dt.date(2026, 11, 2))
    for page, table_id in ((overview, "ov-vendor"), (capacity, "cap-vendor")):
        assert table_id in str(page.layout(type("Ctx", (), {"data": data})(), f))
