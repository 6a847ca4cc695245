"""A GPU known by its partitions only counts in the supply once, as fleet_hourly, the idle cost and frag_series count
it (analytics/gpu_hourly.py `physical`).

The AMD device-metrics-exporter writes a GPU in CPX mode as one series per partition, each with the GPU's serial as
parent_gpu_uuid, and no series of the whole GPU. The hour by hand (Nov 2 10:00 UTC, cluster c):
- S1, an MI300X in CPX: 8 partition rows S1/p0..p7 only; p0-p3 held (allocated_ratio 1) and half busy (busy 0.5),
  p4-p7 free and idle; socket energy on partition 0 only (700 Wh), 0 on the others, as the exporter reports it;
- GPU-h, an H100 in MIG: its own row (allocated 1, busy 0.5, 500 Wh) and its 7 1g instances (each allocated 1, busy
  1, 10 Wh), which are part of it, not more of it;
- GPU-l, a whole L4: allocated 0, busy 0, 70 Wh.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.cost import cost_daily
from gpuledger.analytics.cost_allocation import cost_allocation
from gpuledger.analytics.fleet import fleet_hourly
from gpuledger.analytics.frag_series import telemetry_state
from gpuledger.analytics.gpu_hourly import physical
from gpuledger.analytics.runner import run
from gpuledger.collector.dcgm.exposition import parse
from gpuledger.collector.prometheus_source import AMD_QUERY, PrometheusSource
from gpuledger.collector.runner import Collector
from gpuledger.config import Config, Rate, defaults
from gpuledger.lake import LakeWriter, frame_from_rows, scan
from gpuledger.spool import Spool

from builders import allocation, allocations, at, epoch_us, job_state

H = at(2, 10)
MI300X, H100, L4 = "AMD Instinct MI300X OAM", "NVIDIA H100 80GB HBM3", "NVIDIA L4"
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "accelerators"


def _row(uuid, parent, model, alloc, busy, wh, profile=None, node="n1"):
    return dict(
        cluster="c",
        node=node,
        gpu_uuid=uuid,
        parent_gpu_uuid=parent,
        hour=H,
        model=model,
        samples=12,
        allocated_ratio=alloc,
        busy_ratio=busy,
        energy_wh=wh,
        mig_profile=profile,
    )


ROWS = (
    [
        _row(
            f"S1/p{i}", "S1", MI300X, 1.0 if i < 4 else 0.0, 0.5 if i < 4 else 0.0, 700.0 if i == 0 else 0.0, "cpx.nps4"
        )
        for i in range(8)
    ]
    + [_row("GPU-h", None, H100, 1.0, 0.5, 500.0)]
    + [_row(f"GPU-h/gi{i}", "GPU-h", H100, 1.0, 1.0, 10.0, "1g.10gb") for i in range(1, 8)]
    + [_row("GPU-l", None, L4, 0.0, 0.0, 70.0, node="n2")]
)
SCHEMA = {"hour": pl.Datetime("us", "UTC"), "energy_wh": pl.Float64, "busy_ratio": pl.Float64}


def hourly() -> pl.LazyFrame:
    return pl.LazyFrame(ROWS, schema_overrides=SCHEMA)


def _no_queue() -> pl.LazyFrame:
    return pl.LazyFrame(
        schema={
            "ts": pl.Datetime("us", "UTC"),
            "cluster": pl.String,
            "gpu_model": pl.String,
            "pending_jobs": pl.Int64,
            "pending_gpus": pl.Float64,
        }
    )


def test_physical_builds_the_partition_only_gpu_and_keeps_the_mig_gpus_own_row():
    out = physical(hourly()).collect().sort("gpu_uuid")
    assert out["gpu_uuid"].to_list() == ["GPU-h", "GPU-l", "S1"]  # the 7 MIG instances are part of GPU-h
    s1 = out.row(2, named=True)
    # allocated: (4 x 1 + 4 x 0) / 8 = 0.5; busy: (4 x 0.5) / 8 = 0.25; energy 700 + 7 x 0 = 700 Wh; samples 12
    assert (s1["node"], s1["model"], s1["parent_gpu_uuid"], s1["mig_profile"]) == ("n1", MI300X, None, None)
    assert (s1["allocated_ratio"], s1["busy_ratio"], s1["energy_wh"], s1["samples"]) == (0.5, 0.25, 700.0, 12)
    # GPU-h is its own row as written, not a mean with its instances'
    h = out.row(0, named=True)
    assert (h["allocated_ratio"], h["busy_ratio"], h["energy_wh"], h["mig_profile"]) == (1.0, 0.5, 500.0, None)
    assert out.schema == hourly().collect_schema()


def test_fleet_hourly_counts_each_physical_gpu_once():
    out = fleet_hourly(hourly(), _no_queue()).collect()
    got = {
        r["gpu_model"]: (r["gpus"], r["allocated_gpus"], r["busy_gpus"], r["energy_kwh"])
        for r in out.iter_rows(named=True)
    }
    assert got == {  # energy: Wh / 1000 (0.7000000000000001 in floats)
        MI300X: pytest.approx((1, 0.5, 0.25, 0.7)),  # one GPU built from its 8 partitions (above); 700 Wh
        H100: pytest.approx(
            (1, 1.0, 0.5, 0.5)
        ),  # its own row; the instances' 7 x 10 Wh are inside its 500 Wh, not added
        L4: pytest.approx((1, 0.0, 0.0, 0.07)),
    }
    assert dict(out.select("gpu_model", "vendor").rows()) == {MI300X: "amd", H100: "nvidia", L4: "nvidia"}


def test_fleet_hourly_agrees_with_frag_series_gpus():
    # frag_series's inventory, which already counted a GPU known by its partitions: 3 GPUs on n1 and n2
    state = telemetry_state(hourly(), allocations(allocation("X", "t", "GPU-l", 1.0, H, H)).collect(), H, at(2, 11))
    assert sum(len(g) for g in state["gpu_free_milli"]) == 3
    assert fleet_hourly(hourly(), _no_queue()).collect()["gpus"].sum() == 3


RATES = [
    Rate("MI300X", 4.0, dt.date(2026, 1, 1)),
    Rate("H100", 3.0, dt.date(2026, 1, 1)),
    Rate("L4", 1.0, dt.date(2026, 1, 1)),
]


def test_the_partition_only_gpu_idle_hours_are_priced():
    # J holds S1's partitions p0-p3 (1/8 of the GPU each) for the hour; K holds 1 MIG 1g (1/7) of GPU-h.
    allocs = allocations(
        *(allocation("J", "nlp", f"S1/p{i}", 1 / 8, H, at(2, 11), gpu_model=MI300X) for i in range(4)),
        allocation("K", "vision", "GPU-h/gi1", 1 / 7, H, at(2, 11)),
    )
    ca = cost_allocation(allocs, hourly(), RATES, H, at(2, 11))
    idle = {
        r["gpu_uuid"]: (r["gpu_hours"], r["cost_usd"])
        for r in ca.filter(pl.col("job_id").is_null()).iter_rows(named=True)
    }
    # S1 reported 1 h, J held 4 x 1/8 = 0.5 of it: 0.5 idle GPU-hours at $4 = $2 (without S1 in the capacity: none)
    assert idle["S1"] == pytest.approx((0.5, 2.0))
    # GPU-h: 1 h less K's 1/7 = 6/7 h at $3 = $18/7; its instances add no capacity
    assert idle["GPU-h"] == pytest.approx((6 / 7, 18 / 7))
    assert idle["GPU-l"] == pytest.approx((1.0, 1.0))
    assert set(idle) == {"S1", "GPU-h", "GPU-l"}
    # J: one row per partition it held (slice_uuid), each 1/8 h x $4 = $0.5, on the physical GPU S1
    j = ca.filter(pl.col("job_id") == "J")
    assert set(j["gpu_uuid"]) == {"S1"} and j["cost_usd"].to_list() == pytest.approx([0.5] * 4)
    # cost_daily: the MI300X's idle $2 shared back to its one tenant, nlp; 2.0 + 2.0 = its whole hour at $4
    daily, unpriced = cost_daily(ca, "proportional")
    nlp = daily.filter((pl.col("tenant") == "nlp") & (pl.col("gpu_model") == MI300X)).row(0, named=True)
    assert (nlp["cost_usd"], nlp["idle_share_usd"]) == pytest.approx((2.0, 2.0)) and unpriced == []


# The REAL Kaiwo series as Prometheus stored them (SOURCES.md): partition 0 of the CPX MI300X with serial 692409005296
# on tw009 (gfx activity 0, no pod holds it: the exporter's own pod label is none) and the SPX MI300X 692409005328 on
# tw038, held by default/high-utilization-57ls6 at 100 %. Served by a stand-in of Prometheus' query API, read by the
# prometheus source (the AMD row builder, as the series came) every 10 minutes from 10:00 to 11:50.
SERIES = parse((FIX / "amd-dme-mi300x-cpx-spx-kaiwo-prometheus-series.prom").read_text())
STEP_S = 600.0
T0 = H.timestamp()


class _PromApi(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
        amd = q.get("query") == AMD_QUERY  # the DCGM and Ascend queries match none of these series
        if url.path == "/api/v1/query":
            result = [
                {"metric": {"__name__": s.name, **s.labels}, "value": [float(q["time"]), str(s.value)]} for s in SERIES
            ]
            data = {"resultType": "vector", "result": result if amd else []}
        else:
            start, end, step = float(q["start"]), float(q["end"]), float(q["step"])
            times = [start + k * step for k in range(int((end - start) // step) + 1)]
            result = [
                {"metric": {"__name__": s.name, **s.labels}, "values": [[t, str(s.value)] for t in times]}
                for s in SERIES
            ]
            data = {"resultType": "matrix", "result": result if amd else []}
        body = json.dumps({"status": "success", "data": data}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def prometheus_api():
    s = ThreadingHTTPServer(("127.0.0.1", 0), _PromApi)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{s.server_address[1]}"
    s.shutdown()


def test_real_cpx_series_through_the_prometheus_source_and_analyze(tmp_path, store, prometheus_api):
    now = [T0]
    src = PrometheusSource(Config(cluster="c"), prometheus_api, step_s=STEP_S)
    col = Collector([src], Spool(tmp_path / "spool", "n1"), LakeWriter(store), "c", "n1", clock=lambda: now[0])
    col.start()
    for k in range(12):  # 10:00, 10:10, ... 11:50: 6 samples of each series an hour
        now[0] = T0 + k * STEP_S
        col.scrape()
    col.close()
    # the job-level tables (fleet_hourly among them) are computed where the lake has jobs: one waits for an L4
    pending = job_state("J1", "pending", H, tenant="t", namespace="t", gpu_model=L4, gpus=1.0)
    LakeWriter(store).write("jobs", frame_from_rows("jobs", [pending | {"submitted_at": epoch_us(H)}]), "test")
    samples = scan(store, "gpu_samples").collect()
    assert sorted(samples["gpu_uuid"].unique()) == ["692409005296/p0", "692409005328"] and samples.height == 24

    run(store, until_s=at(2, 12).timestamp(), cfg=defaults())
    hourly = scan(store, "gpu_hourly").collect()
    # gpu_hourly keeps what the exporter wrote: the partition, no row of the CPX GPU itself
    assert "692409005296" not in hourly["gpu_uuid"].to_list()
    fleet = scan(store, "fleet_hourly").filter(pl.col("gpu_model") == MI300X).sort("hour").collect()
    # Each hour: 2 MI300X, the SPX one (held, 100 % busy) and the CPX one known by its partition 0 (free, 0 %)
    assert fleet.select("hour", "gpus", "allocated_gpus", "busy_gpus", "vendor").rows() == [
        (at(2, 10), 2, 1.0, 1.0, "amd"),
        (at(2, 11), 2, 1.0, 1.0, "amd"),
    ]


def _claim_samples(node, gpus, second):
    """gpu_samples rows, one a minute 10:00-10:09 at `second`, of (gpu_uuid, parent_gpu_uuid, gpu_index)."""
    return [
        dict(ts=epoch_us(at(2, 10, m, second)), cluster="c", node=node, gpu_uuid=u, parent_gpu_uuid=p, gpu_index=i)
        | dict(source="amd")
        for m in range(10)
        for u, p, i in gpus
    ]


def _cpx(serial, first_index):
    return [(f"{serial}/p{k}", serial, first_index + k) for k in range(8)]


def test_two_machines_in_cpx_under_one_node_name_are_a_claim(tmp_path):
    from gpuledger.analytics.gpu_hourly import gpu_5min
    from gpuledger.analytics.node_claims import clashes
    from gpuledger.query import Lake

    from builders import write_rows

    rows = (
        # amd-a: machines A and B, each one MI300X in CPX (partitions only) at gpu_id 0-7: two GPUs at each index
        _claim_samples("amd-a", _cpx("SA", 0), 0)
        + _claim_samples("amd-a", _cpx("SB", 0), 30)
        # amd-b: one machine, two MI300X in CPX at gpu_id 0-7 and 8-15: no index twice
        + _claim_samples("amd-b", _cpx("SC", 0) + _cpx("SD", 8), 0)
        # mig: one H100 and its 7 instances, all at the GPU's index 0 (NVML, DCGM): one GPU, no claim
        + _claim_samples("mig", [("GPU-h", None, 0)] + [(f"GPU-h/gi{k}", "GPU-h", 0) for k in range(1, 8)], 0)
    )
    lake = tmp_path / "lake"
    write_rows(lake, "gpu_samples", rows)
    with Lake(lake) as q:
        view = q.execute("SELECT node, buckets, gpu_uuids FROM node_claims").rows
    # 10:00-10:09: the buckets 10:00 and 10:05; the machines named by their GPUs' serials, not 16 partitions
    assert view == [("amd-a", 2, ["SA", "SB"])]
    found = clashes(gpu_5min(scan(lake, "gpu_samples"), index=True).collect())
    assert found.select("node", "bucket_start", "gpu_uuids").rows() == [
        ("amd-a", at(2, 10, 0), ["SA", "SB"]),
        ("amd-a", at(2, 10, 5), ["SA", "SB"]),
    ]
