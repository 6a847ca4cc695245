"""The one scheduler (gpuledger/placement.py) places partition asks by gpuledger/partitions.py's rules: whole
instances of one type, never on a whole GPU, and no whole GPU or share on a partitioned one."""

from dataclasses import dataclass

import pytest

from gpuledger.partitions import parse_layout
from gpuledger.placement import Node, Scheduler

H100 = "NVIDIA H100 80GB HBM3"
ALL_1G = parse_layout("all-1g.10gb", H100)  # seven 1g.10gb
CPX = parse_layout("cpx", "AMD Instinct MI300X OAM")  # eight cpx


@dataclass(frozen=True)
class Job:
    model_key: str
    gpus: float
    partition: str | None = None
    instances: int = 0

    @property
    def whole(self) -> int:
        return int(self.gpus) if self.gpus >= 1 else 0

    @property
    def milli(self) -> int:
        if self.partition is not None:
            return int(round(self.gpus / self.instances * 1000))
        return 1000 if self.gpus >= 1 else int(round(self.gpus * 1000))


def one_g(k: int = 1) -> Job:
    return Job("H100", k / 7, "1g.10gb", k)


def test_seven_1g_fit_an_all_1g_gpu_and_an_eighth_does_not():
    # In thousandths a 1g is 143 and 7 x 143 = 1,001 > 1,000: the rule counts instances, so all seven fit.
    s = Scheduler([Node(0, "n0", "H100", [1000], layouts=[ALL_1G])])
    placed = [s._place(one_g()) for _ in range(7)]
    assert [p.instances for p in placed] == [((0, i),) for i in range(7)]
    assert all(p.gpus == (0,) and p.milli == 143 for p in placed)
    assert s._place(one_g()) is None
    assert s.nodes[0].free_of == {"1g.10gb": 0} and s.nodes[0].free_instances == 0


def test_a_cpx_node_with_every_partition_free_refuses_a_whole_gpu_and_a_share():
    s = Scheduler([Node(0, "n0", "MI300X", [1000, 1000], layouts=[CPX, CPX])])
    node = s.nodes[0]
    # both GPUs partitioned: no whole GPU and no share to offer, 16 instances
    assert (node.whole_free, node.free_milli, node.free_instances) == (0, [0, 0], 16)
    assert s._place(Job("MI300X", 1.0)) is None
    assert s._place(Job("MI300X", 0.5)) is None
    assert s._place(Job("MI300X", 0.125, "cpx", 1)) is not None


def test_a_partition_ask_never_takes_a_whole_gpu():
    # one whole GPU and one all-1g GPU: the ask takes the 1g, then nothing (the whole GPU offers no instance)
    s = Scheduler([Node(0, "n0", "H100", [1000, 1000], layouts=[None, ALL_1G])])
    assert s.nodes[0].whole_free == 1
    assert s._place(one_g(7)).instances == tuple((1, i) for i in range(7))
    assert s._place(one_g()) is None
    assert s.nodes[0].whole_free == 1  # still free for a whole-GPU job
    assert s._place(Job("H100", 1.0)).gpus == (0,)


def test_release_gives_the_instances_back():
    s = Scheduler([Node(0, "n0", "H100", [1000], layouts=[ALL_1G])])
    a = s._place(one_g(3))  # slots 0, 1, 2
    b = s._place(one_g(4))  # slots 3..6
    assert s._place(one_g()) is None
    s.release(a)
    assert s.nodes[0].free_of == {"1g.10gb": 3} and s.nodes[0].slot_free == [[True] * 3 + [False] * 4]
    assert s._place(one_g(3)).instances == ((0, 0), (0, 1), (0, 2))  # the same slots again
    s.release(b)
    assert s.nodes[0].free_instances == 4 and s.nodes[0].free_milli == [0]  # a partitioned GPU stays partitioned


def test_best_fit_takes_the_node_and_gpu_with_the_fewest_free_instances_of_the_type():
    bal = parse_layout("all-balanced", H100)  # 1g, 1g, 2g, 3g
    s = Scheduler([Node(0, "a", "H100", [1000, 1000], layouts=[bal, bal]), Node(1, "b", "H100", [1000], layouts=[bal])])
    # node a has 4 free 1g, node b 2: a 1g goes to b (fewest that still fit), slot 0 of its GPU
    assert (s._place(one_g()).node, s.nodes[1].free_of["1g.10gb"]) == (1, 1)
    # two 1g: b has 1 left, too few; a's GPU 0 and 1 have 2 each: the first is taken whole
    p = s._place(one_g(2))
    assert (p.node, p.instances) == (0, ((0, 0), (0, 1)))
    # one more 1g: b's last one (1 free) before a's GPU 1 (2 free)
    assert s._place(one_g()).node == 1
    # then on a: GPU 1 (the only one with a 1g left)
    assert s._place(one_g()).instances == ((1, 0),)
    # a 3g is its own type: a's GPU 0 still has its 3g in slot 3
    assert s._place(Job("H100", 3 / 7, "3g.40gb", 1)).instances == ((0, 3),)


def test_the_queue_looks_past_a_whole_job_to_a_partition_ask_that_fits():
    # a model whose only node is partitioned: the whole-GPU job at the head never fits, and with no whole GPU and
    # no share free the queue still has instances to offer, so the pass goes on to the partition ask behind it
    s = Scheduler([Node(0, "n0", "MI300X", [1000], layouts=[CPX])])
    whole, part = Job("MI300X", 1.0), Job("MI300X", 0.25, "cpx", 2)
    s.submit(whole)
    s.submit(part)
    placed = s.schedule("MI300X")
    assert [j for j, _ in placed] == [part] and list(s.pending["MI300X"]) == [whole]


def test_a_node_without_layouts_places_as_before():
    s = Scheduler([Node(0, "n0", "H100", [1000, 1000])])
    assert (s.nodes[0].whole_free, s.nodes[0].free_instances) == (2, 0)
    half = s._place(Job("H100", 0.5))
    assert (half.gpus, half.milli, half.instances) == ((0,), 500, ())
    assert s._place(Job("H100", 1.0)).gpus == (1,)
    assert s._place(one_g()) is None  # a partition ask on a fleet without partitions never fits


def test_an_ask_of_no_instance_is_refused_loudly():
    s = Scheduler([Node(0, "n0", "H100", [1000], layouts=[ALL_1G])])
    with pytest.raises(ValueError, match="a partition ask of 0 instances of 1g.10gb"):
        s._place(Job("H100", 0.0, "1g.10gb", 0))
    # and a node given layouts for fewer GPUs than it has
    with pytest.raises(ValueError, match="node n1: 1 layouts for 2 GPUs"):
        Node(1, "n1", "H100", [1000, 1000], layouts=[ALL_1G])
