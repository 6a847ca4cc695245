"""Sources amd and ascend over real HTTP, through the collector runner into a lake on both stores: the pages become
rows with their vendor; a page of another exporter is a scrape_error naming the target; a device without a
UUID/serial is a scrape_error naming its line, the rest of its page written. Fixture kinds (SOURCES.md): the AMD
pages are the REAL Kaiwo raw line and the SYNTHETIC 8 x MI300X page; the Ascend ones the REAL 910A capture and
Huawei's GOLDEN mock pages."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuledger.collector import sources
from gpuledger.collector.runner import Collector
from gpuledger.collector.vendor_source import AmdSource, AscendSource
from gpuledger.config import CollectorConfig, Config
from gpuledger.errors import SourceError
from gpuledger.lake import LakeWriter, scan
from gpuledger.spool import Spool

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "accelerators"
T = 1_800_000_000.0
PAGES = {
    "/amd-full": "synthetic-amd-mi300x-x8-spx.prom",
    "/amd-raw": "amd-dme-mi300x-spx-kaiwo-raw-line.prom",
    "/ascend": "ascend-npu-exporter-910a-x8-docs-capture.prom",
    "/ascend-golden": "ascend-npu-exporter-golden-mock-8npu-podlabels.prom",
    "/ascend-0npu": "ascend-npu-exporter-golden-mock-0npu.prom",
}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path in PAGES:
            body = (FIX / PAGES[self.path]).read_bytes()
        elif self.path == "/node-exporter":  # another exporter's valid page: a wrong URL
            body = b"# TYPE node_load1 gauge\nnode_load1 0.25\n"
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server():
    s = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{s.server_address[1]}"
    s.shutdown()


def collect(tmp_path, store, src):
    col = Collector([src], Spool(tmp_path / "spool", "n1"), LakeWriter(store), "c", "n1", clock=lambda: T)
    col.start()
    col.scrape()
    col.close()
    return (scan(store, t).collect() for t in ("gpu_samples", "gpu_fields", "health_events"))


def test_amd_pages_through_the_runner_into_the_lake(tmp_path, store, server):
    src = AmdSource(Config(cluster="c"), [f"{server}/amd-full", f"{server}/amd-raw", f"{server}/node-exporter"])
    samples, fields, events = collect(tmp_path, store, src)
    assert samples.height == 8 + 1 and set(samples["vendor"]) == {"amd"} and set(samples["source"]) == {"amd"}
    by = {r["gpu_uuid"]: r for r in samples.iter_rows(named=True)}
    g2 = by["692409005302"]  # the synthetic page's GPU 2 (serial 6924090053 02), held by ml/train-2
    assert (g2["node"], g2["gpu_index"], g2["pod"], g2["namespace"], g2["container"]) == (
        "tw038",
        2,
        "train-2",
        "ml",
        "main",
    )
    assert g2["util_gpu_pct"] == 20.0  # gpu_gfx_activity 10 x 2 %
    assert g2["power_w"] == 240.0  # gpu_package_power 140 + 50 x 2 W
    assert g2["energy_j"] == pytest.approx(3.75e6)  # 3.75e12 uJ x 1e-6
    assert g2["mem_used_bytes"] == 3_000_000_000 and g2["mem_total_bytes"] == 196_592_000_000  # MB x 10^6
    assert g2["temp_c"] == 42.0 and g2["ecc_corrected_total"] == 2
    assert by["692409005408"]["node"] == "tw038" and by["692409005408"]["util_gpu_pct"] == 0.0  # the real line
    assert samples.filter(samples["gpu_uuid"] != "692409005302")["pod"].null_count() == 8
    # Every other family is in gpu_fields: 56 sample lines a GPU, 9 of them columns (the power tie's loser kept)
    assert fields.height == 8 * (56 - 9) == 376
    assert set(fields.filter(fields["gpu_uuid"] == "692409005300")["field"]) >= {
        "gpu_power_usage",
        'gpu_xgmi_link_rx{link_index="3"}',
        'gpu_hbm_temperature{hbm_index="7"}',
        "gpu_free_vram",
    }
    (e,) = events.iter_rows(named=True)
    assert e["kind"] == "scrape_error" and e["source"] == "amd"
    assert e["detail"].endswith("/node-exporter: no amd metrics on the page (1 samples, none gpu_*/pcie_*)")


def test_ascend_pages_through_the_runner_into_the_lake(tmp_path, store, server):
    urls = [f"{server}/ascend", f"{server}/ascend-golden", f"{server}/ascend-0npu"]
    samples, fields, events = collect(tmp_path, store, AscendSource(Config(cluster="c"), urls))
    # The real capture's 8 chips; the golden page's 8 have no vdie_id; the 0-NPU page has none
    assert samples.height == 8 and set(samples["vendor"]) == {"huawei"} and set(samples["sm_clock_mhz"]) == {1000}
    assert set(samples["node"]) == {"127.0.0.1"}  # no host label on the page: the target's host
    assert fields["field"].to_list() == ["npu_chip_info_bandwidth_rx"]
    details = events.sort("detail")["detail"].to_list()
    assert len(details) == 8 and set(events["kind"]) == {"scrape_error"}
    # Each names the chip, the target and the chip's first line: line 6, after machine_npu_nums' HELP, TYPE and
    # sample and the aicore_current_freq family's HELP and TYPE
    assert details[0] == (
        f'ascend: device id="0" skipped: no vdie_id label (the NPU\'s UUID) ({server}/ascend-golden line 6: '
        'npu_chip_info_aicore_current_freq{container_name="",id="0",model_name="910Awn-Ascend-V1",namespace="",'
        'pcie_bus_info="",pod_name="",vdie_id=""} 0 1606402000)'
    )


def test_the_sources_are_registered_and_read_their_urls_from_the_config(tmp_path, server):
    cfg = Config(collector=CollectorConfig(amd_urls=(f"{server}/amd-raw",), ascend_urls=(f"{server}/ascend",)))
    amd = sources.make("amd", cfg, tmp_path, T)
    ascend = sources.make("ascend", cfg, tmp_path, T, urls=(f"{server}/ascend-0npu",))  # --url overrides
    try:
        assert isinstance(amd, AmdSource) and [t.url for t in amd.targets] == [f"{server}/amd-raw"]
        assert [t.url for t in ascend.targets] == [f"{server}/ascend-0npu"]
    finally:
        amd.close()
        ascend.close()
    with pytest.raises(SourceError, match=r"^ascend: no URL \(give --url http://node:8082/metrics or "):
        sources.make("ascend", Config(), tmp_path, T)
