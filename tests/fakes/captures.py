"""Real nvidia-smi captures (tests/fixtures/nvml/, sources in SOURCES.md there) read into FakeGpu specs.

This module reads the nvidia_gpu_exporter captures (one section per nvidia-smi command: we read the `load` state's
--query-gpu CSV, --query-compute-apps, --query-retired-pages, pmon, the MIG, process and max-clock blocks of the -q
text, and the MIG profile names from -L) and holds the converters smi_xml.py shares for `nvidia-smi -q -x` files.
fleets.py turns both into ready-made FakeNvml fleets.

Values are converted to NVML units (MiB -> bytes, W -> mW). "[N/A]", "[Not Supported]" and friends become None, which
the fake answers with NVMLError_NotSupported. What the captures do not hold is synthesised, deterministically:
- UUIDs and serials: the exporter captures mask them (GPU-00000000-..., MIG-0000000N-..., serial 0000000000000), and
  a fleet needs distinct ones, so masked values are replaced by uuid5(capture file, position). XML UUIDs are real and
  kept; `nvidia-smi -q -x` has no MIG UUIDs, so those are generated the same way.
- energy: nvidia-smi has no energy field, so the counter starts at one hour of the captured power draw.
- supported event types: Xid and P-state on every board, ECC events where ECC is on, MIG config changes where MIG
  exists (the event families nvml.h lists), since no capture records nvmlDeviceGetSupportedEventTypes.
"""

from __future__ import annotations

import csv
import io
import re
import uuid as uuidlib
from dataclasses import dataclass
from pathlib import Path

import pynvml

from .devices import FakeGpu, FakeProcess, MigInstance
from .fake_pynvml import FakeNvml

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"
H100 = "nvidia_gpu_exporter__linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt"
H100_MIG = "nvidia_gpu_exporter__linux-x86_64__nvidia-h100-mig__590.48.01.txt"
H200 = "nvidia_gpu_exporter__linux-x86_64__nvidia-h200__590.48.01.txt"
H200_MIG = "nvidia_gpu_exporter__linux-x86_64__nvidia-h200-mig__590.48.01.txt"
L40S = "nvidia_gpu_exporter__linux-x86_64__nvidia-l40s__595.80.txt"
T4_XML = "telegraf__tesla-t4.xml"
A100_XML = "telegraf__a100-sxm4-v12.xml"

MIB = 2**20
MIG_INSTANCES_MAX = 7  # A100, H100 and H200 all allow 7 MIG devices (MIG user guide, "Supported GPUs")
_NAMESPACE = uuidlib.uuid5(uuidlib.NAMESPACE_URL, "gpuledger:tests/fakes/captures")
_BAR = "#" * 80
_FLAGS = {"Yes": 1, "No": 0}
REASON_BITS = {  # nvidia-smi's reason names -> pynvml.nvmlClocksEventReason* bits
    "gpu_idle": pynvml.nvmlClocksEventReasonGpuIdle,
    "applications_clocks_setting": pynvml.nvmlClocksEventReasonApplicationsClocksSetting,
    "sw_power_cap": pynvml.nvmlClocksEventReasonSwPowerCap,
    "hw_slowdown": pynvml.nvmlClocksEventReasonHwSlowdown,
    "sync_boost": pynvml.nvmlClocksEventReasonSyncBoost,
    "sw_thermal_slowdown": pynvml.nvmlClocksEventReasonSwThermalSlowdown,
    "hw_thermal_slowdown": pynvml.nvmlClocksEventReasonHwThermalSlowdown,
    "hw_power_brake_slowdown": pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown,
    "display_clocks_setting": pynvml.nvmlClocksEventReasonDisplayClockSetting,
}


@dataclass(frozen=True)
class Capture:
    """One capture file read into specs; `nvml()` wraps it in a FakeNvml with the captured driver."""

    source: str
    driver_version: str
    nvml_version: str  # "<CUDA major>.<driver>", the form nvmlSystemGetNVMLVersion returns (e.g. 12.560.35.03)
    gpus: list[FakeGpu]

    def nvml(self) -> FakeNvml:
        return FakeNvml(self.gpus, driver_version=self.driver_version, nvml_version=self.nvml_version)


# ---- nvidia_gpu_exporter captures ----


