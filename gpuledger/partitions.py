"""Partitioned accelerators: what a partitioned device offers, what a partition ask takes, and which layouts a device
can hold. One rule for every stage that judges where a job fits: fragmentation (analytics/fragmentation,
analytics/frag_series.py), the placement what-if (analytics/placement_whatif.py) and the simulator's scheduler
(gpuledger/placement.py).

On Kubernetes the three vendors partition a device *statically*: an operator sets its layout ahead of the jobs and
the device plugin advertises the layout's instances.
- NVIDIA MIG: the GPU operator's mig-manager applies a mig-parted config (`nvidia.com/mig.config=all-1g.10gb`,
  `all-balanced`); the plugin lists one `nvidia.com/mig-<profile>` unit per GPU instance.
- AMD Instinct: the device config manager sets a GPU's compute partition mode (SPX, DPX, TPX, QPX, CPX) with a
  memory mode (NPS1, NPS4); every partition of a GPU is of its one mode (CPX: one per XCD, 8 on an MI300X).
- Huawei Ascend static vNPUs: `npu-smi set -t create-vnpu` cuts a chip by the vendor's templates (vir02, vir04...);
  the plugin lists `huawei.com/Ascend910-2c`, `huawei.com/Ascend310P-2c.1cpu`...
A pod asks for instances of one type and gets free instances of exactly that type. Hence the three rules the
fragmentation metric and the schedulers follow:

1. *Whole instances, not thousandths*: an ask takes whole instances and fits where enough free instances of its type
   are, whatever the thousandths say (seven 1g.10gb fit an all-1g H100, although 7 x 143 milli is 1,001).
2. *Mode*: a partitioned device offers no whole device and no time-sliced share; a whole device offers no instance.
3. *The vendor's layouts*: a layout must be one the device can hold (`check_layout`): MIG instances at their
   profiles' allowed placements (two 3g.40gb and a 1g.10gb are 7 compute slices, but no placement holds them), one
   AMD mode per GPU with as many partitions as the mode makes, an Ascend chip's AI cores and, on a 310P, its 7 AI
   CPUs (six vir01 leave room for one vir02_1c, not two vir01).
Dynamic partitioning (a scheduler cutting an instance per job: Run:ai's dynamic MIG, Volcano's dynamic vNPU) is not
modelled: a partitioned device is judged by the instances its layout has.

The frames that carry partitions (between the lake readers, the metric and the replays):
- node state (analytics.fragmentation.metric): optional `gpu_partitions`, List(String) aligned with `gpu_free_milli`:
  null for a whole device, else its *free* instances' types joined by "," ("" when none is free).
- a replay's cluster frame: optional `gpu_layout`, List(String) per GPU: null for a whole device, else the layout's
  instance types joined by "," (`format_layout`).
- pods and task types: optional `profile`: null or "" for an ask of whole GPUs or of a share, else the instance type
  (`instance_type`); `num_gpu` then counts instances and `gpu_milli` is one instance's share x 1000 (for totals).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpuledger.mig import MIG_PROFILE, MIG_SLICES

# --- NVIDIA MIG ---------------------------------------------------------------------------------------------------
# The A100/H100/H200/B200 geometry: 7 compute slices over 8 memory slices. A GPU instance occupies a run of memory
# slices starting at one of its profile's allowed placements (NVML nvmlGpuInstancePlacement_t: start and size in
# memory slices; the placements of the MIG user guide's "Supported MIG Profiles", nvidia-smi mig -lgipp):
# compute slices -> (memory slices, allowed starts). The 1g profile with twice the memory (1g.20gb on an 80 GB GPU)
# takes 2 memory slices at starts 0, 2, 4, 6.
MIG_MEMORY_SLICES = 8
MIG_PLACEMENTS = {1: (1, (0, 1, 2, 3, 4, 5, 6)), 2: (2, (0, 2, 4)), 3: (4, (0, 4)), 4: (4, (0,)), 7: (8, (0,))}
MIG_WIDE_1G = (2, (0, 2, 4, 6))
# mig-parted's `all-balanced` config per GPU memory (its examples/config.yaml): two 1g, one 2g, one 3g
MIG_BALANCED = {
    40: ("1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"),
    80: ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"),
    94: ("1g.12gb", "1g.12gb", "2g.24gb", "3g.47gb"),
    141: ("1g.18gb", "1g.18gb", "2g.35gb", "3g.71gb"),
}
_GB = re.compile(r"(\d+)\s*gb", re.IGNORECASE)

# --- AMD Instinct -------------------------------------------------------------------------------------------------
# One compute partition per XCD in CPX mode (amdsmi's GPU partitioning guide); DPX, TPX and QPX halve, third and
# quarter the GPU whatever its XCDs. collector/vendors/amd.py reads the exporter's partitions by these figures.
AMD_MODES = ("spx", "dpx", "tpx", "qpx", "cpx")
AMD_PARTS = {"spx": 1, "dpx": 2, "tpx": 3, "qpx": 4}
AMD_XCDS = (("MI300A", 6), ("MI300X", 8), ("MI325X", 8), ("MI350X", 8), ("MI355X", 8))
AMD_DEFAULT_XCDS = 8
# An AMD profile: the compute mode, and the memory mode where it is written (cpx.nps4, cpx_nps4, cpx)
AMD_PROFILE = re.compile(r"^(spx|dpx|tpx|qpx|cpx)(?:[._](nps\d+))?$")

# --- Huawei Ascend ------------------------------------------------------------------------------------------------
# AI cores and AI CPUs of a chip (hiascend.com, Ascend Virtualization Instance guide, "虚拟化规则": training parts
# 30 or 32 AI cores, templates vir02/04/08/16; inference (310P) 8 AI cores and 7 AI CPUs, templates vir01, vir02,
# vir04, vir02_1c, vir04_3c; "a 310P splits into at most 7 instances"). The 910B's AI cores by variant (910B1/B2
# 24, 910B3/B4 20) are the chips' published figures; the name `huawei.com/Ascend910-<n>c` does not say the variant.
ASCEND_CORES = (("310P", 8), ("910B1", 24), ("910B2", 24), ("910B3", 20), ("910B4", 20), ("910", 32))
ASCEND_310P_AICPU = 7
# A template's AI CPUs where it names fewer than its cores (vir02_1c: 2 cores, 1 AI CPU; vir04_3c: 4 cores, 3).
# Atlas A2 (910B) templates name their memory too: Ascend910-5c.1cpu.16g (npu-smi's vir05_1c_16g)
_VNPU = re.compile(r"^(?:vnpu-|Ascend\w*?-)?(\d+)c(?:\.(\d+)cpu)?(?:\.\d+g)?$")
_VIR = re.compile(r"^vir(\d+)(?:_(\d+)c)?(?:_\w+)?$")


@dataclass(frozen=True)
class Instance:
    """One instance type as a layout or an ask names it: its vendor family, its canonical type, its size in the
    family's units (MIG compute slices, AMD partitions of the GPU's mode, Ascend AI cores) and, for a 310P vNPU, the
    AI CPUs its template takes (None: as many as its cores)."""

    family: str  # mig, amd, vnpu
    type: str
    size: int
    aicpu: int | None = None


def parse_instance(profile: str) -> Instance | None:
    """The instance a profile names, as a job (`jobs.mig_profile`, the device plugin's resource name less its
    domain) or a device row (`gpu_samples.mig_profile`) spells it; None when it is no partition profile."""
    p = profile.strip()
    if (m := MIG_PROFILE.match(p)) is not None:
        return Instance("mig", p.removesuffix("+me"), int(m.group(1)))
    if (m := AMD_PROFILE.match(p.lower())) is not None:
        return Instance("amd", m.group(1), 1)
    if (m := _VNPU.match(p)) is not None:
        cores = int(m.group(1))
        return Instance("vnpu", f"vnpu-{cores}c", cores, int(m.group(2)) if m.group(2) else None)
    if (m := _VIR.match(p)) is not None:  # npu-smi's template names
        cores = int(m.group(1))
        return Instance("vnpu", f"vnpu-{cores}c", cores, int(m.group(2)) if m.group(2) else None)
    return None


def instance_type(profile: str | None) -> str | None:
    """The canonical instance type of a profile, the key a device's free instance and an ask meet on: a MIG profile
    as NVML names it (its media-extension `+me` variant is the same slot), an AMD compute mode (`cpx.nps4` -> `cpx`:
    the memory mode is the node's), an Ascend vNPU by its AI cores (`Ascend310P-2c.1cpu`, `vnpu-2c`, `vir02_1c` ->
    `vnpu-2c`: the exporter reports the cores, not the template). None for None or no partition profile."""
    if not profile:
        return None
    inst = parse_instance(profile)
    return inst.type if inst else None


def ascend_cores(model: str | None) -> int | None:
    """AI cores of an Ascend chip by its model name (910B3-Ascend-V1 -> 20, 310P3 -> 8, Ascend910 -> 32)."""
    if not model:
        return None
    for name, cores in ASCEND_CORES:
        if name.lower() in model.lower():
            return cores
    return None


def amd_xcds(model: str | None) -> int | None:
    """XCDs of an AMD model by its name (MI300A 6, MI300X 8); None for a model not listed."""
    for name, xcds in AMD_XCDS:
        if model and name.lower() in model.lower():
            return xcds
    return None


def amd_parts(mode: str, model: str | None) -> int:
    """Partitions of an AMD GPU in a compute mode: CPX one per XCD (MI300A 6, MI300X 8; 8 for a model not listed),
    the others fixed."""
    if mode in AMD_PARTS:
        return AMD_PARTS[mode]
    return amd_xcds(model) or AMD_DEFAULT_XCDS


def instance_share(profile: str, model: str | None = None) -> float | None:
    """The share of its device one instance holds: MIG g/7, AMD 1/partitions of its mode, a vNPU its AI cores over
    the chip's (None where the chip's cores are not known and the name does not say)."""
    inst = parse_instance(profile)
    if inst is None:
        return None
    if inst.family == "mig":
        return inst.size / MIG_SLICES
    if inst.family == "amd":
        return 1 / amd_parts(inst.type, model)
    cores = ascend_cores(model)
    return inst.size / cores if cores else None


def _mig_memory_gb(model: str | None) -> int:
    """The MIG geometry's memory class of a model (40, 80, 94, 141 GB), 80 when the name does not say."""
    sizes = [int(g) for g in _GB.findall(model or "")]
    if any(s >= 141 for s in sizes) or (model and "H200" in model.upper()):
        return 141
    for s in sizes:
        if s in MIG_BALANCED:
            return s
    return 80


