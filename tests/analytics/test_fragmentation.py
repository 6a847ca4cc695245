"""GPU fragmentation (FGD metric, whole-GPU view, placement replay): hand-computed cases, a literal reference
implementation to check the vectorised and cached code against, and the published openb results.

The definition is ../shared/FRAGMENTATION.md. The real-data tests read ../shared/data/traces (research-use
files, never copied into the repo) and skip when the folder is absent.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from gpuledger.analytics.fragmentation import (
    arrival_bins,
    cluster_fragmentation,
    inflate_workload,
    node_fragmentation,
    replay,
    stranded_whole_gpus,
    typical_task_types,
)

TRACES = Path(__file__).resolve().parents[3] / "shared" / "data" / "traces"
OPENB = TRACES / "alibaba-gpu-v2023"
PUBLISHED = TRACES / "alibaba-gpu-v2023-fgd-sim-results"


def state(*nodes) -> pl.DataFrame:
    """Node state rows: (node, model, cpu_free_milli, [per-GPU free milli])."""
    return pl.DataFrame(
        nodes,
        schema={
            "node": pl.String,
            "model": pl.String,
            "cpu_free_milli": pl.Int64,
            "gpu_free_milli": pl.List(pl.Int64),
        },
        orient="row",
    )


def types(*rows) -> pl.DataFrame:
    """Task types: (cpu_milli, gpu_milli, num_gpu, gpu_spec, count)."""
    return pl.DataFrame(
        rows,
        schema={
            "cpu_milli": pl.Int64,
            "gpu_milli": pl.Int64,
            "num_gpu": pl.Int64,
            "gpu_spec": pl.String,
            "count": pl.Int64,
        },
        orient="row",
    )


def frag_of(nodes: pl.DataFrame, task_types: pl.DataFrame) -> list[float]:
    return node_fragmentation(nodes, task_types)["frag_milli"].to_list()


# --- typical task types --------------------------------------------------------------------------------------


def test_typical_task_types_sort_ties_by_key_and_stop_at_coverage():
    pods = pl.DataFrame(
        {
            # A x3, B x2, C x2 (one of them a CPU-only pod whose gpu_spec the artifact ignores), D x1, E x1.
            "cpu_milli": [4000, 4000, 4000, 8000, 8000, 2000, 2000, 1000, 1000],
            "gpu_milli": [500, 500, 500, 1000, 1000, 0, 0, 1000, 1000],
            "num_gpu": [1, 1, 1, 2, 2, 0, 0, 1, 1],
            "gpu_spec": [None, None, None, None, None, None, "T4", "T4", None],
        }
    )
    got = typical_task_types(pods, coverage=0.8)
    # 0.8 x 9 pods = 7.2: A (0 before), B (3 before), C (5), D (7 < 7.2) are kept; E (8 before) is not.
    # B and C tie at 2: the larger key (cpu 8000) first. D and E tie at 1: gpu_spec "T4" > "" puts D first.
    expected = pl.DataFrame(
        {
            "cpu_milli": [4000, 8000, 2000, 1000],
            "gpu_milli": [500, 1000, 0, 1000],
            "num_gpu": [1, 2, 0, 1],
            "gpu_spec": ["", "", "", "T4"],
            "count": [3, 2, 2, 1],
            "p": [3 / 8, 2 / 8, 2 / 8, 1 / 8],
        }
    )
    assert_frame_equal(got, expected)
    # At 95% (8.55 pods) E is kept too (8 before < 8.55): every type.
    assert typical_task_types(pods)["count"].to_list() == [3, 2, 2, 1, 1]


def test_typical_task_types_of_no_pods_is_empty():
    empty = pl.DataFrame(schema={"cpu_milli": pl.Int64, "gpu_milli": pl.Int64, "num_gpu": pl.Int64})
    assert typical_task_types(empty).height == 0


def test_typical_task_types_names_missing_columns():
    with pytest.raises(ValueError, match="lacks column.*num_gpu"):
        typical_task_types(pl.DataFrame({"cpu_milli": [1], "gpu_milli": [0]}))


# --- FGD metric: one rule per case -------------------------------------------------------------------------


def test_cpu_only_type_counts_every_unallocated_milli_even_with_cpu_to_spare():
    nodes = state(("n", "T4", 10_000, [1000, 300]))
    assert frag_of(nodes, types((1000, 0, 0, "", 1))) == [1000 + 300]


def test_model_mismatch_makes_all_free_gpu_a_fragment():
    nodes = state(("n", "T4", 10_000, [1000, 300]))
    assert frag_of(nodes, types((1000, 500, 1, "V100", 1))) == [1300]  # cannot run on T4: 1000 + 300
    assert frag_of(nodes, types((1000, 500, 1, "T4|V100", 1))) == [300]  # runs: only the 300 < 500 is left over


def test_model_check_comes_first_but_any_failed_check_counts_everything():
    # A T4-only type on a V100 node with too little CPU and GPU: cannot run for every reason, so 1300 either way.
    nodes = state(("n", "V100", 500, [1000, 300]))
    assert frag_of(nodes, types((1000, 500, 1, "T4", 1))) == [1300]


def test_too_few_gpus_for_a_multi_gpu_type():
    nodes = state(("a", "T4", 10_000, [1000, 300]), ("b", "T4", 10_000, [1000, 1000, 300]))
    # a: one whole free GPU < 2, all 1300 is fragment; b: fits, leftovers under 1000 are the 300.
    assert frag_of(nodes, types((1000, 1000, 2, "", 1))) == [1300, 300]


def test_multi_gpu_type_on_an_eight_gpu_node():
    nodes = state(
        ("fits", "G2", 96_000, [1000] * 5 + [500, 0, 200]),
        ("short", "G2", 96_000, [1000] * 3 + [500] * 5),
    )
    # fits: 5 whole GPUs >= 4, fragment = 500 + 0 + 200 = 700; short: 3 < 4, fragment = 3 x 1000 + 5 x 500 = 5500.
    assert frag_of(nodes, types((1000, 1000, 4, "", 1))) == [700, 5500]


def test_sharing_type_leaves_only_the_too_small_leftovers():
    nodes = state(("n", "T4", 10_000, [1000, 350, 600, 0]))
    # 1000 and 600 can take 400; 350 and 0 cannot: 350 + 0 = 350.
    assert frag_of(nodes, types((1000, 400, 1, "", 1))) == [350]


def test_too_little_cpu_makes_all_free_gpu_a_fragment():
    nodes = state(("n", "T4", 4000, [1000, 350, 600, 0]))
    assert frag_of(nodes, types((8000, 400, 1, "", 1))) == [1000 + 350 + 600 + 0]


def test_popularity_weights_the_task_types():
    nodes = state(("n", "T4", 10_000, [1000, 350, 600, 0]))
    # CPU-only (1 pod): 1950; sharing 400 (3 pods): 350. F = (1 x 1950 + 3 x 350) / 4 = 3000 / 4 = 750.
    by_count = types((1000, 0, 0, "", 1), (1000, 400, 1, "", 3))
    assert frag_of(nodes, by_count) == [750.0]
    by_p = by_count.select(pl.exclude("count"), pl.Series("p", [0.25, 0.75]))
    assert frag_of(nodes, by_p) == [pytest.approx(750.0)]


def test_node_fragmentation_columns_and_cluster_totals():
    nodes = state(
        ("a", "T4", 10_000, [1000, 300]),
        ("b", "T4", 10_000, [1000, 1000, 300]),
        ("c", "V100", 10_000, [0, 0]),
        ("cpu", None, 10_000, []),
    )
    per_node = node_fragmentation(nodes, types((1000, 1000, 2, "", 1)))
    expected = pl.DataFrame(
        {
            "node": ["a", "b", "c", "cpu"],
            "model": ["T4", "T4", "V100", None],
            "gpus": [2, 3, 2, 0],
            "unallocated_milli": [1300, 2300, 0, 0],
            "frag_milli": [1300.0, 300.0, 0.0, 0.0],
        }
    )
    assert_frame_equal(per_node, expected)
    total = cluster_fragmentation(per_node)
    # F = 1300 + 300 = 1600 of 3600 unallocated; 7 GPUs = 7000 milli.
    assert total.row(0, named=True) == {
        "gpus": 7,
        "unallocated_milli": 3600,
        "frag_milli": 1600.0,
        "frag_rate": pytest.approx(1600 / 3600),
        "frag_fleet_share": pytest.approx(1600 / 7000),
    }
    per_model = cluster_fragmentation(per_node, by="model")
    assert per_model["model"].to_list() == [None, "T4", "V100"]
    # The V100 node has nothing unallocated: its rate is undefined (null), its fleet share 0.
    assert per_model.filter(pl.col("model") == "V100").row(0, named=True)["frag_rate"] is None
    assert per_model.filter(pl.col("model") == "T4")["frag_rate"].to_list() == [pytest.approx(1600 / 3600)]


def test_node_fragmentation_rejects_bad_input_by_name():
    with pytest.raises(ValueError, match="node 'x'.*0..1000"):
        node_fragmentation(state(("x", "T4", 0, [1200])), types((0, 0, 0, "", 1)))
    with pytest.raises(ValueError, match="nodes lacks column.*cpu_free_milli"):
        node_fragmentation(state(("x", "T4", 0, [1000])).drop("cpu_free_milli"), types((0, 0, 0, "", 1)))
    with pytest.raises(ValueError, match="popularity"):
        node_fragmentation(state(("x", "T4", 0, [1000])), types((0, 0, 0, "", 1)).drop("count"))


def reference_frag(free: list[int], cpu: int, model: str, task_types: list[tuple]) -> int:
    """sum_m count_m * F_n(m), literally as FRAGMENTATION.md states it (exact integers)."""
    out = 0
    for cpu_m, milli, k, spec, count in task_types:
        wanted = {m for m in spec.split("|") if m}
        runs = milli * k > 0 and (not wanted or model in wanted) and cpu >= cpu_m and sum(r >= milli for r in free) >= k
        out += count * (sum(r for r in free if r < milli) if runs else sum(free))
    return out


MODELS = ["A", "B"]
SPECS = ["", "A", "B", "A|B"]
task_type_rows = st.lists(
    st.tuples(
        st.sampled_from([0, 1000, 4000, 16000]),
        st.sampled_from([0, 100, 250, 500, 800, 1000]),
        st.integers(0, 4),
        st.sampled_from(SPECS),
        st.integers(1, 20),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(
    nodes=st.lists(
        st.tuples(
            st.sampled_from(MODELS),
            st.sampled_from([0, 2000, 8000, 32000]),
            st.lists(st.sampled_from([0, 100, 300, 500, 750, 1000]), min_size=0, max_size=8),
        ),
        min_size=1,
        max_size=12,
    ),
    rows=task_type_rows,
)
def test_vectorised_metric_matches_the_literal_definition(nodes, rows):
    frame = state(*[(f"n{i}", m, c, g) for i, (m, c, g) in enumerate(nodes)])
    total = sum(r[4] for r in rows)
    got = frag_of(frame, types(*rows))
    want = [reference_frag(g, c, m, rows) / total for m, c, g in nodes]
    assert got == pytest.approx(want)


# --- whole-GPU view ----------------------------------------------------------------------------------------


def test_stranded_whole_gpus_per_model_and_fleet():
    nodes = state(
        ("a", "T4", 0, [1000, 1000]),  # 2 whole
        ("b", "T4", 0, [1000, 500]),  # 1 whole
        ("c", "G2", 0, [1000, 1000, 1000, 1000, 1000, 0, 0, 300]),  # 5 whole
        ("d", "G2", 0, [0] * 8),  # none
        ("cpu", None, 0, []),  # no GPU: not counted
    )
    got = stranded_whole_gpus(nodes)
    expected = pl.DataFrame(
        {
            "model": ["G2"] * 4 + ["T4"] * 4 + [None] * 4,
            "job_gpus": [1, 2, 4, 8] * 3,
            # G2: 5 + 0; T4: 2 + 1; fleet: 8.
            "free_whole_gpus": [5] * 4 + [3] * 4 + [8] * 4,
            # A node with fewer whole GPUs than N strands all of them:
            # G2: c (5) only for N=8. T4: b (1) for N=2; a (2) and b (1) for N=4 and 8. Fleet: the sums.
            "stranded_whole_gpus": [0, 0, 0, 5] + [0, 1, 3, 3] + [0, 1, 3, 8],
        }
    )
    assert_frame_equal(got, expected)


# --- replay ------------------------------------------------------------------------------------------------


def cluster(*rows) -> pl.DataFrame:
    """Capacities: (node, model, cpu_milli, memory_mib, gpus)."""
    return pl.DataFrame(
        rows,
        schema={"node": pl.String, "model": pl.String, "cpu_milli": pl.Int64, "memory_mib": pl.Int64, "gpus": pl.Int64},
        orient="row",
    )


def pod_list(*rows) -> pl.DataFrame:
    """Pods: (cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec)."""
    return pl.DataFrame(
        rows,
        schema={
            "cpu_milli": pl.Int64,
            "memory_mib": pl.Int64,
            "num_gpu": pl.Int64,
            "gpu_milli": pl.Int64,
            "gpu_spec": pl.String,
        },
        orient="row",
    )


def test_replay_bestfit_by_hand():
    # a: 1 GPU, b: 2 GPUs, same CPU. A 1-GPU pod with 4000 CPU:
    # a: s = 0.5 x 28000/128000 + 0.5 x (1000 - 1000)/8000 = 0.109375      -> int(100 x 0.890625) = 89
    # b: s = 0.5 x 28000/128000 + 0.5 x (2000 - 1000)/8000 = 0.171875      -> int(100 x 0.828125) = 82
    nodes = cluster(("a", "T4", 32_000, 0, 1), ("b", "T4", 32_000, 0, 2))
    got = replay(nodes, pod_list((4000, 0, 1, 1000, "")), types((1000, 1000, 1, "", 1)), "bestfit", 0)
    assert got.log["node"].to_list() == ["a"]
    assert got.log["gpu_index"].to_list() == [[0]]
    assert got.nodes["gpu_free_milli"].to_list() == [[0], [1000, 1000]]
    assert got.nodes["cpu_free_milli"].to_list() == [28_000, 32_000]


def test_replay_fgd_and_bestfit_disagree_by_hand():
    # b is a V100 node; two V100-only 600-milli pods can only go there. Under both policies the first takes GPU 0
    # (all four equal, lowest index) and the second GPU 1 (400 left on GPU 0 is too small): b = [400, 400, 1000, 1000].
    nodes = cluster(("a", "T4", 32_000, 0, 1), ("b", "V100", 32_000, 0, 4))
    pods = pod_list((0, 0, 1, 600, "V100"), (0, 0, 1, 600, "V100"), (1000, 0, 1, 300, ""))
    whole_gpu = types((1000, 1000, 1, "", 1))  # M: one whole GPU
    fgd = replay(nodes, pods, whole_gpu, "fgd", 0)
    bestfit = replay(nodes, pods, whole_gpu, "bestfit", 0)
    for got in (fgd, bestfit):
        assert got.log["gpu_index"].to_list()[:2] == [[0], [1]]
        # M fits both nodes; F = a: 0 + b: 400 + 400 = 800.
        assert got.log["frag_milli"][1] == 800.0
    # FGD scores int(100 x sigmoid((F - F') / 1000)) for the 300-milli pod:
    #   a -> [700]: no whole GPU left, F' = 700               x = -0.7 -> int(33.18) = 33
    #   b GPU 0 (400 -> 100): leftovers 100 + 400 = 500       x = +0.3 -> int(57.44) = 57 (GPU 1 is equal, later)
    #   b GPU 2 (1000 -> 700): leftovers 400 + 400 + 700     x = -0.7 -> 33
    assert int(100 / (1 + math.exp(0.7))) == 33 and int(100 / (1 + math.exp(-0.3))) == 57
    assert fgd.log.row(2, named=True)["node"] == "b"
    assert fgd.log["gpu_index"][2].to_list() == [0]
    assert fgd.log["frag_milli"][2] == 0 + 500
    # BestFit: s = 0.5 x (32000 - 1000)/128000 + 0.5 x (free GPU milli - 300)/8000
    #   a: 0.12109375 + 0.5 x  700/8000 = 0.16484375 -> int(83.52) = 83
    #   b: 0.12109375 + 0.5 x 2500/8000 = 0.27734375 -> int(72.27) = 72
    assert bestfit.log.row(2, named=True)["node"] == "a"
    assert bestfit.log["frag_milli"][2] == 700 + 800


def test_ties_go_to_one_node_order_drawn_from_the_seed():
    nodes = cluster(("a", "T4", 4000, 0, 0), ("b", "T4", 4000, 0, 0), ("c", "T4", 4000, 0, 0))
    pods = pod_list(*[(1000, 0, 0, 0, "")] * 6)
    cpu_only = types((1000, 0, 0, "", 1))
    firsts = set()
    for seed in range(10):
        got = replay(nodes, pods, cpu_only, "fgd", seed).log["node"].to_list()
        # M is CPU-only: F never moves, every node scores int(100 x sigmoid(0)) = 50, and the order alone decides.
        # The first node in it takes pods until its 4 x 1000 CPU is full; then the second.
        assert got[:4] == [got[0]] * 4
        assert got[4:] == [got[4]] * 2 and got[4] != got[0]
        assert replay(nodes, pods, cpu_only, "fgd", seed).log["node"].to_list() == got
        firsts.add(got[0])
    assert len(firsts) > 1  # the order is the seed's, not the input's


def test_replay_checks_memory_and_logs_pods_that_find_no_node():
    nodes = cluster(("small", "T4", 32_000, 1000, 1), ("big", "T4", 32_000, 8000, 2))
    pods = pod_list(
        (1000, 4000, 1, 1000, ""),  # small has 1000 MiB < 4000: big, GPU 0
        (1000, 4000, 1, 1000, ""),  # big has 4000 MiB left: big, GPU 1
        (1000, 4000, 1, 1000, ""),  # big has 0 MiB, small 1000: nowhere
        (1000, 100, 1, 1000, "V100"),  # no V100 node: nowhere
    )
    two_gpus = types((1000, 1000, 2, "", 1))
    got = replay(nodes, pods, two_gpus, "bestfit", 0)
    expected = pl.DataFrame(
        {
            "pod": [0, 1, 2, 3],
            "node": ["big", "big", None, None],
            "gpu_index": [[0], [1], None, None],
            # Failed pods still arrive.
            "arrived_gpu_milli": [1000, 2000, 3000, 4000],
            "allocated_gpu_milli": [1000, 2000, 2000, 2000],
            "unallocated_gpu_milli": [2000, 1000, 1000, 1000],
            # M needs 2 whole GPUs on one node. After pod 0: small [1000] and big [0, 1000] both fall short, 2000.
            # After pod 1: small [1000] still short (1000), big [0, 0] has nothing unallocated (0).
            "frag_milli": [2000.0, 1000.0, 1000.0, 1000.0],
        },
        schema_overrides={"gpu_index": pl.List(pl.Int64)},
    )
    assert_frame_equal(got.log, expected)
    assert got.nodes.row(1, named=True) == {
        "node": "big",
        "model": "T4",
        "cpu_free_milli": 30_000,
        "gpu_free_milli": [0, 0],
        "memory_free_mib": 0,
    }


def test_replay_rejects_an_unknown_policy_and_multi_gpu_shares():
    nodes = cluster(("a", "T4", 1000, 0, 2))
    with pytest.raises(ValueError, match="unknown policy 'worstfit'"):
        replay(nodes, pod_list((0, 0, 1, 500, "")), types((0, 0, 0, "", 1)), "worstfit")
    with pytest.raises(ValueError, match="num_gpu=2, gpu_milli=500"):
        replay(nodes, pod_list((0, 0, 2, 500, "")), types((0, 0, 0, "", 1)))


def reference_replay(nodes: list[tuple], pods: list[tuple], task_types: list[tuple], policy: str, seed: int):
    """Placement written out literally from the artifact's rules: every node, every GPU, nothing cached."""
    names = [n[0] for n in nodes]
    models = [n[1] for n in nodes]
    cpu = [n[2] for n in nodes]
    mem = [n[3] for n in nodes]
    free = [[1000] * n[4] for n in nodes]
    order = np.random.default_rng(seed).permutation(len(nodes))
    rank = {int(n): i for i, n in enumerate(order)}
    weight = sum(t[4] for t in task_types)
    out = []
    for c, m, k, d, spec in pods:
        uses_gpu = k * d > 0
        wanted = {x for x in spec.split("|") if x}
        best = None
        for n in range(len(nodes)):
            fits = cpu[n] >= c and mem[n] >= m
            if uses_gpu:
                fits = fits and (not wanted or models[n] in wanted) and sum(r >= d for r in free[n]) >= k
            if not fits:
                continue
            if not uses_gpu:
                options = [[]]
            elif d == 1000:
                options = [[g for g, r in enumerate(free[n]) if r == 1000][:k]]
            else:
                options = [[g] for g, r in enumerate(free[n]) if r >= d]
            if policy == "bestfit":
                left = (cpu[n] - c) / 128000 * 0.5 + (sum(free[n]) - k * d) / 8000 * 0.5
                score = int((1.0 - left) * 100)
                gpus = min(options, key=lambda o: (free[n][o[0]], o[0])) if uses_gpu and d < 1000 else options[0]
            else:
                before = reference_frag(free[n], cpu[n], models[n], task_types)
                score = gpus = None
                for option in options:
                    after_free = [r - d if g in option else r for g, r in enumerate(free[n])]
                    after = reference_frag(after_free, cpu[n] - c, models[n], task_types)
                    s = int((1.0 / (1.0 + np.exp(-((before - after) / (weight * 1000))))) * 100.0)
                    if score is None or s > score:
                        score, gpus = s, option
            if best is None or (score, -rank[n]) > (best[0], -rank[best[1]]):
                best = (score, n, gpus)
        if best is None:
            out.append((None, None))
        else:
            _, n, gpus = best
            cpu[n] -= c
            mem[n] -= m
            for g in gpus:
                free[n][g] -= d
            out.append((names[n], gpus or None))
        frag = sum(reference_frag(free[i], cpu[i], models[i], task_types) for i in range(len(nodes))) / weight
        out[-1] = (*out[-1], frag)
    return out


