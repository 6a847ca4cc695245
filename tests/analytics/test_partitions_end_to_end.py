"""`gpuledger analyze` and `gpuledger whatif placement` on tests/partition_fleet.py's lake, on both stores: the
measured fragmentation counts a partitioned GPU's free instances by gpuledger/partitions.py's rules (the FGD metric
reading frag_series' gpu_partitions and the task types' profile), and the what-if replays on the partitioned
inventory.

The metric's side is analytics/fragmentation's: the test runs where it reads `gpu_partitions` (a feature check on
the metric's behaviour, not a version), and is skipped, saying why, where it does not."""

from __future__ import annotations

import json

import polars as pl
import pytest

from gpuledger.analytics.frag_series import task_types_of
from gpuledger.analytics.fragmentation import node_fragmentation
from gpuledger.lake import scan

from partition_fleet import ASCEND, H10, H11, H100, MI300X, build_lake


def _metric_reads_partitions() -> bool:
    # A free GPU in all-1g MIG offers no whole GPU (rule 2): a metric reading gpu_partitions counts its 1000 free
    # milli as fragmented for a whole-GPU task; one that does not sees a free GPU the task fits.
    state = pl.DataFrame(
        {"node": ["n"], "model": ["m"], "cpu_free_milli": [1], "gpu_free_milli": [[1000]]},
    ).with_columns(pl.Series("gpu_partitions", [["1g.10gb"]], dtype=pl.List(pl.String)))
    task = pl.DataFrame({"cpu_milli": [0], "gpu_milli": [1000], "num_gpu": [1], "gpu_spec": [""], "count": [1]})
    return node_fragmentation(state, task)["frag_milli"][0] == 1000


pytestmark = pytest.mark.skipif(
    not _metric_reads_partitions(),
    reason="the FGD metric (analytics/fragmentation) does not read gpu_partitions yet",
)


@pytest.fixture
def fleet_lake(tmp_path, store, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # an object-store lake's local working copy
    return build_lake(tmp_path / "src", store)


def test_analyze_counts_free_instances_and_the_whatif_replays_partitions(cli, fleet_lake):
    lake = fleet_lake.url()
    r = cli("analyze", "--lake", lake, "--to", "2026-11-02T12:00:00Z")
    assert r.exit_code == 0, r.output
    frag = scan(fleet_lake, "fragmentation").collect()
    got = {(row["ts"], row["gpu_model"]): row["fragmented_gpus"] for row in frag.iter_rows(named=True)}
    # M per model, from its jobs: H100 three 1g.10gb asks (p 0.75: 1 instance, 143 milli) and W1's whole GPU (0.25);
    # MI300X one cpx ask; the 310P one vnpu-2c ask. A task's fragmentation on a node: the free milli on the GPUs
    # that offer it no unit where it fits, all the node's free milli where it does not.
    # H100 10:00, n1 [714 free, 5 x 1g free | 0, whole]: 1g fits (GPU 0), GPU 1 leaves 0 -> 0; the whole GPU task
    #   has no unit (GPU 0 is partitioned, GPU 1 full) -> 714. F = 0.25 x 714 = 178.5 milli.
    # H100 11:00, n1 [571, 4 x 1g | 1000, whole]: 1g fits, the whole GPU offers it none -> 1000; the whole task
    #   fits on GPU 1, GPU 0 offers it none -> 571. F = 0.75 x 1000 + 0.25 x 571 = 892.75 milli.
    # MI300X: 7 cpx free, the ask fits on the only GPU -> 0 both hours.
    # 310P 10:00 [750, vnpu-1c and vnpu-4c free]: no vnpu-2c -> all 750 fragmented; 11:00 all three free -> 0.
    assert got == pytest.approx(
        {
            (H10, H100): 0.1785,
            (H11, H100): 0.89275,
            (H10, MI300X): 0.0,
            (H11, MI300X): 0.0,
            (H10, ASCEND): 0.75,
            (H11, ASCEND): 0.0,
        }
    )
    args = ("--cluster", "c", "--from", "2026-11-02", "--to", "2026-11-02", "--format", "json")
    r = cli("whatif", "placement", "--lake", lake, *args)
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    measured = {row["gpu_model"]: row["fragmented_gpus"] for row in rows if row["policy"] == "measured"}
    # the period's means of the hours above; the fleet row sums the models
    assert measured == pytest.approx(
        {H100: (0.1785 + 0.89275) / 2, MI300X: 0.0, ASCEND: 0.375, None: (0.1785 + 0.89275) / 2 + 0.375}
    )
    # every policy replayed each model's jobs on its partitioned GPUs: the 6 pods all placed at capacity
    replayed = [row for row in rows if row["policy"] in ("fgd", "bestfit") and row["gpu_model"] is not None]
    assert {(row["policy"], row["gpu_model"]) for row in replayed} == {
        (p, m) for p in ("fgd", "bestfit") for m in (H100, MI300X, ASCEND)
    }
    assert sum(row["pods_unplaced"] for row in replayed) == 0


def test_task_types_of_jobs_keep_their_instance_type():
    jobs = pl.DataFrame(
        {"gpu_model": [H100] * 3, "gpus": [1 / 7, 2 / 7, 1.0], "mig_profile": ["1g.10gb", "1g.10gb+me", None]}
    ).with_columns(pl.Series("pods", [3, 1, 1]))
    types = task_types_of(jobs)
    got = types.select("gpu_milli", "num_gpu", "profile", "count").rows()
    # 3 pods of one 1g.10gb, 1 of two (the +me variant is the same slot), 1 whole GPU: 5 pods, all kept (the
    # first two types cover 4 of 5 = 80 % < 95 %); a tie of counts goes to the larger key (the whole GPU first)
    assert got == [(143, 1, "1g.10gb", 3), (1000, 1, "", 1), (143, 2, "1g.10gb", 1)]
    assert types["p"].to_list() == pytest.approx([0.6, 0.2, 0.2])
