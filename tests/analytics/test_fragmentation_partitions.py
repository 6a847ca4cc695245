"""Fragmentation and the placement replay on partitioned devices (MIG, AMD CPX, Ascend vNPU), by the rules of
gpuledger/partitions.py: an ask of instance type T fits where free instances of T are (whole instances, not
thousandths), a partitioned device offers no whole GPU and no share, and a whole device offers no instance.

Frames: node state `gpu_partitions` (per GPU: null whole, else its free instances joined by ","), the replay's
cluster `gpu_layout` (per GPU: null whole, else its layout) and `profile` on pods and task types. Values are computed
by hand in the comments; a literal reference of the rule checks the vectorised metric, and every replay's running
figure is checked against the metric recomputed from scratch on its final state.
"""

from __future__ import annotations

import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from gpuledger.analytics.fragmentation import (
    node_fragmentation,
    replay,
    stranded_whole_gpus,
    typical_task_types,
)

H100 = "NVIDIA H100 80GB HBM3"
MI300X = "AMD Instinct MI300X OAM"
ASCEND = "910B3-Ascend-V1"  # 20 AI cores (partitions.ASCEND_CORES)
ALL_1G = ",".join(["1g.10gb"] * 7)
CPX = ",".join(["cpx"] * 8)


def state(*nodes) -> pl.DataFrame:
    """Node state rows: (node, model, cpu_free_milli, [free milli per GPU], [free instances per GPU or None])."""
    return pl.DataFrame(
        nodes,
        schema={
            "node": pl.String,
            "model": pl.String,
            "cpu_free_milli": pl.Int64,
            "gpu_free_milli": pl.List(pl.Int64),
            "gpu_partitions": pl.List(pl.String),
        },
        orient="row",
    )


def types(*rows) -> pl.DataFrame:
    """Task types: (cpu_milli, gpu_milli, num_gpu, gpu_spec, profile, count)."""
    return pl.DataFrame(
        rows,
        schema={
            "cpu_milli": pl.Int64,
            "gpu_milli": pl.Int64,
            "num_gpu": pl.Int64,
            "gpu_spec": pl.String,
            "profile": pl.String,
            "count": pl.Int64,
        },
        orient="row",
    )


def frag_of(nodes: pl.DataFrame, task_types: pl.DataFrame) -> list[float]:
    return node_fragmentation(nodes, task_types)["frag_milli"].to_list()


def cluster(*rows) -> pl.DataFrame:
    """Capacities: (node, model, cpu_milli, gpus, [layout per GPU or None] or None)."""
    return pl.DataFrame(
        rows,
        schema={
            "node": pl.String,
            "model": pl.String,
            "cpu_milli": pl.Int64,
            "gpus": pl.Int64,
            "gpu_layout": pl.List(pl.String),
        },
        orient="row",
    )


def pod_list(*rows) -> pl.DataFrame:
    """Pods: (cpu_milli, num_gpu, gpu_milli, profile)."""
    return pl.DataFrame(
        rows,
        schema={"cpu_milli": pl.Int64, "num_gpu": pl.Int64, "gpu_milli": pl.Int64, "profile": pl.String},
        orient="row",
    )


def check_running_figure(result, task_types: pl.DataFrame) -> None:
    """The replay's incremental frag after the last pod is the metric on its final state, from scratch."""
    scratch = node_fragmentation(result.nodes, task_types)["frag_milli"].sum()
    assert result.log["frag_milli"][-1] == pytest.approx(scratch)


ONE_G = (1000, 143, 1, "", "1g.10gb", 1)  # a 1g.10gb instance: 1/7 of an H100, 143 milli
THREE_G = (1000, 429, 1, "", "3g.40gb", 1)  # 3/7: 429 milli
WHOLE = (1000, 1000, 1, "", None, 1)


# --- rule 1: whole instances, not thousandths ----------------------------------------------------------------


