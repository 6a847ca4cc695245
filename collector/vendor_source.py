"""Sources `amd` and `ascend`: scrape AMD device-metrics-exporter and Huawei npu-exporter /metrics pages over HTTP,
one node or a central collector for many, exactly as source `dcgm` does (the same round, keep-alive connections,
deadline, backoff and per-target scrape_error: dcgm_source.py). A page is read by the same exposition parser
(dcgm/exposition.py) and becomes rows by its vendor's table (vendors/). A round runs in one process: the
worker-process split is dcgm's, sized for 10,000 dcgm-exporters.
"""

from __future__ import annotations

from gpuledger.collector.dcgm.exposition import ExpositionError, parse
from gpuledger.collector.dcgm_source import DcgmSource, Target, _Chunk
from gpuledger.collector.http_fetch import Response
from gpuledger.collector.vendors.amd import AMD
from gpuledger.collector.vendors.ascend import ASCEND
from gpuledger.collector.vendors.rows import VendorRows
from gpuledger.collector.vendors.table import Vendor
from gpuledger.config import Config
from gpuledger.errors import SourceError
from gpuledger.store import LakeRef


class VendorSource(DcgmSource):
    vendor: Vendor

    def __init__(self, cfg: Config, urls, **kw):
        kw["workers"] = 1
        super().__init__(cfg, urls, **kw)

    def _reader(self, node: str) -> VendorRows:
        return VendorRows(self.vendor, self.cluster)

    def read_page(self, target: Target, r: Response, ts_us: int, chunk: _Chunk) -> None:
        text = self._text(target, r)
        try:
            parsed = parse(text, target.reader.known)
        except ExpositionError as e:
            raise SourceError(f"{target.url}: {e}") from e
        v = self.vendor
        if not any(_bare(s[0], v).startswith(v.name_prefixes) for s in parsed):
            # Another exporter's page, or an empty one: a wrong URL, not a node without devices (the Ascend
            # exporter writes machine_npu_nums 0 then)
            raise SourceError(
                f"{target.url}: no {v.source} metrics on the page ({len(parsed)} samples, none "
                f"{'/'.join(p + '*' for p in v.name_prefixes)})"
            )
        page, errors = target.reader.rows(parsed, ts_us, default_node=target.node, where=_lines(target.url, text))
        chunk.samples += page.samples
        chunk.events += errors
        for row in page.fields:
            chunk.fields.node.append(row["node"])
            chunk.fields.gpu_uuid.append(row["gpu_uuid"])
            chunk.fields.field.append(row["field"])
            chunk.fields.value.append(row["value"])


def _bare(name: str, v: Vendor) -> str:
    return name[len(v.strip_prefix) :] if v.strip_prefix and name.startswith(v.strip_prefix) else name


def _lines(url: str, text: str):
    """where(i): the line of the page sample i was read from, as `<url> line <n>: <text>` (for scrape_error)."""
    numbers: list[int] = []
    lines = text.split("\n")

    def where(i: int) -> str:
        if not numbers:  # the parser's own rule: a sample is every stripped line that is neither blank nor "#..."
            numbers.extend(n for n, line in enumerate(lines) if line.strip() and line.strip()[0] != "#")
        n = numbers[i]
        line = lines[n].strip()
        return f"{url} line {n + 1}: {line[:160]}{'...' if len(line) > 160 else ''}"

    return where


class AmdSource(VendorSource):
    name = "amd"
    vendor = AMD
    example_url = "http://node:5000/metrics"  # the exporter's default port


class AscendSource(VendorSource):
    name = "ascend"
    vendor = ASCEND
    example_url = "http://node:8082/metrics"  # the exporter's default port (D:14)


def amd_from_config(cfg: Config, lake: LakeRef, now_s: float, urls: tuple[str, ...]) -> AmdSource:
    """Entry point `amd` (collector/source.py SourceFactory): the --url pages, else collector.amd_urls."""
    return AmdSource(cfg, urls or cfg.collector.amd_urls)


def ascend_from_config(cfg: Config, lake: LakeRef, now_s: float, urls: tuple[str, ...]) -> AscendSource:
    """Entry point `ascend`: the --url pages, else collector.ascend_urls."""
    return AscendSource(cfg, urls or cfg.collector.ascend_urls)
