"""gpuledger_gpu_model_info names each model's vendor: fleet_hourly's (the samples' own) where it has one, else the
model name's (gpuledger/vendors.py), `unknown` when neither says. Hand-built frames, as the lake's SQL returns
them."""

import dataclasses
import datetime as dt

import polars as pl

from gpuledger.analytics.exporter.figures import build
from gpuledger.analytics.exporter.tables import Tables


def test_model_info_carries_the_vendor():
    models = ["NVIDIA H100 80GB HBM3", "AMD Instinct MI300X OAM", "910A-Ascend-V1", "Acme Tensor 9", "Renamed X"]
    # "Renamed X" is a name no rule reads, but its samples said amd: the samples win
    fleet = pl.DataFrame(
        {
            "cluster": ["c"] * 5,
            "gpu_model": models,
            "gpus": [8, 8, 8, 1, 2],
            "allocated_gpus": [1.0] * 5,
            "busy_gpus": [1.0] * 5,
            "vendor": [None, "amd", "huawei", None, "amd"],
        }
    )
    inventory = pl.DataFrame(
        {"cluster": ["c"] * 5, "gpu_model": models, "gpus": [8, 8, 8, 1, 2], "mem_bytes": [1, 2, 3, 4, 5]}
    )
    ran = dt.datetime(2026, 11, 2, 12, tzinfo=dt.timezone.utc)
    runs = pl.DataFrame({"cluster": ["c"], "ran_at": [ran], "hour": [ran - dt.timedelta(hours=1)]})
    t = dataclasses.replace(Tables.empty(), runs=runs, fleet=fleet, inventory=inventory)
    (info,) = [f for f in build(t, 3600.0).families if f.name == "gpuledger_gpu_model"]
    got = {s.labels["gpu_model"]: s.labels["vendor"] for s in info.samples}
    assert got == {
        "NVIDIA H100 80GB HBM3": "nvidia",
        "AMD Instinct MI300X OAM": "amd",
        "910A-Ascend-V1": "huawei",
        "Acme Tensor 9": "unknown",
        "Renamed X": "amd",
    }
    # one series per model: the vendor adds none
    assert len(info.samples) == 5