@pytest.mark.parametrize("policy", ["fgd", "bestfit"])
def test_seven_1g_pods_fill_an_all_1g_h100_where_thousandths_fit_six(policy):
    m = types(ONE_G)
    seven = pod_list(*[(1000, 1, 143, "1g.10gb")] * 7)
    got = replay(cluster(("h", H100, 64_000, 1, [ALL_1G])), seven, m, policy)
    assert got.log["node"].to_list() == ["h"] * 7
    assert got.log["gpu_index"].to_list() == [[0]] * 7
    # Free milli is 1000 - round(1000 x k/7) with k instances held: 857, 714, 571 (428.57 -> 429 held), 429,
    # 286, 143 (857.14 -> 857 held), 0. The log's allocation is what the GPU lost, so 7 x 1g is 1000, not 1001.
    assert got.log["allocated_gpu_milli"].to_list() == [143, 286, 429, 571, 714, 857, 1000]
    assert got.log["unallocated_gpu_milli"].to_list() == [857, 714, 571, 429, 286, 143, 0]
    assert got.nodes["gpu_free_milli"].to_list() == [[0]]
    assert got.nodes["gpu_partitions"].to_list() == [[""]]  # partitioned, nothing free
    # M is the 1g type: while an instance is free it fits and the GPU offers it one, so nothing is a leftover;
    # at the end nothing is unallocated. F = 0 throughout.
    assert got.log["frag_milli"].to_list() == [0.0] * 7
    check_running_figure(got, m)

    # The old rule: the same asks as 143-milli shares of a whole GPU. Six take 858; 142 is left, < 143, so the
    # seventh finds no node and the 142 is fragmentation for the 143-milli type.
    old_m = types((1000, 143, 1, "", None, 1))
    old = replay(cluster(("h", H100, 64_000, 1, None)), seven.with_columns(profile=None), old_m, policy)
    assert old.log["node"].to_list() == ["h"] * 6 + [None]
    assert old.nodes["gpu_free_milli"].to_list() == [[142]]
    assert old.log["frag_milli"][-1] == 142.0


def test_all_balanced_h100_with_the_3g_held():
    # An H100 in all-balanced (1g, 1g, 2g, 3g) with the 3g held: 4/7 free = 1000 - round(428.57) = 571.
    nodes = state(("n", H100, 32_000, [571], ["1g.10gb,1g.10gb,2g.20gb"]))
    # A 3g task: no free 3g anywhere, it cannot run: the whole 571 is fragmentation.
    assert frag_of(nodes, types(THREE_G)) == [571.0]
    # A 1g task: two free 1g; the GPU offers it instances, so nothing is a leftover.
    assert frag_of(nodes, types(ONE_G)) == [0.0]
    # Two 1g instances fit (2 free); three do not (2 < 3): all 571.
    assert frag_of(nodes, types((1000, 143, 2, "", "1g.10gb", 1))) == [0.0]
    assert frag_of(nodes, types((1000, 143, 3, "", "1g.10gb", 1))) == [571.0]
    # Both types, by popularity 1 and 3: (1 x 571 + 3 x 0) / 4 = 142.75.
    assert frag_of(nodes, types(THREE_G, (1000, 143, 1, "", "1g.10gb", 3))) == [142.75]


def test_ascend_910b3_in_four_5c_vnpus_with_three_held():
    # 910B3: 20 AI cores; vnpu-5c*4 is 4 x 5 cores. Three held: 1000 - 3 x 250 = 250 free, one vnpu-5c.
    nodes = state(("npu", ASCEND, 16_000, [250], ["vnpu-5c"]))
    five = (1000, 250, 1, "", "vnpu-5c", 1)
    ten = (1000, 500, 1, "", "vnpu-10c", 1)
    assert frag_of(nodes, types(five)) == [0.0]  # the free vnpu-5c fits it
    assert frag_of(nodes, types(ten)) == [250.0]  # no free 10c: the 250 is of no use to it
    assert frag_of(nodes, types((1000, 250, 1, "", None, 1))) == [250.0]  # a 250-milli share: no share of a vNPU chip
    # The same chip replayed: three vnpu-5c pods (npu-smi's template name vir05 and the plugin's Ascend910-5c read
    # as vnpu-5c) leave one; the fourth takes it and the chip shows 0 free.
    pods = pod_list((1000, 1, 250, "vir05"), (1000, 1, 250, "Ascend910-5c"), (1000, 1, 250, "vnpu-5c"))
    got = replay(cluster(("npu", ASCEND, 16_000, 1, ["vnpu-5c*4"])), pods, types(five), "bestfit")
    assert got.nodes["gpu_free_milli"].to_list() == [[250]]
    assert got.nodes["gpu_partitions"].to_list() == [["vnpu-5c"]]
    more = replay(cluster(("npu", ASCEND, 16_000, 1, ["vnpu-5c*4"])), pl.concat([pods, pods[:2]]), types(five), "fgd")
    assert more.log["node"].to_list() == ["npu"] * 4 + [None]
    assert more.nodes["gpu_free_milli"].to_list() == [[0]]