def _mig_fits(instances: Sequence[Instance], model: str | None) -> bool:
    """Whether MIG instances have a placement together: each at one of its profile's allowed starts, no two
    overlapping in memory slices, at most 7 compute slices (a small exact search: a GPU holds at most 7)."""
    if sum(i.size for i in instances) > MIG_SLICES:
        return False
    slice_gb = _mig_memory_gb(model) / MIG_MEMORY_SLICES
    spans = []
    for inst in instances:
        if inst.size not in MIG_PLACEMENTS:
            return False
        gb = int(inst.type.split(".")[-1].removesuffix("gb")) if inst.type.endswith("gb") else 0
        wide = inst.size == 1 and gb >= 1.5 * slice_gb  # the 1g profile with two memory slices
        spans.append(MIG_WIDE_1G if wide else MIG_PLACEMENTS[inst.size])
    spans.sort(key=lambda s: -s[0])  # the widest first: fewer choices, an earlier dead end

    def place(k: int, used: int) -> bool:
        if k == len(spans):
            return True
        width, starts = spans[k]
        for s in starts:
            mask = ((1 << width) - 1) << s
            if s + width <= MIG_MEMORY_SLICES and not used & mask and place(k + 1, used | mask):
                return True
        return False

    return place(0, 0)


def check_layout(profiles: Sequence[str], model: str | None = None) -> tuple[str, ...]:
    """The canonical instance types of a device's layout, or ValueError saying which rule it breaks (see the module's
    rule 3). `model`: the device's model, for the vendor's figures (MIG memory class, AMD XCDs, Ascend AI cores)."""
    if not profiles:
        raise ValueError("a partitioned device's layout names no instance")
    instances = []
    for p in profiles:
        inst = parse_instance(p)
        if inst is None:
            raise ValueError(f"{p!r} is no partition profile (MIG 1g.10gb, AMD cpx, Ascend vnpu-2c or vir02)")
        instances.append(inst)
    families = {i.family for i in instances}
    if len(families) > 1:
        raise ValueError(f"a device is partitioned by one vendor's rule, not {' and '.join(sorted(families))}")
    family = families.pop()
    shown = ", ".join(profiles)
    if family == "mig" and not _mig_fits(instances, model):
        raise ValueError(
            f"MIG layout {shown}: no placement holds these instances together (each profile sits at fixed memory "
            "slices: a 3g at 0 or 4, a 2g at 0, 2 or 4, a 4g or 7g at 0; at most 7 compute slices)"
        )
    if family == "amd":
        modes = {i.type for i in instances}
        if len(modes) > 1:
            many = ", ".join(sorted(modes))
            raise ValueError(f"AMD layout {shown}: a GPU has one compute partition mode, not {many}")
        mode = modes.pop()
        most = amd_parts(mode, model)
        if len(instances) > most:
            raise ValueError(f"AMD layout {shown}: {mode.upper()} makes {most} partitions of {model or 'this GPU'}")
    if family == "vnpu":
        cores = ascend_cores(model) or (8 if model and "310" in model else 32)
        used = sum(i.size for i in instances)
        if used > cores:
            raise ValueError(f"vNPU layout {shown}: {used} AI cores, the chip has {cores}")
        if cores == 8:  # a 310P: 7 AI CPUs, each template takes its cores' worth unless it names fewer
            cpus = sum(i.size if i.aicpu is None else i.aicpu for i in instances)
            if cpus > ASCEND_310P_AICPU:
                raise ValueError(f"vNPU layout {shown}: {cpus} AI CPUs, a 310P has {ASCEND_310P_AICPU}")
    return tuple(i.type for i in instances)


