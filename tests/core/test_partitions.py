"""gpuledger.partitions: instance types, shares and the vendors' layout rules.

The MIG placements are the MIG user guide's (nvidia-smi mig -lgipp on an A100/H100: 1g at memory slices 0-6, 2g at
0/2/4, 3g at 0/4, 4g and 7g at 0, the two-slice 1g at 0/2/4/6); the Ascend limits the Ascend Virtualization
Instance guide's (310P: 8 AI cores, 7 AI CPUs; training chips 30/32 AI cores); AMD's CPX counts amdsmi's (one
partition per XCD: 8 on an MI300X, 6 on an MI300A)."""

from __future__ import annotations

import pytest

from gpuledger.partitions import (
    check_layout,
    free_instances,
    instance_share,
    instance_type,
    parse_instance,
    parse_layout,
    split_layout,
)

H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"
A100_40 = "NVIDIA A100-SXM4-40GB"
MI300X = "AMD Instinct MI300X OAM"
B3 = "910B3-Ascend-V1"
P310 = "310P3-Ascend-V1"


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ("1g.10gb", "1g.10gb"),
        ("1g.10gb+me", "1g.10gb"),  # the media-extension variant takes the same slice
        ("3g.40gb", "3g.40gb"),
        ("cpx.nps4", "cpx"),  # the memory mode is the node's: a CPX partition is a CPX partition
        ("cpx", "cpx"),
        ("DPX", "dpx"),
        ("vnpu-2c", "vnpu-2c"),  # npu-exporter's row
        ("Ascend310P-2c.1cpu", "vnpu-2c"),  # the device plugin's name less its domain
        ("Ascend910-16c", "vnpu-16c"),
        ("vir04_3c", "vnpu-4c"),  # npu-smi's template
        ("Ascend910-5c.1cpu.16g", "vnpu-5c"),  # an Atlas A2 (910B) template names its memory too
        ("vir05_1c_16g", "vnpu-5c"),
        ("gpu", None),
        ("", None),
        (None, None),
    ],
)
def test_instance_type(profile, expected):
    assert instance_type(profile) == expected


def test_instance_share():
    assert instance_share("1g.10gb") == pytest.approx(1 / 7)
    assert instance_share("3g.40gb") == pytest.approx(3 / 7)
    assert instance_share("cpx", MI300X) == 1 / 8
    assert instance_share("cpx", "AMD Instinct MI300A") == 1 / 6
    assert instance_share("qpx", MI300X) == 1 / 4
    assert instance_share("vnpu-5c", B3) == 5 / 20  # a 910B3 has 20 AI cores
    assert instance_share("vnpu-2c", P310) == 2 / 8
    assert instance_share("vnpu-2c", None) is None  # which chip decides: no share claimed
    assert instance_share("gpu") is None


def test_mig_layouts_by_name():
    assert parse_layout("all-1g.10gb", H100) == ("1g.10gb",) * 7
    assert parse_layout("all-2g.20gb", H100) == ("2g.20gb",) * 3  # starts 0, 2, 4
    assert parse_layout("all-3g.40gb", H100) == ("3g.40gb",) * 2  # starts 0, 4
    assert parse_layout("all-1g.20gb", H100) == ("1g.20gb",) * 4  # two memory slices each, starts 0, 2, 4, 6
    assert parse_layout("all-1g.10gb", A100_40) == ("1g.10gb",) * 4  # on a 40 GB A100 a 1g.10gb is two slices
    assert parse_layout("all-balanced", H100) == ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb")
    assert parse_layout("all-balanced", H200) == ("1g.18gb", "1g.18gb", "2g.35gb", "3g.71gb")


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        ("4g.40gb,3g.40gb", ("4g.40gb", "3g.40gb")),  # 4g at 0-3, 3g at 4-7
        ("3g.40gb,2g.20gb,1g.10gb*2", ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")),  # 3g at 4, 2g at 0, 1g at 2, 3
        ("2g.20gb*3,1g.10gb", ("2g.20gb",) * 3 + ("1g.10gb",)),  # 2g at 0, 2, 4; 1g at 6
        ("4g.40gb,2g.20gb,1g.10gb", ("4g.40gb", "2g.20gb", "1g.10gb")),  # 4g at 0, 2g at 4, 1g at 6
        ("7g.80gb", ("7g.80gb",)),
    ],
)
def test_mig_layouts_with_a_placement(layout, expected):
    assert parse_layout(layout, H100) == expected