# --- rule 2: the mode of a device, both ways ---------------------------------------------------------------


def test_cpx_mi300x_offers_no_whole_gpu_with_every_partition_free():
    nodes = state(("amd", MI300X, 64_000, [1000], [CPX]))
    # A whole-GPU task: the MI300X in CPX lists 8 partitions and no GPU: 1000 free milli it cannot use.
    assert frag_of(nodes, types(WHOLE)) == [1000.0]
    # A share of it neither (500 milli).
    assert frag_of(nodes, types((1000, 500, 1, "", None, 1))) == [1000.0]
    # A cpx task (1/8: 125 milli) finds 8 free partitions; even 8 at once fit: no fragmentation.
    assert frag_of(nodes, types((1000, 125, 1, "", "cpx", 1))) == [0.0]
    assert frag_of(nodes, types((1000, 125, 8, "", "cpx.nps4", 1))) == [0.0]  # the memory mode is the node's
    # Nor is it a whole free GPU for the N-GPU view.
    got = stranded_whole_gpus(nodes)
    assert got["free_whole_gpus"].to_list() == [0] * 8


def test_a_whole_gpu_offers_no_instance():
    nodes = state(("n", H100, 32_000, [1000], [None]))
    # A 1g task on a whole, free H100: the device plugin lists nvidia.com/gpu, no mig-1g.10gb: all 1000.
    assert frag_of(nodes, types(ONE_G)) == [1000.0]
    assert frag_of(nodes.drop("gpu_partitions"), types(ONE_G)) == [1000.0]  # no column: every GPU is whole


@pytest.mark.parametrize("policy", ["fgd", "bestfit"])
def test_replay_keeps_shares_off_partitioned_gpus_and_instances_off_whole_ones(policy):
    m = types(ONE_G, WHOLE)
    only_partitioned = cluster(("p", H100, 64_000, 1, [ALL_1G]))
    only_whole = cluster(("w", H100, 64_000, 1, None))
    share, whole, instance = (1000, 1, 500, None), (1000, 1, 1000, None), (1000, 1, 143, "1g.10gb")
    # All 1000 milli of the partitioned GPU are free, yet a share or a whole-GPU pod finds no node.
    assert replay(only_partitioned, pod_list(share, whole), m, policy).log["node"].to_list() == [None, None]
    # A 1g pod finds no whole GPU to cut.
    assert replay(only_whole, pod_list(instance), m, policy).log["node"].to_list() == [None]