def load_exporter_capture(name: str, state: str = "load") -> Capture:
    """Read one nvidia_gpu_exporter capture (state "load" or "idle") into a Capture."""
    text = (FIXTURES / name).read_text()
    secs = sections(text)
    masked = re.search(r"^masked:\s+yes$", text, re.M) is not None
    row = _csv(_section(secs, name, f"{state} :: query-gpu"))[0]
    q_text = _section(secs, name, f"{state} :: query (-q)")
    gpu = _gpu_from_csv(row, _pages(_section(secs, name, f"{state} :: query-retired-pages")))
    # --query-gpu has no clocks.max.video; the -q text does
    gpu.max_video_clock_mhz = number(_q_blocks(q_text, "    Max Clocks")[0]["Video"])
    gpu.processes = _processes(
        _csv(_section(secs, name, f"{state} :: query-compute-apps")),
        _q_processes(q_text),
        _pmon(_section(secs, name, f"{state} :: pmon")),
    )
    if gpu.mig_mode == pynvml.NVML_DEVICE_MIG_ENABLE:
        gpu.mig = _mig_from_text(_section(secs, name, "capabilities :: list (-L)"), q_text)
    if masked:
        gpu.uuid, gpu.serial = generated_uuid("GPU", name, "gpu0"), generated_serial(name, "gpu0")
        for i, inst in enumerate(gpu.mig):
            inst.uuid = generated_uuid("MIG", name, f"gpu0/mig{i}")
    cuda = re.search(r"^CUDA Version\s*:\s*(\d+)\.", text, re.M)
    return Capture(name, row["driver_version"], f"{cuda.group(1)}.{row['driver_version']}", [gpu])


def sections(text: str) -> dict[str, str]:
    """Section title ("load :: pmon (per-process monitor)") -> body, for the "#"-barred sections of a capture."""
    lines, out, i = text.splitlines(), {}, 0
    while i < len(lines) - 1:
        if lines[i] == _BAR and " :: " in lines[i + 1]:
            title, i = lines[i + 1].removeprefix("# ").strip(), i + 2
            while i < len(lines) and lines[i] != _BAR:  # the "# $ command" lines
                i += 1
            end = i + 1
            while end < len(lines) and lines[end] != _BAR:
                end += 1
            out[title] = "\n".join(lines[i + 1 : end])
            i = end
        else:
            i += 1
    return out


def _section(secs: dict[str, str], source: str, prefix: str) -> str:
    found = [body for title, body in secs.items() if title == prefix or title.startswith(prefix + " ")]
    if len(found) != 1:
        raise ValueError(f"{source}: expected one section {prefix!r}, found {len(found)}")
    return found[0]


def _csv(body: str) -> list[dict[str, str]]:
    """nvidia-smi --format=csv rows keyed by field name, the unit dropped from the header ("power.draw [W]")."""
    rows = list(csv.reader(io.StringIO(body.strip()), skipinitialspace=True))
    header = [re.sub(r" \[[^]]*\]$", "", h) for h in rows[0]] if rows else []
    return [dict(zip(header, [v.strip() for v in r], strict=True)) for r in rows[1:] if r]


def text_or_none(raw: str | None) -> str | None:
    """The text of a reading, or None for "[N/A]", "N/A", "[Not Supported]", "[Requested functionality...]"."""
    if raw is None or raw.startswith("[") or raw in ("N/A", ""):
        return None
    return raw


def number(raw: str | None, scale: float = 1) -> int | None:
    """ "631.95 W" -> round(631.95 * scale), in integer NVML units; unavailable stays None."""
    text = text_or_none(raw)
    return None if text is None else round(float(text.split()[0]) * scale)


def hex_int(raw: str | None) -> int | None:
    """ "0x233010DE" (CSV) or "1EB810DE" (XML) -> int."""
    text = text_or_none(raw)
    return None if text is None else int(text, 16)


