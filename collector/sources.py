"""Sources by name, from the entry-point group `gpuledger.sources` (the built-ins are registered there too, in
pyproject.toml). Nothing is loaded at import: `make()` is called at startup and names the source that failed
and why."""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

from gpuledger.collector.source import Source, SourceFactory
from gpuledger.config import SOURCE_GROUP, Config, source_names
from gpuledger.errors import SourceError
from gpuledger.store import LakeRef


def make(name: str, cfg: Config, lake: LakeRef, now_s: float, urls: tuple[str, ...] = ()) -> Source:
    """Build one source by name; `urls` (from --url) override the config's for the sources that read URLs."""
    return _factory(name)(cfg, lake, now_s, tuple(urls))


def _factory(name: str) -> SourceFactory:
    found = {ep.value: ep for ep in entry_points(group=SOURCE_GROUP) if ep.name == name}
    if not found:
        raise SourceError(f"unknown source {name!r} (registered: {', '.join(source_names())})")
    if len(found) > 1:  # two installed packages claim the name: say which, rather than pick one
        claims = ", ".join(f"{v} ({_dist(ep)})" for v, ep in sorted(found.items()))
        raise SourceError(f"source {name!r} is registered more than once: {claims}")
    (ep,) = found.values()
    try:
        return ep.load()
    except ImportError as e:
        # By convention a package's extra named after the source holds what it needs (gpuledger[k8s] for k8s).
        extras = (ep.dist.metadata.get_all("Provides-Extra") or []) if ep.dist is not None else []
        hint = f": pip install '{_dist(ep)}[{name}]'" if name in extras else ""
        raise SourceError(f"source {name!r} needs {e.name or 'a module it cannot import'}{hint} ({e})") from e
    except AttributeError as e:
        raise SourceError(f"source {name!r}: entry point {ep.value} names nothing ({e})") from e


def _dist(ep: EntryPoint) -> str:
    return ep.dist.name if ep.dist is not None else "?"


def open_nvml(cfg: Config, nvml=None):
    """The NVML source when this machine has a GPU NVML can read, else None; and why, for `gpuledger up` to say.

    NVML is initialised here and the source keeps it: once per process, as NVIDIA recommends.
    """
    try:
        from gpuledger.collector.nvml_source import NvmlSource

        src = NvmlSource(cfg, nvml=nvml)
    except ImportError:
        return None, "the nvidia-ml-py package (pynvml) is not installed"
    except SourceError as e:
        return None, f"{e}: no usable NVIDIA driver on this machine"
    if src.count == 0:
        src.close()
        return None, "NVML started but reports no GPU"
    return src, f"NVML reports {src.count} GPU(s), driver {src.driver}"
