"""Who makes an accelerator, and what a device plugin's resource name asks of one: one rule for every stage.

`vendor_of(model)` names the vendor of a GPU model as the lake spells it (NVML, AMD's `card_series`, Ascend's
`model_name`, a node label with dashes): the views, the exporter, the dashboards and the FOCUS export group by it,
and where gpu_samples carries `vendor` that column wins (`vendor_of(model, vendor)`).

`read_resource(name)` reads a Kubernetes extended resource as a GPU ask: which vendor, what share of one physical
device a unit holds, and the partition template if it is one. The names are the device plugins' own:

- NVIDIA: `nvidia.com/gpu`, `nvidia.com/mig-<profile>` (gpuledger/mig.py gives a profile's share);
  `nvidia.com/gpu.shared` (time slicing) is read by its callers, as a replica is no share of a GPU.
- AMD (ROCm k8s-device-plugin): `amd.com/gpu` under its default `single` naming, a whole GPU, or one partition
  of a partitioned node, which the name does not tell apart (counted as one device); under `mixed` naming a
  partition is `amd.com/<compute>_<memory>` (`amd.com/cpx_nps4`): SPX the whole GPU, DPX 1/2, TPX 1/3, QPX 1/4,
  CPX one XCD, 1/8 of an MI300X (the MI300A's 1/6 needs an `[[accelerators]]` row: the name does not say which);
  `amd.com/gpu_vf`, `amd.com/gpu_pf` (passthrough) are whole GPUs.
- Huawei (Ascend device plugin, mind-cluster): `huawei.com/Ascend910`, `huawei.com/Ascend310P`,
  `huawei.com/Ascend310` whole chips; a static vNPU template `huawei.com/Ascend<chip>-<n>c[.<extra>]` holds n of
  the chip's AI cores: of 32 on an Ascend910 (the Volcano Ascend plugin's `npu910CardCoef = 32`, templates
  2c/4c/8c/16c), of 8 on an Ascend310P (templates 1c/2c/4c, `4c.3cpu`, `2c.1cpu`). A 910B has fewer AI cores
  (20 to 25 by variant) and the name does not say which variant: such a fleet maps its templates in the config.

`node_label(model)` and `device_resource(model)` say how Kubernetes sees a model's nodes: the label its vendor's
feature discovery sets on them and the extended resource a pod asks a whole device by (Kueue flavors and quotas,
the simulator's nodes).

An extended resource that looks like an accelerator (`<x>.com/<...gpu...>`, or `npu` anywhere, case aside) and is
none of these is `unknown`: the webhook admits it with a warning naming it, the k8s source records the pod without
counting GPUs, until a config `[[accelerators]]` row maps it (`extra`, which also overrides a built-in name).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

from gpuledger.mig import mig_share
from gpuledger.partitions import AMD_MODES, amd_parts, ascend_cores

VENDORS = ("nvidia", "amd", "huawei")

_NVIDIA = re.compile(r"nvidia|tesla|geforce|quadro|\brtx\b|^(?:gh|gb|[abhlt])\d{1,3}s?\b")
# The NVIDIA short names (H100, A100, L40S, T4, GB200) are the simulator's and the rate card's; AMD's are MI<nnn>.
_AMD = re.compile(r"\bamd\b|instinct|radeon|\bmi\d{3}")
_HUAWEI = re.compile(r"ascend|huawei|atlas")


def vendor_of(model: str | None, vendor: str | None = None) -> str | None:
    """nvidia, amd or huawei: `vendor` when the row carries one, else read from the model's name (NVIDIA, Tesla and
    NVIDIA's short names -> nvidia; AMD, Instinct, MI300X -> amd; Ascend -> huawei); None when neither says."""
    if vendor:
        return vendor
    if not model:
        return None
    words = re.sub(r"[\s_-]+", " ", model).strip().lower()
    for name, rule in (("huawei", _HUAWEI), ("amd", _AMD), ("nvidia", _NVIDIA)):
        if rule.search(words):
            return name
    return None


def _vendors_of(models: pl.Series) -> pl.Series:
    # once per distinct model: a day of samples is millions of rows and a handful of models
    table = {m: vendor_of(m) for m in models.unique().drop_nulls().to_list()}
    return models.replace_strict(table, default=None, return_dtype=pl.String)


def vendor_expr(model: str = "model", vendor: str | None = "vendor") -> pl.Expr:
    """`vendor_of` as a polars expression: the `vendor` column where it is set, else the vendor the `model` column's
    name says (the rollups and the exporter: rows from before gpu_samples had `vendor` read back as null)."""
    guess = pl.col(model).map_batches(_vendors_of, return_dtype=pl.String, is_elementwise=True)
    return (pl.coalesce(pl.col(vendor), guess) if vendor else guess).alias("vendor")


def has_vendor(frame: pl.LazyFrame) -> pl.LazyFrame:
    """The frame with a `vendor` column, null where it had none (a frame built before the column, or by hand)."""
    if "vendor" in frame.collect_schema().names():
        return frame
    return frame.with_columns(pl.lit(None, pl.String).alias("vendor"))


@dataclass(frozen=True)
class Resource:
    """What one unit of an extended resource holds: its vendor, its share of one physical device, the partition
    template (None for a whole device) and the model, where the config's [[accelerators]] row names one (a built-in
    name never does: `huawei.com/Ascend910` is any 910, `amd.com/gpu` any Instinct, so the model is the node's)."""

    vendor: str
    share: float
    profile: str | None = None
    model: str | None = None

    @property
    def whole(self) -> bool:
        return self.profile is None and self.share == 1.0