@settings(max_examples=150, deadline=None)
@given(
    nodes=st.lists(
        st.tuples(
            st.sampled_from(MODELS),
            st.sampled_from([2000, 8000, 16000]),
            st.sampled_from([16, 64]),
            st.integers(0, 4),
        ),
        min_size=1,
        max_size=5,
    ),
    pods=st.lists(
        st.tuples(
            st.sampled_from([1000, 2000, 4000]),
            st.sampled_from([0, 8, 32]),
            st.one_of(
                st.just((0, 0)),
                st.tuples(st.just(1), st.sampled_from([100, 250, 300, 500, 600, 750])),
                st.tuples(st.integers(1, 4), st.just(1000)),
            ),
            st.sampled_from(SPECS),
        ),
        min_size=1,
        max_size=25,
    ),
    rows=task_type_rows,
    policy=st.sampled_from(["fgd", "bestfit"]),
    seed=st.integers(0, 3),
)
def test_replay_matches_the_literal_reference(nodes, pods, rows, policy, seed):
    node_rows = [(f"n{i}", *n) for i, n in enumerate(nodes)]
    pod_rows = [(c, m, k, d, spec) for c, m, (k, d), spec in pods]
    got = replay(
        cluster(*[(name, model, c, mem, g) for name, model, c, mem, g in node_rows]),
        pod_list(*[(c, m, k, d, spec) for c, m, k, d, spec in pod_rows]),
        types(*rows),
        policy,
        seed,
    ).log
    want = reference_replay(node_rows, pod_rows, rows, policy, seed)
    assert got["node"].to_list() == [w[0] for w in want]
    assert got["gpu_index"].to_list() == [w[1] for w in want]
    assert got["frag_milli"].to_list() == pytest.approx([w[2] for w in want])