def _gpu_from_csv(row: dict[str, str], pages: dict[str, list[int]]) -> FakeGpu:
    ecc_on = row["ecc.mode.current"] == "Enabled"
    mig = {"Enabled": pynvml.NVML_DEVICE_MIG_ENABLE, "Disabled": pynvml.NVML_DEVICE_MIG_DISABLE}
    remap = [row[f"remapped_rows.{k}"] for k in ("correctable", "uncorrectable", "pending", "failure")]
    gpu = FakeGpu(
        uuid=row["uuid"],
        name=row["name"],
        serial=text_or_none(row["serial"]),
        pci_bus_id=row["pci.bus_id"],
        pci_device_id=hex_int(row["pci.device_id"]),
        pci_subsystem_id=hex_int(row["pci.sub_device_id"]),
        memory_total_bytes=number(row["memory.total"], MIB),
        memory_used_bytes=number(row["memory.used"], MIB),
        memory_reserved_bytes=number(row["memory.reserved"], MIB),
        util_gpu=number(row["utilization.gpu"]),
        util_mem=number(row["utilization.memory"]),
        power_mw=number(row["power.draw"], 1000),
        power_limit_mw=number(row["power.limit"], 1000),
        enforced_power_limit_mw=number(row["enforced.power.limit"], 1000),
        energy_mj=None,
        temperature_c=number(row["temperature.gpu"]),
        sm_clock_mhz=number(row["clocks.current.sm"]),
        mem_clock_mhz=number(row["clocks.current.memory"]),
        graphics_clock_mhz=number(row["clocks.current.graphics"]),
        video_clock_mhz=number(row["clocks.current.video"]),
        max_sm_clock_mhz=number(row["clocks.max.sm"]),
        max_mem_clock_mhz=number(row["clocks.max.memory"]),
        max_graphics_clock_mhz=number(row["clocks.max.graphics"]),
        clocks_event_reasons=hex_int(row["clocks_event_reasons.active"]),
        ecc_corrected_volatile=number(row["ecc.errors.corrected.volatile.total"]) if ecc_on else None,
        ecc_uncorrected_volatile=number(row["ecc.errors.uncorrected.volatile.total"]) if ecc_on else None,
        ecc_corrected_aggregate=number(row["ecc.errors.corrected.aggregate.total"]) if ecc_on else None,
        ecc_uncorrected_aggregate=number(row["ecc.errors.uncorrected.aggregate.total"]) if ecc_on else None,
        retired_pages_sbe=None if text_or_none(row["retired_pages.single_bit_ecc.count"]) is None else pages["Single"],
        retired_pages_dbe=None if text_or_none(row["retired_pages.double_bit.count"]) is None else pages["Double"],
        remapped_rows=None if None in map(text_or_none, remap) else tuple(int(_FLAGS.get(v, v)) for v in remap),
        mig_mode=mig.get(row["mig.mode.current"]),
        mig_mode_pending=mig.get(row["mig.mode.pending"]),
    )
    return with_defaults(gpu, ecc_on)


def with_defaults(gpu: FakeGpu, ecc_on: bool) -> FakeGpu:
    """Fill what no capture records: the energy counter, MIG capacity and supported event types (module docstring)."""
    gpu.energy_mj = None if gpu.power_mw is None else gpu.power_mw * 3600  # one hour at the captured draw, in mJ
    gpu.mig_capacity = 0 if gpu.mig_mode is None else MIG_INSTANCES_MAX
    gpu.supported_events = pynvml.nvmlEventTypeXidCriticalError | pynvml.nvmlEventTypePState
    if ecc_on:
        gpu.supported_events |= pynvml.nvmlEventTypeSingleBitEccError | pynvml.nvmlEventTypeDoubleBitEccError
    if gpu.mig_mode is not None:
        gpu.supported_events |= pynvml.nvmlEventMigConfigChange
    return gpu


def _pages(body: str) -> dict[str, list[int]]:
    """Retired page addresses by cause ("Single"/"Double" bit ECC); rows with an "[N/A]" address are skipped."""
    pages: dict[str, list[int]] = {"Single": [], "Double": []}
    for row in _csv(body):
        if (address := hex_int(row["retired_pages.address"])) is not None:
            pages[row["retired_pages.cause"].split()[0]].append(address)
    return pages


def _q_processes(q_text: str) -> dict[int, dict[str, str]]:
    """The "Processes" block of `nvidia-smi -q`: pid -> {"GPU instance ID", "Compute instance ID", "Type", ...}."""
    procs: dict[int, dict[str, str]] = {}
    lines = q_text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.rstrip() == "    Processes"), None)
    current: dict[str, str] = {}
    for line in lines[start + 1 :] if start is not None else []:
        if len(line) - len(line.lstrip()) <= 4:
            break
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "GPU instance ID":
            current = {}
        current[key] = value
        if key == "Process ID":
            procs[int(value)] = current
    return procs


def _pmon(body: str) -> dict[int, list[str]]:
    """pid -> the last `nvidia-smi pmon` sample: [sm, mem, enc, dec] as printed ("-" when there was none)."""
    samples = {}
    for line in body.splitlines():
        cols = line.split()
        if line.startswith("#") or len(cols) < 7 or not cols[1].isdigit():  # "-" pid: no process that second
            continue
        samples[int(cols[1])] = cols[3:7]
    return samples