# The name says the mode, not the model: CPX is taken as an MI300X's 1/8 (gpuledger/partitions.py has the figures)
AMD_PARTITION_SHARE = {mode: 1 / amd_parts(mode, None) for mode in AMD_MODES}
# The template's chip as the device plugin names it: Ascend910 any training chip of 32 AI cores, Ascend310P 8
ASCEND_AI_CORES = {chip: ascend_cores(chip) for chip in ("Ascend910", "Ascend310P")}
_AMD_MIXED = re.compile(r"^amd\.com/(spx|dpx|tpx|qpx|cpx)_(nps\d+)$")
_ASCEND_WHOLE = re.compile(r"^huawei\.com/(Ascend\d{3}[A-Za-z0-9]*)$")
_ASCEND_VNPU = re.compile(r"^huawei\.com/(Ascend\d{3}[A-Za-z0-9]*)-(\d+)c(?:\.[A-Za-z0-9.]+)?$")
_LOOKS_GPU = re.compile(r"^[^/]+\.com/.*gpu", re.IGNORECASE)


def read_resource(name: str, extra: Mapping[str, Resource] | None = None) -> Resource | None:
    """The GPU ask of one unit of extended resource `name`, or None when it asks for no accelerator (cpu, memory,
    or one this rule does not know: see `unknown`). `extra` (the config's [[accelerators]]) comes first."""
    if extra and name in extra:
        return extra[name]
    if name == "nvidia.com/gpu":
        return Resource("nvidia", 1.0)
    if name.startswith("nvidia.com/mig-"):
        profile = name[len("nvidia.com/mig-") :]
        return Resource("nvidia", mig_share(profile), profile)
    if name in ("amd.com/gpu", "amd.com/gpu_vf", "amd.com/gpu_pf"):
        return Resource("amd", 1.0)
    if m := _AMD_MIXED.match(name):
        share = AMD_PARTITION_SHARE[m.group(1)]
        return Resource("amd", share, None if share == 1.0 else f"{m.group(1)}.{m.group(2)}")
    if m := _ASCEND_WHOLE.match(name):
        return Resource("huawei", 1.0)  # Ascend910 is a 910A, 910B or 910C: the model is the node's
    if (m := _ASCEND_VNPU.match(name)) and m.group(1) in ASCEND_AI_CORES:
        cores, of = int(m.group(2)), ASCEND_AI_CORES[m.group(1)]
        if 0 < cores <= of:
            return Resource("huawei", cores / of, name.split("/", 1)[1])
    return None


def unknown(name: str, extra: Mapping[str, Resource] | None = None) -> bool:
    """A resource that looks like an accelerator (`*.com/*gpu*`, `*npu*`, case aside) and that `read_resource`
    does not know (nor the time-sliced `nvidia.com/gpu.shared`, which its callers read): admitted, counted nowhere."""
    if name == "nvidia.com/gpu.shared" or read_resource(name, extra) is not None:
        return False
    lower = name.lower()
    return bool(_LOOKS_GPU.match(name)) or "npu" in lower or lower.startswith("huawei.com/ascend")


# The node label each vendor's node labeller sets with the model: NVIDIA GPU feature discovery (k8s-device-plugin
# internal/lm/resource.go: the NVML name, spaces made dashes: NVIDIA-H100-80GB-HBM3), the AMD GPU operator's node
# labeller (the card series, spaces made underscores: AMD_Instinct_MI300X_OAM), Huawei's Ascend device plugin (the
# chip name, the exporter's model_name less its type and version: 910B3 of 910B3-Ascend-V1, 310P3 of Ascend310P3).
NODE_LABEL_KEYS = {
    "nvidia": "nvidia.com/gpu.product",
    "amd": "amd.com/gpu.product-name",
    "huawei": "node.kubernetes.io/npu.chip.name",
}
_ASCEND_CHIP = re.compile(r"(310P|310|910)", re.IGNORECASE)


def node_label(model: str, vendor: str | None = None) -> tuple[str, str]:
    """(key, value) of the label the vendor's node labeller gives the nodes of `model` (`vendor_of` decides the
    vendor; a model no rule knows is NVIDIA's, the one labeller every site had). GFD appends "-SHARED" under
    time-slicing and "-MIG-<profile>" under the single MIG strategy: such nodes carry another value."""
    v = vendor_of(model, vendor) or "nvidia"
    m = model.strip()
    if v == "amd":
        return NODE_LABEL_KEYS[v], m.replace(" ", "_")
    if v == "huawei":
        return NODE_LABEL_KEYS[v], re.sub(r"^ascend\s*", "", m.split("-", 1)[0], flags=re.IGNORECASE)
    return NODE_LABEL_KEYS["nvidia"], m.replace(" ", "-")


def device_resource(model: str, vendor: str | None = None) -> str | None:
    """The extended resource a pod asks one whole device of `model` by, as its vendor's device plugin names it:
    nvidia.com/gpu, amd.com/gpu (the ROCm plugin's default `single` naming), huawei.com/Ascend910, Ascend310P or
    Ascend310 by the chip the model names (None: a Huawei model that names none of them)."""
    v = vendor_of(model, vendor) or "nvidia"
    if v == "amd":
        return "amd.com/gpu"
    if v == "huawei":
        chip = _ASCEND_CHIP.search(model)
        return f"huawei.com/Ascend{chip.group(1).upper()}" if chip else None
    return "nvidia.com/gpu"
