"""A mixed simulated fleet (`gpuledger simulate --models H100,MI300X,Ascend910B`): each model's published limits on
its nodes and samples, the vendor on every row, jobs on every model, and the analytics pricing each model. Rests on
the simulator alone (no fixture): the limits asserted are the vendors' figures cited in collector/sim/catalog.py."""

import csv
import io

import polars as pl
import pytest
from click.testing import CliRunner

from gpuledger.cli import main
from gpuledger.collector.sim import state as sim_state
from gpuledger.collector.sim.backfill import backfill
from gpuledger.collector.sim_source import SimSource
from gpuledger.config import defaults

from builders import END

H100, MI300X, ASCEND = "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X OAM", "910B3-Ascend-V1"
# Per model: vendor, memory in bytes, power limit in W, price per GPU-hour (the README's example rates).
LIMITS = {
    H100: ("nvidia", 81559 * 2**20, 700.0, 2.49),  # 81559 MiB as NVML reports an H100 SXM = 85,520,809,984 B
    MI300X: ("amd", 192 * 2**30, 750.0, 1.99),  # AMD data sheet: 192 GB HBM3 = 206,158,430,208 B, 750 W
    ASCEND: ("huawei", 64 * 2**30, 400.0, 1.20),  # Ascend 910B3: 64 GB HBM2e (npu-smi 65536 MB) = 68,719,476,736 B
}


def sql(cli, lake, query):
    r = cli("sql", "--lake", lake, "--format", "csv", query)
    assert r.exit_code == 0, r.output
    return list(csv.DictReader(io.StringIO(r.output)))


@pytest.fixture
def mixed(cli, store):
    """3 nodes (one per model, build_nodes splits the nodes over the models in order) x 4 GPUs, 12 h at 300 s."""
    lake = str(store)
    r = cli(
        "simulate",
        "--lake",
        lake,
        "--nodes",
        3,
        "--gpus-per-node",
        4,
        "--days",
        0.5,
        "--step-s",
        300,
        "--seed",
        11,
        "--models",
        "H100,MI300X,Ascend910B",
        "--end",
        "2026-11-02T00:00:00Z",
        "--workers",
        1,
    )
    assert r.exit_code == 0, r.output
    # 3 nodes x 4 GPUs x 12 h / 300 s = 12 x 144 = 1,728 samples
    assert "wrote 1,728 GPU samples" in r.output
    return lake


def test_each_model_carries_its_limits_and_vendor(cli, mixed):
    rows = sql(
        cli,
        mixed,
        "SELECT model, vendor, count(*) AS n, count(DISTINCT gpu_uuid) AS gpus, min(mem_total_bytes) AS mem_lo, "
        "max(mem_total_bytes) AS mem_hi, max(mem_used_bytes) AS used, max(power_w) AS power, "
        "min(power_limit_w) AS lim_lo, max(power_limit_w) AS lim_hi, count(vendor) AS with_vendor "
        "FROM gpu_samples GROUP BY ALL ORDER BY model",
    )
    assert [r["model"] for r in rows] == sorted(LIMITS)
    for r in rows:
        vendor, mem, tdp, _ = LIMITS[r["model"]]
        assert r["vendor"] == vendor
        assert (int(r["n"]), int(r["gpus"]), int(r["with_vendor"])) == (4 * 144, 4, 4 * 144)  # every row has one
        assert int(r["mem_lo"]) == int(r["mem_hi"]) == mem
        assert 0 < int(r["used"]) <= mem
        assert float(r["lim_lo"]) == float(r["lim_hi"]) == tdp
        # power is never above the limit, and a busy device draws well above its idle power
        assert 0.5 * tdp < float(r["power"]) <= tdp
    nodes = sql(cli, mixed, "SELECT DISTINCT node, gpu_model, gpu_mem_bytes FROM nodes ORDER BY node")
    assert [(n["node"], n["gpu_model"], int(n["gpu_mem_bytes"])) for n in nodes] == [
        ("gpu-ascend910b-002", ASCEND, LIMITS[ASCEND][1]),
        ("gpu-h100-000", H100, LIMITS[H100][1]),
        ("gpu-mi300x-001", MI300X, LIMITS[MI300X][1]),
    ]


def test_jobs_land_on_every_model_and_each_is_priced(cli, mixed):
    jobs = sql(cli, mixed, "SELECT gpu_model, count(*) AS n FROM jobs WHERE gpus > 0 GROUP BY ALL ORDER BY gpu_model")
    assert [j["gpu_model"] for j in jobs] == sorted(LIMITS) and all(int(j["n"]) > 0 for j in jobs)
    r = cli("analyze", "--lake", mixed)
    assert r.exit_code == 0, r.output
    hourly = sql(cli, mixed, "SELECT DISTINCT model, vendor FROM gpu_hourly ORDER BY model")
    assert [(h["model"], h["vendor"]) for h in hourly] == [(m, LIMITS[m][0]) for m in sorted(LIMITS)]
    cost = sql(
        cli,
        mixed,
        "SELECT gpu_model, sum(gpu_hours) AS h, sum(cost_usd) AS usd, count(*) - count(cost_usd) AS unpriced "
        "FROM cost_daily WHERE date = '2026-11-01' GROUP BY ALL ORDER BY gpu_model",
    )
    assert [c["gpu_model"] for c in cost] == sorted(LIMITS)
    for c in cost:
        h, usd = float(c["h"]), float(c["usd"])
        # 4 GPUs for a day hold at most 96 GPU-hours (the window is the day's last 12 h, and the jobs still open at
        # its start bring their history from before: they held the GPUs then too); each model at its own rate
        assert 0 < h <= 96 and int(c["unpriced"]) == 0
        assert usd == pytest.approx(h * LIMITS[c["gpu_model"]][3], rel=1e-9)


def test_the_live_source_writes_the_vendor_of_each_model(tmp_path):
    """The live `sim` source (collector/sim_source.py) resumes the same fleet: its rows carry the vendor too."""
    cfg = defaults()
    lake = tmp_path / "lake"
    backfill(cfg, lake, END - 3600, END, 60, nodes=3, gpus_per_node=2, models=("H100", "MI300X", "Ascend910B"),
             seed=5, workers=1)  # fmt: skip
    src = SimSource(cfg, lake, END + 60)
    live = {b.table: b for b in src.collect(END + 120)}
    got = pl.DataFrame(live["gpu_samples"].columns).group_by("model", "vendor").len().sort("model")
    assert got.rows() == [(ASCEND, "huawei", 2), (MI300X, "amd", 2), (H100, "nvidia", 2)]
    assert sim_state.load(lake, cfg.cluster).models == ("H100", "MI300X", "Ascend910B")


def test_an_unknown_model_is_one_line_and_writes_nothing(tmp_path):
    lake = tmp_path / "lake"
    r = CliRunner().invoke(main, ["simulate", "--lake", str(lake), "--models", "H100,MI250X"])
    assert r.exit_code == 2 and "Invalid value for '--models': unknown simulated model 'MI250X' (known: " in r.output
    assert "MI300X, Ascend910B)" in r.output and "Traceback" not in r.output
    conf = tmp_path / "g.toml"
    conf.write_text('[simulator]\nmodels = ["H100", "Ascend910"]\n')
    r = CliRunner().invoke(main, ["simulate", "--lake", str(lake), "--config", str(conf)])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert f"{conf}: simulator.models[1]: unknown simulated model 'Ascend910' (known: " in r.output
    assert not lake.exists()
