"""gpuledger/vendors.py: a model's vendor, and a device plugin's resource name as a GPU ask. The names are the ones
the vendors' device plugins register (cited in the module); the shares are worked out by hand beside each case."""

import pytest

from gpuledger.vendors import Resource, device_resource, node_label, read_resource, unknown, vendor_of


@pytest.mark.parametrize(
    "model,want",
    [
        ("NVIDIA H100 80GB HBM3", "nvidia"),  # NVML
        ("NVIDIA-H100-80GB-HBM3", "nvidia"),  # GPU feature discovery's node label
        ("Tesla T4", "nvidia"),
        ("NVIDIA A100-SXM4-80GB", "nvidia"),
        ("H100", "nvidia"),  # the rate card's and the simulator's short names
        ("L40S", "nvidia"),
        ("GB200", "nvidia"),
        ("AMD Instinct MI300X OAM", "amd"),  # AMD exporter's card_series
        ("AMD_Instinct_MI300X_OAM", "amd"),  # AMD node labeller's product-name
        ("MI300X", "amd"),
        ("Instinct MI325X", "amd"),
        ("910A-Ascend-V1", "huawei"),  # the real 8 x 910A capture's model_name
        ("910Awn-Ascend-V1", "huawei"),  # mind-cluster's golden page
        ("Ascend910B", "huawei"),
        ("Ascend 910B", "huawei"),
        ("Ascend310P3", "huawei"),
        ("Intel Gaudi 2", None),  # nobody we know: no guess
        ("", None),
        (None, None),
    ],
)
def test_vendor_of_model(model, want):
    assert vendor_of(model) == want


def test_a_rows_own_vendor_wins_over_the_name():
    # gpu_samples.vendor is what the source knew; the name rule is only for rows without it (jobs, rate keys)
    assert vendor_of("NVIDIA H100 80GB HBM3", "amd") == "amd"
    assert vendor_of(None, "huawei") == "huawei"
    assert vendor_of("MI300X", None) == "amd"


@pytest.mark.parametrize(
    "name,want",
    [
        ("nvidia.com/gpu", Resource("nvidia", 1.0)),
        ("nvidia.com/mig-1g.10gb", Resource("nvidia", 1 / 7, "1g.10gb")),  # 1 of 7 compute slices
        ("nvidia.com/mig-3g.40gb", Resource("nvidia", 3 / 7, "3g.40gb")),
        ("amd.com/gpu", Resource("amd", 1.0)),  # `single` naming: a GPU (or a partition, the name cannot say)
        ("amd.com/gpu_vf", Resource("amd", 1.0)),
        ("amd.com/spx_nps1", Resource("amd", 1.0)),  # SPX is the whole GPU: no profile
        ("amd.com/cpx_nps4", Resource("amd", 1 / 8, "cpx.nps4")),  # one of the MI300X's 8 XCDs
        ("amd.com/cpx_nps1", Resource("amd", 1 / 8, "cpx.nps1")),
        ("amd.com/dpx_nps2", Resource("amd", 1 / 2, "dpx.nps2")),
        ("amd.com/qpx_nps1", Resource("amd", 1 / 4, "qpx.nps1")),
        ("huawei.com/Ascend910", Resource("huawei", 1.0)),
        ("huawei.com/Ascend310P", Resource("huawei", 1.0)),
        ("huawei.com/Ascend310", Resource("huawei", 1.0)),
        ("huawei.com/Ascend910-4c", Resource("huawei", 4 / 32, "Ascend910-4c")),  # 4 of a 910's 32 AI cores
        ("huawei.com/Ascend910-16c", Resource("huawei", 16 / 32, "Ascend910-16c")),  # half
        ("huawei.com/Ascend310P-2c", Resource("huawei", 2 / 8, "Ascend310P-2c")),  # 2 of a 310P's 8
        ("huawei.com/Ascend310P-4c.3cpu", Resource("huawei", 4 / 8, "Ascend310P-4c.3cpu")),
        ("huawei.com/Ascend310P-1c", Resource("huawei", 1 / 8, "Ascend310P-1c")),
        ("cpu", None),
        ("memory", None),
        ("nvidia.com/gpu.shared", None),  # a time-sliced replica: its callers read it, it is no share
        ("huawei.com/Ascend310P-16c", None),  # more cores than a 310P has
        ("huawei.com/Ascend910-0c", None),
    ],
)
def test_read_resource(name, want):
    got = read_resource(name)
    if want is None:
        assert got is None
    else:
        assert (got.vendor, got.profile, got.model) == (want.vendor, want.profile, want.model)
        assert got.share == pytest.approx(want.share)