def test_a_node_mixing_a_whole_gpu_and_a_partitioned_one():
    # GPU 0 whole and free; GPU 1 all-balanced with its 3g held: 571 free, two 1g and a 2g.
    nodes = state(("mix", H100, 32_000, [1000, 571], [None, "1g.10gb,1g.10gb,2g.20gb"]))
    # Whole-GPU task: GPU 0 has room, GPU 1 offers none: its 571 is the leftover.
    assert frag_of(nodes, types(WHOLE)) == [571.0]
    # 1g task: GPU 1 offers two instances, GPU 0 none: its 1000 is the leftover.
    assert frag_of(nodes, types(ONE_G)) == [1000.0]
    # Two whole GPUs: one whole GPU < 2, the task cannot run: 1000 + 571.
    assert frag_of(nodes, types((1000, 1000, 2, "", None, 1))) == [1571.0]
    # Both one-GPU types, equally popular: (571 + 1000) / 2.
    assert frag_of(nodes, types(WHOLE, ONE_G)) == [785.5]
    # The whole-GPU view counts GPU 0 only; a partitioned GPU with every instance free is no whole GPU either.
    view = stranded_whole_gpus(
        state(("mix", H100, 0, [1000, 571], [None, "1g.10gb,1g.10gb,2g.20gb"]), ("all", H100, 0, [1000], [ALL_1G]))
    )
    fleet = view.filter(pl.col("model").is_null())
    assert fleet["free_whole_gpus"].to_list() == [1, 1, 1, 1]
    assert fleet["stranded_whole_gpus"].to_list() == [0, 1, 1, 1]


# --- replay: placements on a small mixed cluster, by hand --------------------------------------------------


MIXED = cluster(
    # a: GPU 0 a 3g and a 1g (4 of 7 slices), GPU 1 seven 1g. b: one whole H100.
    ("a", H100, 64_000, 2, ["3g.40gb,1g.10gb", ALL_1G]),
    ("b", H100, 64_000, 1, None),
)
MIXED_M = types(ONE_G, THREE_G)  # M: a 1g and a 3g ask, equally popular (weight 2)
MIXED_PODS = pod_list(
    (1000, 1, 143, "1g.10gb"),  # only a can take it
    (1000, 1, 500, None),  # a share: only b (a is partitioned)
    (1000, 1, 429, "3g.40gb"),  # only a's GPU 0 has a 3g
    (1000, 1, 1000, None),  # a whole GPU: b is half used, a is partitioned: nowhere
)


def test_replay_fgd_on_a_mixed_cluster():
    got = replay(MIXED, MIXED_PODS, MIXED_M, "fgd")
    # Before: a: 1g fits (8 instances), no leftover; 3g fits (GPU 0), GPU 1's 1000 is its leftover: 0 + 1000.
    #         b: whole, no instance for either type: 1000 + 1000. F = 3000 / 2 = 1500.
    # Pod 0 (1g), FGD tries each GPU of a with a free 1g:
    #   GPU 0: 857 free (1000 - 143), no 1g left -> 1g's leftover 857; 3g's 1000: after 1857, x = (1000 - 1857)
    #          / 2000 = -0.4285 -> int(100 x sigmoid) = 39
    #   GPU 1: 857 free, six 1g -> 1g 0; 3g's leftover 857: after 857, x = 143 / 2000 -> 51. GPU 1 wins.
    assert int(100 / (1 + math.exp(0.4285))) == 39 and int(100 / (1 + math.exp(-143 / 2000))) == 51
    # F = (857 + 2000) / 2 = 1428.5. Pod 1 (500 share) to b: b's 500 is both types' leftover: (857 + 1000) / 2.
    # Pod 2 (3g) on GPU 0: held 3/7 -> 1000 - 429 = 571, a 1g left; GPU 1 857, six 1g. 1g: 0; 3g: none left,
    # all 571 + 857 = 1428 of a: (1428 + 1000) / 2 = 1214. Pod 3 finds no node: 1214 again.
    assert got.log["node"].to_list() == ["a", "b", "a", None]
    assert got.log["gpu_index"].to_list() == [[1], [0], [0], None]
    assert got.log["frag_milli"].to_list() == [1428.5, 928.5, 1214.0, 1214.0]
    assert got.log["allocated_gpu_milli"].to_list() == [143, 643, 1072, 1072]  # 143 + 500 + 429
    expected = pl.DataFrame(
        {
            "node": ["a", "b"],
            "model": [H100, H100],
            "cpu_free_milli": [62_000, 63_000],
            "gpu_free_milli": [[571, 857], [500]],
            "gpu_partitions": [["1g.10gb", ",".join(["1g.10gb"] * 6)], [None]],
        }
    )
    assert_frame_equal(got.nodes, expected)
    check_running_figure(got, MIXED_M)