@pytest.mark.parametrize(
    ("layout", "why"),
    [
        ("3g.40gb*2,1g.10gb", "no placement"),  # 7 compute slices, but the two 3g fill all 8 memory slices
        ("4g.40gb*2", "no placement"),  # a 4g only at slice 0
        ("1g.10gb*8", "no placement"),  # 8 compute slices
        ("1g.20gb*4,1g.10gb", "no placement"),  # 5 compute slices, but four two-slice 1g fill the 8 memory slices
    ],
)
def test_mig_layouts_without_one(layout, why):
    with pytest.raises(ValueError, match=why):
        parse_layout(layout, H100)


def test_amd_layouts():
    assert parse_layout("cpx", MI300X) == ("cpx",) * 8
    assert parse_layout("cpx.nps4", "AMD Instinct MI300A") == ("cpx",) * 6
    assert parse_layout("dpx", MI300X) == ("dpx",) * 2
    with pytest.raises(ValueError, match="one compute partition mode"):
        parse_layout("cpx*4,qpx*2", MI300X)
    with pytest.raises(ValueError, match="QPX makes 4 partitions"):
        parse_layout("qpx*5", MI300X)


def test_ascend_layouts():
    assert parse_layout("vnpu-5c*4", B3) == ("vnpu-5c",) * 4
    assert parse_layout("vir16,vir08,vir04,vir02", "Ascend910A") == ("vnpu-16c", "vnpu-8c", "vnpu-4c", "vnpu-2c")
    with pytest.raises(ValueError, match="21 AI cores, the chip has 20"):
        parse_layout("vnpu-16c,vnpu-5c", B3)
    # 310P: six vir01 take 6 AI cores and 6 AI CPUs; a seventh instance fits only as vir02_1c (1 AI CPU), and
    # two more vir01 would take 8 AI CPUs of 7 (the guide's own example)
    assert parse_layout("vir01*6,vir02_1c", P310) == ("vnpu-1c",) * 6 + ("vnpu-2c",)
    with pytest.raises(ValueError, match="8 AI CPUs, a 310P has 7"):
        parse_layout("vir01*8", P310)
    with pytest.raises(ValueError, match="9 AI cores, the chip has 8"):
        parse_layout("vir04*2,vir01", P310)


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ("", "empty layout"),
        ("1g.10gb*x", "whole number"),
        ("1g.10gb*0", "whole number"),
        ("bogus", "no partition profile"),
        ("all-cpx", "all-<profile> takes a MIG profile"),
        ("1g.10gb,cpx", "one vendor's rule"),
    ],
)
def test_bad_layouts(layout, message):
    with pytest.raises(ValueError, match=message):
        parse_layout(layout, H100)


def test_check_layout_of_device_rows():
    # the profiles the collectors write on child rows read back as the layout's canonical types
    assert check_layout(["cpx.nps4"] * 8, MI300X) == ("cpx",) * 8
    assert check_layout(["vnpu-2c", "vnpu-4c"], P310) == ("vnpu-2c", "vnpu-4c")
    assert parse_instance("vir02_1c").aicpu == 1


def test_free_instances_and_split():
    layout = ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb")
    assert free_instances(layout, ["1g.10gb", "3g.40gb"]) == ["1g.10gb", "2g.20gb"]
    assert free_instances(layout, ["1g.10gb"] * 3) == ["2g.20gb", "3g.40gb"]  # more held than the layout has
    assert split_layout("") == []
    assert split_layout(None) == []
    assert split_layout("cpx,cpx") == ["cpx", "cpx"]