def parse_layout(text: str, model: str | None = None) -> tuple[str, ...]:
    """A layout as an operator writes it, checked (`check_layout`) and in canonical types:
    - instances joined by ",", each optionally times a count: `3g.40gb,2g.20gb,1g.10gb*2`, `vnpu-8c*2,vnpu-4c*4`,
      `vir04_3c,vir02_1c*2`;
    - mig-parted's names: `all-<profile>` (as many as fit: all-1g.10gb is 7, all-3g.40gb 2), `all-balanced` (two
      1g, a 2g and a 3g of the model's memory class);
    - an AMD compute mode, optionally with its memory mode: `cpx`, `cpx.nps4`, `dpx` (every partition the mode makes).
    ValueError naming what is wrong."""
    t = text.strip()
    if not t:
        raise ValueError("an empty layout")
    if t == "all-balanced":
        return check_layout(MIG_BALANCED[_mig_memory_gb(model)], model)
    if t.startswith("all-"):
        inst = parse_instance(t[4:])
        if inst is None or inst.family != "mig":
            raise ValueError(f"{t!r}: all-<profile> takes a MIG profile such as all-1g.10gb")
        most = max(n for n in range(1, MIG_SLICES + 1) if _mig_fits([inst] * n, model))
        return check_layout([inst.type] * most, model)
    if (m := AMD_PROFILE.match(t.lower())) is not None and "," not in t and "*" not in t:
        return check_layout([m.group(1)] * amd_parts(m.group(1), model), model)
    profiles: list[str] = []
    for part in t.split(","):
        name, _, times = part.strip().partition("*")
        if not times:
            profiles.append(name.strip())
            continue
        if not times.strip().isdigit() or int(times) < 1:
            raise ValueError(f"{part.strip()!r}: a count after '*' must be a whole number >= 1")
        profiles.extend([name.strip()] * int(times))
    return check_layout(profiles, model)


def format_layout(types: Iterable[str]) -> str:
    """A layout or a set of free instances as the frames carry it: types joined by ","."""
    return ",".join(types)


def split_layout(text: str | None) -> list[str]:
    """`format_layout` read back: [] for "" (a partitioned device with nothing free)."""
    return [t for t in (text or "").split(",") if t]


def free_instances(layout: Sequence[str], held: Iterable[str]) -> list[str]:
    """The layout's instances less those held (by type, each held instance once)."""
    left = Counter(layout)
    left.subtract(held)
    out = []
    for t in layout:
        if left[t] > 0:
            out.append(t)
            left[t] -= 1
    return out