def test_replay_bestfit_on_a_mixed_cluster():
    got = replay(MIXED, MIXED_PODS, MIXED_M, "bestfit")
    # Pod 0 (1g): the tightest GPU with a free 1g is GPU 0 (2 free instances against 7). a: GPU 0 857 (a 3g
    # left), GPU 1 1000 (seven 1g): 1g's leftover 857, 3g's 1000; b 2000: F = (1857 + 2000) / 2 = 1928.5.
    # Pod 1 to b: (1857 + 1000) / 2 = 1428.5. Pod 2 (3g) on GPU 0: held 4/7 -> 1000 - 571 = 429, nothing free:
    # 1g's leftover 429; 3g cannot run: 429 + 1000. a: 1858, b: 1000 -> 1429.
    assert got.log["node"].to_list() == ["a", "b", "a", None]
    assert got.log["gpu_index"].to_list() == [[0], [0], [0], None]
    assert got.log["frag_milli"].to_list() == [1928.5, 1428.5, 1429.0, 1429.0]
    assert got.nodes["gpu_free_milli"].to_list() == [[429, 1000], [500]]
    assert got.nodes["gpu_partitions"].to_list() == [["", ALL_1G], [None]]
    check_running_figure(got, MIXED_M)


@pytest.mark.parametrize("policy", ["fgd", "bestfit"])
def test_a_pod_of_several_instances_spreads_over_one_nodes_gpus(policy):
    # Two all-balanced H100s; a pod of two 3g takes the one 3g of each GPU; a second finds none.
    two = cluster(("n", H100, 64_000, 2, ["all-balanced", "all-balanced"]))
    pods = pod_list((1000, 2, 429, "3g.40gb"), (1000, 2, 429, "3g.40gb"))
    got = replay(two, pods, types(THREE_G), policy)
    assert got.log["node"].to_list() == ["n", None]
    assert got.log["gpu_index"].to_list() == [[0, 1], None]
    assert got.nodes["gpu_partitions"].to_list() == [["1g.10gb,1g.10gb,2g.20gb"] * 2]
    assert got.nodes["gpu_free_milli"].to_list() == [[571, 571]]
    # Two 1g on one GPU: BestFit fills the tighter GPU; both of them on GPU 0 (4 free before, 3 after: tightest).
    ones = replay(two, pod_list((1000, 2, 143, "1g.10gb")), types(ONE_G), "bestfit")
    assert ones.log["gpu_index"].to_list() == [[0, 0]]
    assert ones.nodes["gpu_partitions"].to_list() == [["2g.20gb,3g.40gb", "1g.10gb,1g.10gb,2g.20gb,3g.40gb"]]


# --- task types ---------------------------------------------------------------------------------------------


def test_typical_task_types_key_by_profile():
    pods = pl.DataFrame(
        {
            "cpu_milli": [1000] * 6,
            "gpu_milli": [143, 143, 143, 143, 0, 143],
            "num_gpu": [1, 1, 1, 1, 0, 1],
            # 1g.10gb+me is the 1g.10gb slot; the CPU-only pod's profile is dropped as its gpu_spec is; the last
            # is a 143-milli share of a whole GPU.
            "profile": ["1g.10gb", "1g.10gb+me", "1g.10gb", "1g.20gb", "2g.20gb", None],
        }
    )
    got = typical_task_types(pods, coverage=1.0)
    # 1g.10gb x3 first; then three types of one pod each, the larger key first: gpu_milli 143 > 0, and among
    # the two 143s the profile "1g.20gb" > "".
    assert got.select("gpu_milli", "num_gpu", "profile", "count").rows() == [
        (143, 1, "1g.10gb", 3),
        (143, 1, "1g.20gb", 1),
        (143, 1, "", 1),
        (0, 0, "", 1),
    ]
    assert got["p"].to_list() == [0.5, 1 / 6, 1 / 6, 1 / 6]
    # Without the column: the pre-partition output, no profile column.
    assert "profile" not in typical_task_types(pods.drop("profile")).columns