# --- replay input and output helpers -----------------------------------------------------------------------


def test_inflate_appends_copies_until_the_target():
    pods = pl.DataFrame({"name": ["gpu", "cpu"], "cpu_milli": [1000, 1000], "num_gpu": [1, 0], "gpu_milli": [1000, 0]})
    got = inflate_workload(pods, capacity_gpus=10, ratio=1.3, seed=7)
    # Target 1.3 x 10 GPUs = 13000 milli; each GPU copy adds 1000 and the 13th reaches it exactly.
    assert sorted(got["name"][:2].to_list()) == ["cpu", "gpu"]
    assert got.filter(pl.col("num_gpu") > 0).height == 13


def test_inflate_keeps_the_artifacts_overshoot():
    pods = pl.DataFrame({"cpu_milli": [1000], "num_gpu": [2], "gpu_milli": [1000]})
    got = inflate_workload(pods, capacity_gpus=3, ratio=1.0, seed=0)
    # Target 3000; at 2000 the check adds the per-GPU share (2000 + 1000 <= 3000), then the copy adds 2000: 4000.
    assert (got["num_gpu"] * got["gpu_milli"]).sum() == 4000


def test_inflate_drops_pods_when_demand_exceeds_the_target():
    pods = pl.DataFrame({"name": list("wxyz"), "cpu_milli": [1] * 4, "num_gpu": [1] * 4, "gpu_milli": [1000] * 4})
    got = inflate_workload(pods, capacity_gpus=2, ratio=1.3, seed=3)
    # 4000 > 2600: random pods leave until at most 2600 remain, i.e. 2 whole-GPU pods.
    assert got.height == 2 and set(got["name"]) <= set("wxyz")