def _processes(apps: list[dict[str, str]], q_procs: dict[int, dict[str, str]], pmon: dict) -> list[FakeProcess]:
    """Compute processes from --query-compute-apps, plus those only the -q block lists (the H200-MIG CSV is empty:
    the parent-handle query), with GI/CI from -q and utilization from pmon."""
    memory = {int(a["pid"]): number(a["used_gpu_memory"], MIB) for a in apps}
    for pid, q in q_procs.items():
        if "C" in q["Type"]:  # "C" or "C+G"; graphics-only processes are not compute processes
            memory.setdefault(pid, number(q["Used GPU Memory"], MIB))
    procs = []
    for pid, used in memory.items():
        q = q_procs.get(pid, {})
        sm, mem, enc, dec = (None if v == "-" else int(v) for v in pmon.get(pid, ["-"] * 4))
        gi, ci = number(q.get("GPU instance ID")), number(q.get("Compute instance ID"))
        procs.append(FakeProcess(pid, used, sm, mem, enc, dec, gi, ci, name=q.get("Name", "")))
    return procs


def _mig_from_text(listing: str, q_text: str) -> list[MigInstance]:
    """MIG devices: profile and UUID from `nvidia-smi -L`, ids, SMs, engines and memory from the -q "MIG Device"."""
    named = {
        int(m["index"]): (m["profile"], m["uuid"])
        for m in re.finditer(
            r"^\s+MIG\s+(?P<profile>\S+)\s+Device\s+(?P<index>\d+): \(UUID: (?P<uuid>MIG-[\w-]+)\)", listing, re.M
        )
    }
    out = []
    for block in _q_blocks(q_text, "    MIG Device"):
        profile, mig_uuid = named[int(block["Index"])]
        shared = "Device Attributes/Shared/"
        out.append(
            mig_instance(
                mig_uuid,
                profile,
                gi=int(block["GPU Instance ID"]),
                ci=int(block["Compute Instance ID"]),
                sm=int(block[shared + "Multiprocessor count"]),
                total=number(block["Shared FB Memory Usage/Total"], MIB),
                used=number(block["Shared FB Memory Usage/Used"], MIB),
                engines=[
                    int(block[shared + k])
                    for k in ("Copy Engine count", "Encoder count", "Decoder count", "JPG count", "OFA count")
                ],
            )
        )
    return out


def _q_blocks(q_text: str, header: str) -> list[dict[str, str]]:
    """Each `header` block of -q text as {"Group/Sub/Key": value}, nesting from indentation."""
    lines, blocks = q_text.splitlines(), []
    for i in (i for i, line in enumerate(lines) if line.rstrip() == header):
        block: dict[str, str] = {}
        groups: list[tuple[int, str]] = []
        for line in lines[i + 1 :]:
            indent = len(line) - len(line.lstrip())
            if line.strip() and indent <= len(header) - len(header.lstrip()):
                break
            while groups and groups[-1][0] >= indent:
                groups.pop()
            key, sep, value = (part.strip() for part in line.partition(":"))
            if sep:
                block["/".join([g for _, g in groups] + [key])] = value
            elif key:
                groups.append((indent, key))
        blocks.append(block)
    return blocks


def mig_instance(
    mig_uuid: str, profile: str, *, gi: int, ci: int, sm: int, total: int, used: int, engines
) -> MigInstance:
    """A MigInstance; slice counts come from the profile name ("2c.3g.71gb": 3 GI slices, 2 CI slices)."""
    m = re.fullmatch(r"(?:(\d+)c\.)?(\d+)g\.\d+gb", profile)
    if m is None:
        raise ValueError(f"MIG profile {profile!r} is not of the form [<n>c.]<n>g.<n>gb")
    gi_slices = int(m.group(2))
    copy_engines, encoders, decoders, jpegs, ofas = engines
    return MigInstance(
        mig_uuid, profile, gi, ci, gi_slices, int(m.group(1) or gi_slices), sm, total, used,
        copy_engines, encoders, decoders, jpegs, ofas,
    )  # fmt: skip


def generated_uuid(prefix: str, source: str, key: str) -> str:
    return f"{prefix}-{uuidlib.uuid5(_NAMESPACE, f'{source}/{key}')}"


def generated_serial(source: str, key: str) -> str:
    return f"{uuidlib.uuid5(_NAMESPACE, f'{source}/{key}/serial').int % 10**13:013d}"  # 13 digits, like board serials