# --- bad input: one line naming what is wrong --------------------------------------------------------------


def one_line(excinfo) -> str:
    text = str(excinfo.value)
    assert "\n" not in text
    return text


def test_bad_partitions_are_named():
    m = types(ONE_G)
    with pytest.raises(ValueError, match=r"node 'x': gpu_partitions has 1 entries, gpu_free_milli 2") as e:
        node_fragmentation(state(("x", H100, 0, [1000, 1000], ["1g.10gb"])), m)
    one_line(e)
    with pytest.raises(ValueError, match=r"node 'y': gpu_partitions names '5g.bogus', no partition profile") as e:
        node_fragmentation(state(("ok", H100, 0, [1000], [None]), ("y", H100, 0, [143], ["1g.10gb,5g.bogus"])), m)
    one_line(e)
    with pytest.raises(ValueError, match=r"node 'z': gpu_partitions has 2 entries") as e:
        stranded_whole_gpus(state(("z", H100, 0, [1000], [None, None])))
    with pytest.raises(ValueError, match=r"task_types: profile 'tpu-v5' is no partition profile") as e:
        node_fragmentation(state(("x", H100, 0, [1000], [None])), types((0, 100, 1, "", "tpu-v5", 1)))
    one_line(e)
    with pytest.raises(ValueError, match=r"pods: profile 'half' is no partition profile") as e:
        typical_task_types(pod_list((1000, 1, 500, "half")))
    one_line(e)


def test_bad_layouts_are_named():
    m = types(ONE_G)
    pods = pod_list((1000, 1, 143, "1g.10gb"))
    with pytest.raises(ValueError, match=r"node 'a': gpu_layout has 1 entries for 2 GPUs") as e:
        replay(cluster(("a", H100, 1000, 2, [ALL_1G])), pods, m)
    one_line(e)
    # Two 3g and a 1g are 7 slices, but a 3g sits at memory slice 0 or 4 and the 1g has no slice left.
    with pytest.raises(ValueError, match=r"node 'b': gpu_layout '3g.40gb,3g.40gb,1g.10gb': MIG layout .* no placement"):
        replay(cluster(("ok", H100, 1000, 1, [ALL_1G]), ("b", H100, 1000, 1, ["3g.40gb,3g.40gb,1g.10gb"])), pods, m)
    with pytest.raises(ValueError, match=r"node 'c': .*CPX makes 8 partitions") as e:
        replay(cluster(("c", MI300X, 1000, 1, [CPX + ",cpx"])), pods, m)
    one_line(e)
    with pytest.raises(ValueError, match=r"node 'd': gpu_layout 'a100': 'a100' is no partition profile"):
        replay(cluster(("d", H100, 1000, 1, ["a100"])), pods, m)
    with pytest.raises(ValueError, match=r"pods: profile 'mig-7g' is no partition profile"):
        replay(cluster(("e", H100, 1000, 1, [ALL_1G])), pod_list((1000, 1, 1000, "mig-7g")), m)


# --- the vectorised metric against the rule written out --------------------------------------------------------


def reference_frag(gpus: list[tuple[int, list[str] | None]], cpu: int, rows: list[tuple]) -> int:
    """sum_m count_m * F_n(m) with partitions, literally: a GPU offers a type without profile room when it is whole
    and r >= d, a type with profile p its free instances of p; leftovers are the milli of GPUs that offer none."""
    total = sum(r for r, _ in gpus)
    out = 0
    for cpu_m, milli, k, _, profile, count in rows:
        offers = [
            (parts.count(profile) if parts is not None else 0) if profile else int(parts is None and r >= milli)
            for r, parts in gpus
        ]
        runs = milli * k > 0 and cpu >= cpu_m and sum(offers) >= k
        out += count * (sum(r for (r, _), o in zip(gpus, offers, strict=True) if not o) if runs else total)
    return out


