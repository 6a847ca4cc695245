"""`nvidia-smi -q -x` files (telegraf's test data) read into FakeGpu specs, with xml.etree.

DTD v11 (T4 file) and v12 (A100 file) differ in a few names: power_readings vs gpu_power_readings (v12 splits the
limit into requested = nvmlDeviceGetPowerManagementLimit and current = nvmlDeviceGetEnforcedPowerLimit), and
clocks_throttle_reasons vs clocks_event_reasons. The XML has no MIG profile names or MIG UUIDs: the caller names
profiles (fleets.a100_profile) and UUIDs are generated as for masked captures.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pynvml

from .captures import (
    FIXTURES,
    MIB,
    REASON_BITS,
    Capture,
    generated_uuid,
    hex_int,
    mig_instance,
    number,
    text_or_none,
    with_defaults,
)
from .devices import FakeGpu, FakeProcess


def load_smi_xml(name: str, mig_profile=None) -> Capture:
    """Read an `nvidia-smi -q -x` file; `mig_profile(sm_count, memory_mib)` names MIG devices, which the XML
    does not (see a100_profile)."""
    root = ET.parse(FIXTURES / name).getroot()
    driver = root.findtext("driver_version")
    gpus = [_gpu_from_xml(el, name, mig_profile) for el in root.findall("gpu")]
    return Capture(name, driver, f"{root.findtext('cuda_version').split('.')[0]}.{driver}", gpus)


def _gpu_from_xml(el: ET.Element, source: str, mig_profile) -> FakeGpu:
    def text(path: str) -> str | None:
        return text_or_none(el.findtext(path, default="N/A").strip())

    power = el.find("gpu_power_readings")  # DTD v12 (A100 file); v11 (T4 file) calls it power_readings
    power_path, (limit, enforced) = (
        ("power_readings", ("power_limit", "enforced_power_limit"))
        if power is None
        else ("gpu_power_readings", ("requested_power_limit", "current_power_limit"))
    )
    reasons = el.find("clocks_event_reasons")
    reasons = el.find("clocks_throttle_reasons") if reasons is None else reasons
    ecc_on = text("ecc_mode/current_ecc") == "Enabled"
    mig = {"Enabled": pynvml.NVML_DEVICE_MIG_ENABLE, "Disabled": pynvml.NVML_DEVICE_MIG_DISABLE}
    if text("remapped_rows") is not None:
        raise ValueError(f"{source}: remapped_rows values are not parsed (every fixture has N/A)")
    gpu = FakeGpu(
        uuid=text("uuid"),
        name=text("product_name"),
        serial=text("serial"),
        pci_bus_id=text("pci/pci_bus_id"),
        pci_device_id=hex_int(text("pci/pci_device_id")),
        pci_subsystem_id=hex_int(text("pci/pci_sub_system_id")),
        memory_total_bytes=number(text("fb_memory_usage/total"), MIB),
        memory_used_bytes=number(text("fb_memory_usage/used"), MIB),
        memory_reserved_bytes=number(text("fb_memory_usage/reserved"), MIB),
        util_gpu=number(text("utilization/gpu_util")),
        util_mem=number(text("utilization/memory_util")),
        power_mw=number(text(f"{power_path}/power_draw"), 1000),
        power_limit_mw=number(text(f"{power_path}/{limit}"), 1000),
        enforced_power_limit_mw=number(text(f"{power_path}/{enforced}"), 1000),
        energy_mj=None,
        temperature_c=number(text("temperature/gpu_temp")),
        **{f"{k}_clock_mhz": number(text(f"clocks/{k}_clock")) for k in ("sm", "mem", "graphics", "video")},
        **{f"max_{k}_clock_mhz": number(text(f"max_clocks/{k}_clock")) for k in ("sm", "mem", "graphics", "video")},
        clocks_event_reasons=sum(
            REASON_BITS[child.tag.split("_reason_", 1)[1]]  # "clocks_event_reason_sw_power_cap" -> "sw_power_cap"
            for child in (reasons if reasons is not None else [])
            if child.text.strip() == "Active"
        ),
        ecc_corrected_volatile=_ecc(el, "volatile", "correctable") if ecc_on else None,
        ecc_uncorrected_volatile=_ecc(el, "volatile", "uncorrectable") if ecc_on else None,
        ecc_corrected_aggregate=_ecc(el, "aggregate", "correctable") if ecc_on else None,
        ecc_uncorrected_aggregate=_ecc(el, "aggregate", "uncorrectable") if ecc_on else None,
        retired_pages_sbe=_xml_pages(el, "multiple_single_bit_retirement"),
        retired_pages_dbe=_xml_pages(el, "double_bit_retirement"),
        remapped_rows=None,
        processes=[
            FakeProcess(
                int(p.findtext("pid")),
                number(p.findtext("used_memory"), MIB),
                name=p.findtext("process_name"),
            )
            for p in el.iterfind("processes/process_info")
            if "C" in p.findtext("type")
        ],
        mig_mode=mig.get(text("mig_mode/current_mig")),
        mig_mode_pending=mig.get(text("mig_mode/pending_mig")),
    )
    for i, dev in enumerate(el.iterfind("mig_devices/mig_device")):
        if mig_profile is None:
            raise ValueError(f"{source}: has MIG devices; pass mig_profile= to name them")
        sm = int(dev.findtext("device_attributes/shared/multiprocessor_count"))
        total = number(dev.findtext("fb_memory_usage/total"))
        gpu.mig.append(
            mig_instance(
                generated_uuid("MIG", source, f"{gpu.uuid}/mig{i}"),
                mig_profile(sm, total),
                gi=int(dev.findtext("gpu_instance_id")),
                ci=int(dev.findtext("compute_instance_id")),
                sm=sm,
                total=total * MIB,
                used=number(dev.findtext("fb_memory_usage/used"), MIB),
                engines=[
                    int(dev.findtext(f"device_attributes/shared/{k}_count"))
                    for k in ("copy_engine", "encoder", "decoder", "jpg", "ofa")
                ],
            )
        )
    return with_defaults(gpu, ecc_on)


def _ecc(el: ET.Element, counter: str, kind: str) -> int | None:
    """SRAM + DRAM errors of one kind, e.g. volatile sram_correctable + dram_correctable."""
    values = [number(el.findtext(f"ecc_errors/{counter}/{mem}_{kind}")) for mem in ("sram", "dram")]
    return None if None in values else sum(values)


def _xml_pages(el: ET.Element, cause: str) -> list[int] | None:
    if text_or_none(el.findtext(f"retired_pages/{cause}/retired_count", default="N/A").strip()) is None:
        return None
    return [int(p.text, 16) for p in el.iterfind(f"retired_pages/{cause}/retired_pagelist/*")]