def test_inflate_needs_gpu_demand():
    with pytest.raises(ValueError, match="no GPU"):
        inflate_workload(pl.DataFrame({"cpu_milli": [1], "num_gpu": [0], "gpu_milli": [0]}), capacity_gpus=1)


def test_arrival_bins_round_half_to_even_and_fill_gaps_from_neighbours():
    log = pl.DataFrame(
        {
            "arrived_gpu_milli": [0, 5, 15, 25],  # of 1 GPU: 0%, 0.5%, 1.5%, 2.5% -> bins 0, 0, 2, 2 (half to even)
            "allocated_gpu_milli": [0, 5, 15, 20],
            "frag_milli": [100.0, 90.0, 80.0, 60.0],
        }
    )
    got = arrival_bins(log, capacity_gpus=1)
    expected = pl.DataFrame(
        {
            "arrived_pct": [0, 1, 2],
            # bin 0: rows 0-1; bin 1 has no row, so rows of bins 0 and 2 (all four); bin 2: rows 2-3.
            "alloc_pct": [(0 + 0.5) / 2, (0 + 0.5 + 1.5 + 2.0) / 4, (1.5 + 2.0) / 2],
            "frag_pct": [(10 + 9) / 2, (10 + 9 + 8 + 6) / 4, (8 + 6) / 2],
        }
    )
    assert_frame_equal(got, expected)