@pytest.mark.parametrize(
    "name,want",
    [
        ("example.com/gpu", True),  # *.com/*gpu*
        ("intel.com/Some-GPU-x", True),  # case aside
        ("acme.com/npu", True),
        ("huawei.com/npu-core", True),  # *npu*
        ("huawei.com/Ascend310P-16c", True),  # an Ascend name the rule cannot read
        ("gpu.intel.com/i915", False),  # gpu in the domain only, not *.com/*gpu*: not ours to guess
        ("nvidia.com/gpu", False),  # known
        ("amd.com/cpx_nps4", False),
        ("nvidia.com/gpu.shared", False),
        ("cpu", False),
        ("ephemeral-storage", False),
        ("example.org/gpu", False),  # not .com
    ],
)
def test_unknown_accelerator_like_resources(name, want):
    assert unknown(name) is want


def test_a_config_row_maps_an_unknown_name_and_overrides_a_built_in():
    # a 910B3 has 20 AI cores, not the 910A's 32: a 10c template is half of one, which the name cannot tell
    extra = {
        "example.com/gpu": Resource("nvidia", 1.0, None, "NVIDIA L4"),
        "huawei.com/Ascend910-10c": Resource("huawei", 10 / 20, "Ascend910-10c", "Ascend910B3"),
    }
    assert read_resource("example.com/gpu", extra) == extra["example.com/gpu"]
    assert not unknown("example.com/gpu", extra)
    assert read_resource("huawei.com/Ascend910-10c", extra).share == 0.5
    assert read_resource("huawei.com/Ascend910-10c").share == 10 / 32  # without the row: the 910A's 32


def test_the_polars_form_is_the_same_rule():
    import polars as pl

    from gpuledger.vendors import has_vendor, vendor_expr

    frame = pl.LazyFrame(
        {
            "model": ["NVIDIA H100 80GB HBM3", "AMD Instinct MI300X OAM", None, "910A-Ascend-V1", "Acme 9", "Renamed"],
            "vendor": [None, None, "amd", None, None, "huawei"],
        }
    )
    got = frame.with_columns(vendor_expr()).collect()["vendor"].to_list()
    assert got == ["nvidia", "amd", "amd", "huawei", None, "huawei"]  # the row's own vendor first
    # a frame without the column gets one, null, so the rule reads the model alone
    bare = has_vendor(frame.drop("vendor")).with_columns(vendor_expr()).collect()["vendor"].to_list()
    assert bare == ["nvidia", "amd", None, "huawei", None, None]
    assert frame.select(vendor_expr("model", None)).collect()["vendor"].to_list()[2] is None


@pytest.mark.parametrize(
    "model,label,resource",
    [
        # GFD: spaces made dashes (the recorded GCE nodes in ../shared/data/k8s: Tesla-T4, NVIDIA-A100-SXM4-40GB)
        ("NVIDIA H100 80GB HBM3", ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"), "nvidia.com/gpu"),
        ("Tesla T4", ("nvidia.com/gpu.product", "Tesla-T4"), "nvidia.com/gpu"),
        # AMD's node labeller: spaces made underscores
        ("AMD Instinct MI300X OAM", ("amd.com/gpu.product-name", "AMD_Instinct_MI300X_OAM"), "amd.com/gpu"),
        # Ascend: the chip name, the resource by chip
        ("910B3-Ascend-V1", ("node.kubernetes.io/npu.chip.name", "910B3"), "huawei.com/Ascend910"),
        ("310P3-Ascend-V1", ("node.kubernetes.io/npu.chip.name", "310P3"), "huawei.com/Ascend310P"),
        ("Ascend310P3", ("node.kubernetes.io/npu.chip.name", "310P3"), "huawei.com/Ascend310P"),
        ("Ascend 310", ("node.kubernetes.io/npu.chip.name", "310"), "huawei.com/Ascend310"),
        ("Huawei Atlas", ("node.kubernetes.io/npu.chip.name", "Huawei Atlas"), None),  # no chip: no resource
        # a model no rule knows is NVIDIA's, as every model was before AMD and Huawei
        ("GPU (virtual)", ("nvidia.com/gpu.product", "GPU-(virtual)"), "nvidia.com/gpu"),
    ],
)
def test_node_label_and_device_resource(model, label, resource):
    assert node_label(model) == label
    assert device_resource(model) == resource
