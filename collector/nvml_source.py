"""Source `nvml`: every GPU and MIG instance on this node through NVML (`pynvml` from nvidia-ml-py).

The pynvml module is a constructor argument (tests pass a fake that mimics it). nvmlInit runs once per source.
Per field, NVMLError_NotSupported (and NoPermission) is a null, never a zero. A GPU that is lost (GpuIsLost,
ResetRequired, ...) becomes one `lost` health event and the other GPUs keep being scraped; it is retried every
scrape and reported again only after it came back. Xid critical errors arrive through an NVML event set.
Units: NVML gives mW and mJ; the lake stores W and J.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

from gpuledger.collector.nvml.cgroups import pod_of_pid
from gpuledger.collector.source import Batch
from gpuledger.config import Config
from gpuledger.errors import SourceError
from gpuledger.mig import mig_share
from gpuledger.store import LakeRef

log = logging.getLogger(__name__)
NODES_EVERY_S = 3600


class NvmlSource:
    name = "nvml"

    def __init__(self, cfg: Config, nvml=None, proc_root: Path = Path("/proc"), node: str | None = None):
        if nvml is None:
            import pynvml as nvml
        self.nvml = nvml
        self.cluster = cfg.cluster
        self.node = node or cfg.collector.writer
        self.process_interval_s = cfg.collector.process_interval_s
        self.proc_root = Path(proc_root)
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as e:
            raise SourceError(f"nvml: NVML could not start ({type(e).__name__}: {e})") from e
        # Errors that mean "this GPU is gone", not "this field is missing".
        self.lost_errors = tuple(
            getattr(nvml, n)
            for n in ("NVMLError_GpuIsLost", "NVMLError_ResetRequired", "NVMLError_GpuNotFound", "NVMLError_Unknown")
            if hasattr(nvml, n)
        )
        self.missing_errors = tuple(
            getattr(nvml, n)
            for n in (
                "NVMLError_NotSupported",
                "NVMLError_NoPermission",
                "NVMLError_FunctionNotFound",
                "NVMLError_NoData",
            )
            if hasattr(nvml, n)
        )
        self.driver = self._opt(nvml.nvmlSystemGetDriverVersion)
        self.count = nvml.nvmlDeviceGetCount()
        self.lost: set[int] = set()
        self.last_process_s = float("-inf")
        self.last_nodes_s = float("-inf")
        self.started_s = time.time()
        self.proc_seen_us: dict[int, int] = {}  # per GPU index: last per-process utilization timestamp read
        self.uuid_index: dict[str, int] = {}
        self.events = self._register_xid_events()

    # -- helpers ------------------------------------------------------------------------------------------
    def _opt(self, fn, *args, **kw):
        """Call an NVML reader; a field the device lacks is None. Lost-GPU errors propagate."""
        try:
            return fn(*args, **kw)
        except self.missing_errors:
            return None

    def _register_xid_events(self):
        nvml = self.nvml
        try:
            event_set = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as e:
            log.warning("nvml: no event set, Xid errors will not be seen (%s)", e)
            return None
        for i in range(self.count):
            try:
                h = nvml.nvmlDeviceGetHandleByIndex(i)
                self.uuid_index[nvml.nvmlDeviceGetUUID(h)] = i
                nvml.nvmlDeviceRegisterEvents(h, nvml.nvmlEventTypeXidCriticalError, event_set)
            except nvml.NVMLError as e:  # NotSupported on some boards, or the GPU is already gone
                log.info("nvml: GPU %d: Xid events not available (%s)", i, e)
        return event_set

    # -- one scrape ---------------------------------------------------------------------------------------
    def collect(self, now_s: float) -> Iterator[Batch]:
        nvml = self.nvml
        ts = int(now_s * 1e6)
        want_procs = now_s - self.last_process_s >= self.process_interval_s
        samples, procs, fields, events, models = [], [], [], [], []
        for i in range(self.count):
            try:
                h = nvml.nvmlDeviceGetHandleByIndex(i)
                row = self._gpu_row(h, i, ts)
                gpu_fields = self._gpu_fields(h, row["gpu_uuid"], ts)
                mig_rows, mig_handles = self._mig_rows(h, row, ts)
                gpu_procs = []
                if want_procs:
                    for hh, r in [(h, row), *mig_handles]:
                        gpu_procs += self._processes(hh, r, i, ts)
            except self.lost_errors as e:
                if i not in self.lost:
                    self.lost.add(i)
                    events.append(
                        self._event(ts, self._uuid_or_index(i), "lost", None, f"GPU {i}: {type(e).__name__}: {e}")
                    )
                continue
            except nvml.NVMLError as e:
                # Any other NVML error (Timeout, InsufficientPower, Memory, ...): this GPU's scrape failed, the
                # others go on, and the reason is on record.
                events.append(
                    self._event(
                        ts,
                        self._uuid_or_index(i),
                        "scrape_error",
                        getattr(e, "value", None),
                        f"GPU {i}: {type(e).__name__}: {e}",
                    )
                )
                continue
            if i in self.lost:
                self.lost.discard(i)
                events.append(self._event(ts, row["gpu_uuid"], "recovered", None, f"GPU {i} answers NVML again"))
            samples.append(row)
            samples += mig_rows
            fields += gpu_fields
            procs += gpu_procs
            models.append(row["model"])
        if want_procs:
            self.last_process_s = now_s
        events += self._xid_events(ts)
        for table, rows in (
            ("gpu_samples", samples),
            ("gpu_processes", procs),
            ("gpu_fields", fields),
            ("health_events", events),
        ):
            if rows:
                yield Batch.from_rows(table, rows)
        if now_s - self.last_nodes_s >= NODES_EVERY_S and samples:
            self.last_nodes_s = now_s
            yield Batch.from_rows(
                "nodes",
                [
                    {
                        "cluster": self.cluster,
                        "node": self.node,
                        "gpu_model": models[0] if models else None,
                        "gpu_count": self.count,
                        "gpu_mem_bytes": samples[0].get("mem_total_bytes"),
                        "labels": [{"key": "nvidia.com/cuda.driver.version", "value": self.driver or ""}],
                        "first_seen": int(self.started_s * 1e6),
                        "last_seen": ts,
                        "source": self.name,
                    }
                ],
            )

    def _uuid_or_index(self, i: int) -> str:
        return next((u for u, j in self.uuid_index.items() if j == i), f"{self.node}/gpu{i}")

    def _memory(self, h) -> tuple[int | None, int | None, int | None]:
        """(total, used, reserved) bytes. The v2 struct splits reserved out of used; v1 folds it in."""
        nvml = self.nvml
        try:
            m = nvml.nvmlDeviceGetMemoryInfo(h, version=nvml.nvmlMemory_v2)
            return m.total, m.used, m.reserved
        except self.missing_errors:
            m = self._opt(nvml.nvmlDeviceGetMemoryInfo, h)
            return (m.total, m.used, None) if m is not None else (None, None, None)

    def _gpu_row(self, h, i: int, ts: int) -> dict:
        nvml, opt = self.nvml, self._opt
        uuid = nvml.nvmlDeviceGetUUID(h)
        self.uuid_index[uuid] = i
        util = opt(nvml.nvmlDeviceGetUtilizationRates, h)
        total, used, reserved = self._memory(h)
        power = opt(nvml.nvmlDeviceGetPowerUsage, h)
        limit = opt(nvml.nvmlDeviceGetEnforcedPowerLimit, h)
        energy = opt(nvml.nvmlDeviceGetTotalEnergyConsumption, h)
        reasons = opt(
            getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or nvml.nvmlDeviceGetCurrentClocksThrottleReasons,
            h,
        )
        return {
            "ts": ts,
            "cluster": self.cluster,
            "node": self.node,
            "gpu_uuid": uuid,
            "gpu_index": i,
            "model": nvml.nvmlDeviceGetName(h),
            "pci_bus_id": _bus_id(opt(nvml.nvmlDeviceGetPciInfo, h)),
            "driver_version": self.driver,
            "util_gpu_pct": float(util.gpu) if util is not None else None,
            "util_mem_pct": float(util.memory) if util is not None else None,
            "mem_used_bytes": used,
            "mem_total_bytes": total,
            "mem_reserved_bytes": reserved,
            "power_w": power / 1000.0 if power is not None else None,
            "power_limit_w": limit / 1000.0 if limit is not None else None,
            "energy_j": energy / 1000.0 if energy is not None else None,
            "temp_c": _f(opt(nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU)),
            "sm_clock_mhz": opt(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM),
            "mem_clock_mhz": opt(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_MEM),
            "throttle_reasons": reasons,
            "ecc_corrected_total": opt(
                nvml.nvmlDeviceGetTotalEccErrors, h, nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, nvml.NVML_VOLATILE_ECC
            ),
            "ecc_uncorrected_total": opt(
                nvml.nvmlDeviceGetTotalEccErrors, h, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
            ),
            "vendor": "nvidia",
            "source": self.name,
        }

    def _gpu_fields(self, h, uuid: str, ts: int) -> list[dict]:
        """Board facts without a gpu_samples column: PCI bus id is a label, the rest are numbers."""
        nvml, opt = self.nvml, self._opt
        out = {}
        rows = opt(nvml.nvmlDeviceGetRemappedRows, h)
        if rows is not None:
            out.update(
                {
                    "nvml.remapped_rows_correctable": rows[0],
                    "nvml.remapped_rows_uncorrectable": rows[1],
                    "nvml.remapped_rows_pending": int(rows[2]),
                    "nvml.remapped_rows_failure": int(rows[3]),
                }
            )
        for cause, name in (
            (nvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, "sbe"),
            (nvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, "dbe"),
        ):
            pages = opt(nvml.nvmlDeviceGetRetiredPages, h, cause)
            if pages is not None:
                out[f"nvml.retired_pages_{name}"] = len(pages)
        limit = opt(nvml.nvmlDeviceGetPowerManagementLimit, h)
        if limit is not None:
            out["nvml.power_management_limit_w"] = limit / 1000.0
        return [
            {
                "ts": ts,
                "cluster": self.cluster,
                "node": self.node,
                "gpu_uuid": uuid,
                "field": k,
                "value": float(v),
                "source": self.name,
            }
            for k, v in out.items()
        ]

    def _mig_rows(self, h, parent: dict, ts: int) -> tuple[list[dict], list[tuple]]:
        nvml = self.nvml
        mode = self._opt(nvml.nvmlDeviceGetMigMode, h)
        if not mode or mode[0] != nvml.NVML_DEVICE_MIG_ENABLE:
            return [], []
        rows, handles = [], []
        for slot in range(self._opt(nvml.nvmlDeviceGetMaxMigDeviceCount, h) or 0):
            try:
                mh = nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, slot)
            except nvml.NVMLError_NotFound:
                continue  # an empty slot
            name = nvml.nvmlDeviceGetName(mh)
            profile = name.rsplit(" MIG ", 1)[1] if " MIG " in name else None
            total, used, reserved = self._memory(mh)
            row = {
                "ts": ts,
                "cluster": self.cluster,
                "node": self.node,
                "gpu_uuid": nvml.nvmlDeviceGetUUID(mh),
                "gpu_index": parent["gpu_index"],
                "parent_gpu_uuid": parent["gpu_uuid"],
                "mig_profile": profile,
                "partition_share": mig_share(profile) if profile else None,
                "model": parent["model"],
                "mem_used_bytes": used,
                "mem_total_bytes": total,
                "mem_reserved_bytes": reserved,
                "vendor": "nvidia",
                "source": self.name,
            }
            rows.append(row)
            handles.append((mh, row))
        return rows, handles

    def _processes(self, h, row: dict, i: int, ts: int) -> list[dict]:
        nvml = self.nvml
        running = self._opt(nvml.nvmlDeviceGetComputeRunningProcesses, h) or []
        sm = {}
        if running and row.get("parent_gpu_uuid") is None:
            # Per-process SM utilization: samples newer than the last one we read (NotFound = none yet).
            try:
                samples = nvml.nvmlDeviceGetProcessUtilization(h, self.proc_seen_us.get(i, 0))
                for s in samples:
                    sm[s.pid] = float(s.smUtil)
                    self.proc_seen_us[i] = max(self.proc_seen_us.get(i, 0), s.timeStamp)
            except (nvml.NVMLError_NotFound, *self.missing_errors):
                pass
        out = []
        for p in running:
            ref = pod_of_pid(p.pid, self.proc_root)
            out.append(
                {
                    "ts": ts,
                    "cluster": self.cluster,
                    "node": self.node,
                    "gpu_uuid": row["gpu_uuid"],
                    "pid": p.pid,
                    "used_mem_bytes": p.usedGpuMemory,
                    "sm_util_pct": sm.get(p.pid),
                    "container": ref.container_id,
                    "pod_uid": ref.pod_uid,
                    "source": self.name,
                }
            )
        return out

    def _xid_events(self, ts: int) -> list[dict]:
        nvml = self.nvml
        out = []
        while self.events is not None:
            try:
                e = nvml.nvmlEventSetWait(self.events, 0)
            except nvml.NVMLError_Timeout:
                break
            except nvml.NVMLError as err:
                log.warning("nvml: reading events failed: %s", err)
                break
            try:
                uuid = nvml.nvmlDeviceGetUUID(e.device)
            except nvml.NVMLError:
                uuid = None
            gi = getattr(e, "gpuInstanceId", None)
            where = f" (GPU instance {gi})" if gi not in (None, 0xFFFFFFFF) else ""
            out.append(self._event(ts, uuid, "xid", int(e.eventData), f"Xid {int(e.eventData)}{where}"))
        return out

    def _event(self, ts: int, uuid: str | None, kind: str, code: int | None, detail: str) -> dict:
        return {
            "ts": ts,
            "cluster": self.cluster,
            "node": self.node,
            "gpu_uuid": uuid,
            "kind": kind,
            "code": code,
            "detail": detail,
            "source": self.name,
        }

    def close(self) -> None:
        nvml = self.nvml
        if self.events is not None:
            self._opt(nvml.nvmlEventSetFree, self.events)
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass  # already shut down or never fully started: nothing left to release


def _bus_id(pci) -> str | None:
    if pci is None:
        return None
    bus = pci.busId
    return bus.decode() if isinstance(bus, bytes) else bus


def _f(v) -> float | None:
    return float(v) if v is not None else None


def from_config(cfg: Config, lake: LakeRef, now_s: float, urls: tuple[str, ...]) -> NvmlSource:
    """Entry point `nvml` (collector/source.py SourceFactory): this node's GPUs."""
    return NvmlSource(cfg)