# --- real data: the openb trace and the published FGD results ---------------------------------------------


@pytest.fixture(scope="module")
def openb():
    if not OPENB.is_dir():
        pytest.skip(f"{OPENB} is absent")
    pods = pl.read_csv(OPENB / "openb_pod_list_default.csv")
    nodes = pl.read_csv(OPENB / "openb_node_list_gpu_node.csv").rename({"sn": "node", "gpu": "gpus"})
    return pods, nodes


@pytest.mark.shared_data
def test_openb_typical_task_types(openb):
    pods, _ = openb
    got = typical_task_types(pods)
    # Counted from the 8152 pods of openb_pod_list_default.csv: 91 distinct keys, sorted by count. The first 34
    # cover 7735 pods, short of 0.95 x 8152 = 7744.4; the 35th (4152 m, 810 milli, 31 pods) brings 7766.
    assert got.height == 35
    assert got["count"].sum() == 7766
    assert got.head(6).select("cpu_milli", "gpu_milli", "num_gpu", "gpu_spec", "count").rows() == [
        (3152, 810, 1, "", 1047),
        (11300, 1000, 1, "", 874),
        (11400, 1000, 1, "", 599),
        (3152, 1000, 1, "", 470),
        (11908, 470, 1, "", 388),
        (12500, 0, 0, "", 366),
    ]
    assert got.row(-1)[:5] == (4152, 810, 1, "", 31)
    # Kept CPU-only types: 366 + 290 + 185 + 120 + 95 = 1056 of the trace's 1088 CPU-only pods.
    assert got.filter(pl.col("num_gpu") == 0)["count"].to_list() == [366, 290, 185, 120, 95]
    assert got["p"].sum() == pytest.approx(1.0)
    assert got["p"][0] == pytest.approx(1047 / 7766)