KINDS = ["1g.10gb", "2g.20gb", "3g.40gb"]
gpu = st.one_of(
    st.tuples(st.sampled_from([0, 100, 300, 500, 1000]), st.none()),
    st.tuples(st.sampled_from([0, 143, 429, 571, 1000]), st.lists(st.sampled_from(KINDS), max_size=4)),
)
type_rows = st.lists(
    st.one_of(
        st.tuples(st.sampled_from([0, 2000]), st.sampled_from([0, 250, 500, 1000]), st.integers(0, 3)).map(
            lambda t: (t[0], t[1], t[2], "", None)
        ),
        st.tuples(st.sampled_from([0, 2000]), st.sampled_from(KINDS), st.integers(1, 3)).map(
            lambda t: (t[0], 143 * int(t[1][0]), t[2], "", t[1])
        ),
    ).flatmap(lambda t: st.integers(1, 9).map(lambda c: (*t, c))),
    min_size=1,
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(
    nodes=st.lists(st.tuples(st.sampled_from([0, 4000]), st.lists(gpu, max_size=4)), min_size=1, max_size=6),
    rows=type_rows,
)
def test_vectorised_metric_matches_the_rule_written_out(nodes, rows):
    frame = state(
        *[
            (f"n{i}", H100, c, [r for r, _ in g], [None if p is None else ",".join(p) for _, p in g])
            # A node of whole GPUs may say so per GPU or with a null list.
            if i % 2 or any(p is not None for _, p in g)
            else (f"n{i}", H100, c, [r for r, _ in g], None)
            for i, (c, g) in enumerate(nodes)
        ]
    )
    total = sum(r[5] for r in rows)
    got = frag_of(frame, types(*rows))
    assert got == pytest.approx([reference_frag(g, c, rows) / total for c, g in nodes])
    if all(p is None for _, g in nodes for _, p in g) and all(r[4] is None for r in rows):
        # No partition anywhere: gpu_partitions of nulls reads as the column's absence.
        assert frag_of(frame.drop("gpu_partitions"), types(*rows).drop("profile")) == got


# --- the replay's running figure against the metric from scratch -----------------------------------------------


LAYOUTS = [None, "all-1g.10gb", "all-balanced", "3g.40gb,3g.40gb", "4g.40gb,2g.20gb,1g.10gb"]
pod_rows = st.one_of(
    st.tuples(st.just(1), st.sampled_from([250, 500, 1000]), st.none()),
    st.tuples(st.integers(2, 3), st.just(1000), st.none()),
    st.tuples(st.integers(1, 3), st.sampled_from(KINDS), st.none()).map(lambda t: (t[0], 143 * int(t[1][0]), t[1])),
)


@settings(max_examples=60, deadline=None)
@given(
    layouts=st.lists(st.lists(st.sampled_from(LAYOUTS), min_size=1, max_size=3), min_size=1, max_size=4),
    pods=st.lists(pod_rows, min_size=1, max_size=30),
    rows=type_rows,
    policy=st.sampled_from(["fgd", "bestfit"]),
    seed=st.integers(0, 3),
)
def test_replay_running_figure_is_the_metric_from_scratch(layouts, pods, rows, policy, seed):
    nodes = cluster(*[(f"n{i}", H100, 8000, len(g), g) for i, g in enumerate(layouts)])
    m = types(*rows)
    got = replay(nodes, pod_list(*[(1000, k, d, p) for k, d, p in pods]), m, policy, seed)
    check_running_figure(got, m)
    # The mode rule held: instances only ever on partitioned GPUs, shares and whole GPUs only on whole ones.
    for (k, _, profile), node, where in zip(pods, got.log["node"], got.log["gpu_index"], strict=True):
        if node is None:
            continue
        layout = layouts[int(node[1:])]
        assert len(where) == k
        assert all((layout[g] is not None) == (profile is not None) for g in where)
    # What the log says is allocated is what the GPUs lost.
    capacity = 1000 * sum(len(g) for g in layouts)
    free = sum(sum(r) for r in got.nodes["gpu_free_milli"])
    assert got.log["allocated_gpu_milli"][-1] == capacity - free
