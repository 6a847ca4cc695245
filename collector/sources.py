"""The one explicit list of built-in sources. No registration at import: `make()` is called at startup and
names the source that failed and why."""

from __future__ import annotations

from pathlib import Path

from collector.source import Source
from gpuledger.config import SOURCE_NAMES, Config
from gpuledger.errors import SourceError

AVAILABLE = ("sim", "nvml", "k8s", "dcgm", "prometheus")


def make(name: str, cfg: Config, lake: Path, now_s: float, urls: tuple[str, ...] = ()) -> Source:
    """Build one source by name; `urls` (from --url) override the config's for dcgm and prometheus."""
    if name == "nvml":
        from collector.nvml_source import NvmlSource

        return NvmlSource(cfg)
    if name == "dcgm":
        from collector.dcgm_source import DcgmSource

        return DcgmSource(cfg, urls or cfg.collector.dcgm_urls)
    if name == "prometheus":
        from collector.prometheus_source import PrometheusSource

        if len(urls) > 1:
            raise SourceError("prometheus: give one --url (the Prometheus server)")
        return PrometheusSource(cfg, urls[0] if urls else cfg.collector.prometheus_url)
    if name == "sim":
        from collector.sim_source import SimSource

        return SimSource(cfg, lake, now_s)
    if name == "k8s":
        try:
            from collector.k8s_source import K8sSource
        except ImportError as e:
            raise SourceError(f"source 'k8s' needs the kubernetes client: pip install 'gpuledger[k8s]' ({e})") from e
        return K8sSource(cfg)
    if name in SOURCE_NAMES:
        raise SourceError(f"source {name!r} is not available in this version (available: {', '.join(AVAILABLE)})")
    raise SourceError(f"unknown source {name!r} (known: {', '.join(SOURCE_NAMES)})")


def open_nvml(cfg: Config, nvml=None):
    """The NVML source when this machine has a GPU NVML can read, else None; and why, for `gpuledger up` to say.

    NVML is initialised here and the source keeps it: once per process, as NVIDIA recommends.
    """
    try:
        from collector.nvml_source import NvmlSource

        src = NvmlSource(cfg, nvml=nvml)
    except ImportError:
        return None, "the nvidia-ml-py package (pynvml) is not installed"
    except SourceError as e:
        return None, f"{e}: no usable NVIDIA driver on this machine"
    if src.count == 0:
        src.close()
        return None, "NVML started but reports no GPU"
    return src, f"NVML reports {src.count} GPU(s), driver {src.driver}"