@pytest.mark.shared_data
def test_openb_empty_fleet_is_fragmented_by_the_cpu_only_share(openb):
    pods, nodes = openb
    empty = nodes.select(
        "node",
        "model",
        pl.col("cpu_milli").alias("cpu_free_milli"),
        pl.int_ranges(pl.col("gpus")).list.eval(pl.lit(1000)).alias("gpu_free_milli"),
    )
    per_model = cluster_fragmentation(node_fragmentation(empty, typical_task_types(pods)), by="model")
    share = dict(zip(per_model["model"], per_model["frag_fleet_share"], strict=True))
    # Every kept GPU type asks for 1 GPU and at most 24,200 m CPU; A10, G2, G3, T4 and V100M32 nodes all have
    # >= 48,000 m, so on them only the CPU-only types fragment: 1056 / 7766 of every GPU.
    for model in ("A10", "G2", "G3", "T4", "V100M32"):
        assert share[model] == pytest.approx(1056 / 7766)
    # Some P100 and V100M16 nodes have 8,000 m CPU: types asking for more cannot run there.
    assert share["P100"] > 1056 / 7766 and share["V100M16"] > 1056 / 7766


SEEDS = range(42, 47)
POINTS = (0, 25, 50, 75, 90, 100, 130)


@pytest.mark.slow
@pytest.mark.shared_data
def test_openb_replay_reproduces_the_published_curves(openb):
    """FGD and BestFit on the default workload, demand inflated to 130%, against the artifact's 10 runs.

    Tolerance: 2 standard deviations of the published runs at each point (floor 0.05 points), read from the
    results files. Our mean is over 5 seeds, so its standard error is about 0.45 SD and the published mean's
    about 0.32 SD; their difference has an SE near 0.55 SD, and 2 SD is about 3.6 of those. The RNG differs from
    the artifact's, so runs cannot match one to one. Takes about 7 s on 2 cores (10 replays of ~10,700 pods).
    """
    if not PUBLISHED.is_dir():
        pytest.skip(f"{PUBLISHED} is absent")
    pods, nodes = openb
    capacity = int(nodes["gpus"].sum())
    task_types = typical_task_types(pods)
    published = {
        what: pl.read_csv(PUBLISHED / f"analysis_{what}_discrete.csv").filter(
            pl.col("workload") == "openb_pod_list_default"
        )
        for what in ("frag", "allo")
    }
    ours: dict[str, dict[str, np.ndarray]] = {}
    for policy, name in (("fgd", "06-FGD"), ("bestfit", "05-BestFit")):
        curves = []
        for seed in SEEDS:
            result = replay(nodes, inflate_workload(pods, capacity, 1.3, seed), task_types, policy, seed)
            bins = arrival_bins(result.log, capacity).filter(pl.col("arrived_pct").is_in(POINTS)).sort("arrived_pct")
            assert bins["arrived_pct"].to_list() == list(POINTS)
            curves.append(bins.select("frag_pct", "alloc_pct").to_numpy())
        mean = np.mean(curves, axis=0)
        ours[policy] = {"frag": mean[:, 0], "allo": mean[:, 1]}
        for what in ("frag", "allo"):
            runs = published[what].filter(pl.col("sc_policy") == name).select([str(p) for p in POINTS]).to_numpy()
            assert len(runs) == 10
            tolerance = np.maximum(2 * runs.std(axis=0, ddof=1), 0.05)
            gap = np.abs(ours[policy][what] - runs.mean(axis=0))
            assert (gap <= tolerance).all(), f"{policy} {what}: ours {ours[policy][what]}, published {runs.mean(0)}"
    # The headline numbers of FRAGMENTATION.md (fragmented % / allocation % of GPUs at 100% arrived) are these
    # files' means; ours land within the tolerance above, and FGD beats BestFit by over 2 points of the fleet.
    at_100 = POINTS.index(100)
    assert published["frag"].filter(pl.col("sc_policy") == "06-FGD")["100"].mean() == pytest.approx(4.73, abs=0.005)
    assert published["frag"].filter(pl.col("sc_policy") == "05-BestFit")["100"].mean() == pytest.approx(7.06, abs=0.005)
    assert ours["bestfit"]["frag"][at_100] - ours["fgd"]["frag"][at_100] > 2
    assert ours["fgd"]["allo"][at_100] - ours["bestfit"]["allo"][at_100] > 2
