"""A simulated fleet with partitioned nodes ([simulator] partitions, `gpuledger simulate --partition`): the rows the
real sources write for MIG instances, AMD CPX partitions and Ascend vNPUs, partition asks placed on their
instances, and the analytics pricing an instance as its parent's model. Rests on the simulator alone."""

import csv
import io
import json
import math

import pytest
from click.testing import CliRunner

from gpuledger.cli import main
from gpuledger.collector.sim import state as sim_state
from gpuledger.collector.sim.backfill import backfill, plan_window
from gpuledger.collector.sim.catalog import CATALOG
from gpuledger.collector.sim.fleet import Fleet
from gpuledger.collector.sim.partitioned import ask, per_node, sim_layout
from gpuledger.collector.sim_source import SimSource
from gpuledger.config import SIM_MODEL_NAMES, SIM_MODELS, SIM_PARTITIONING, defaults
from gpuledger.vendors import read_resource

from builders import END

DAY = 86400.0
H100, MI300X, ASCEND = "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X OAM", "910B3-Ascend-V1"
PRICE = {H100: 2.49, MI300X: 1.99, ASCEND: 1.20}  # the README's example rates, as tests/collector/test_sim_mixed.py
PARTITIONS = ("H100=all-balanced", "MI300X=cpx", "Ascend910B=vnpu-5c*4")
# build_nodes splits 6 nodes over the 3 models in order (2 each); a share of 0.5 partitions the last of each
PARTED = {"gpu-h100-001", "gpu-mi300x-003", "gpu-ascend910b-005"}
# the resource a Kubernetes pod asks for each profile the jobs record (collector/k8s/pods.py reads it back)
RESOURCE = {"nvidia": "nvidia.com/mig-{}", "amd": "amd.com/{}", "huawei": "huawei.com/{}"}


def sql(cli, lake, query):
    r = cli("sql", "--lake", lake, "--format", "csv", query)
    assert r.exit_code == 0, r.output
    return list(csv.DictReader(io.StringIO(r.output)))


@pytest.fixture
def parted(cli, store):
    """6 nodes x 2 GPUs, one of each model's two nodes partitioned, a day at 600 s."""
    lake = str(store)
    args = ["simulate", "--lake", lake, "--nodes", 6, "--gpus-per-node", 2, "--days", 1, "--step-s", 600]
    args += ["--seed", 11, "--models", "H100,MI300X,Ascend910B", "--partitioned-node-share", 0.5]
    args += [x for p in PARTITIONS for x in ("--partition", p)]
    r = cli(*args, "--end", "2026-11-02T00:00:00Z", "--workers", 1)
    assert r.exit_code == 0, r.output
    # 12 GPUs x 144 samples = 1,728 parent rows; instances: 2 H100 GPUs x 4 (all-balanced: 1g, 1g, 2g, 3g) +
    # 2 MI300X x 8 (CPX: one per XCD) + 2 910B3 x 4 (vnpu-5c*4) = 32, x 144 = 4,608 rows; 6,336 in all
    assert "wrote 6,336 GPU samples" in r.output
    return lake


def test_partitioned_gpus_have_a_row_per_instance_with_its_profile_and_share(cli, parted):
    rows = sql(
        cli,
        parted,
        "SELECT model, mig_profile, partition_share AS share, count(*) AS n, count(DISTINCT gpu_uuid) AS uuids, "
        "min(mem_total_bytes) AS mem_lo, max(mem_total_bytes) AS mem_hi, count(power_w) AS with_power "
        "FROM gpu_samples GROUP BY ALL ORDER BY model, mig_profile NULLS FIRST",
    )
    got = [(r["model"], r["mig_profile"], r["share"], int(r["n"]), int(r["uuids"])) for r in rows]
    assert got == [
        (ASCEND, "", "", 4 * 144, 4),
        (ASCEND, "vnpu-5c", "0.25", 8 * 144, 8),  # 5 of the 910B3's 20 AI cores
        (MI300X, "", "", 4 * 144, 4),
        (MI300X, "cpx.nps4", "0.125", 16 * 144, 16),  # 1 of 8 XCDs; CPX with NPS4, as amd.com/cpx_nps4
        (H100, "", "", 4 * 144, 4),
        (H100, "1g.10gb", str(1 / 7), 4 * 144, 4),
        (H100, "2g.20gb", str(2 / 7), 2 * 144, 2),
        (H100, "3g.40gb", str(3 / 7), 2 * 144, 2),
    ]
    total = {H100: 81559 * 2**20, MI300X: 192 * 2**30, ASCEND: 64 * 2**30}
    for r in rows:
        share = float(r["share"]) if r["share"] else 1.0
        # an instance's memory is its share of the GPU's (an H100 1g: 81,559 MiB / 7 = 12,217,258,861 B, floored)
        assert int(r["mem_lo"]) == int(r["mem_hi"]) == int(total[r["model"]] * share)
        # power, energy, temperature and clocks are the physical GPU's: on its row only
        assert int(r["with_power"]) == (int(r["n"]) if not r["mig_profile"] else 0)


def test_each_instance_names_its_parent_as_the_vendors_source_does(cli, parted):
    kids = sql(
        cli,
        parted,
        "SELECT DISTINCT c.node, c.gpu_uuid, c.parent_gpu_uuid, c.gpu_index, c.vendor, p.gpu_index AS parent_index "
        "FROM gpu_samples c JOIN (SELECT DISTINCT node, gpu_uuid, gpu_index FROM gpu_samples "
        "WHERE parent_gpu_uuid IS NULL) p ON p.gpu_uuid = c.parent_gpu_uuid AND p.node = c.node "
        "WHERE c.parent_gpu_uuid IS NOT NULL ORDER BY c.gpu_uuid",
    )
    assert len(kids) == 32 and {k["node"] for k in kids} == PARTED  # every instance's parent is on its node
    for k in kids:
        assert k["gpu_index"] == k["parent_index"]
        uuid, parent = k["gpu_uuid"], k["parent_gpu_uuid"]
        if k["vendor"] == "nvidia":  # NVML: a MIG device has a uuid of its own
            assert uuid.startswith("MIG-") and len(uuid) == 40
        elif k["vendor"] == "amd":  # the AMD exporter's builder: <serial>/p<partition id>, 0..7
            assert uuid.startswith(parent + "/p") and 0 <= int(uuid.rsplit("/p", 1)[1]) < 8
        else:  # the npu-exporter's: <chip>/vnpu<v_dev_id>
            assert uuid.startswith(parent + "/vnpu")
    whole = sql(cli, parted, "SELECT DISTINCT node FROM gpu_samples WHERE parent_gpu_uuid IS NULL ORDER BY node")
    assert len(whole) == 6  # every node has its GPUs' rows, partitioned or not


def test_partition_asks_hold_instances_of_their_profile_as_the_kubernetes_source_records_them(cli, parted):
    jobs = sql(
        cli,
        parted,
        "SELECT j.job_id, j.node, j.gpu_model, j.gpus, j.gpu_sharing, j.mig_profile, "
        "array_to_string(j.gpu_uuids, ' ') AS uuids, len(j.gpu_uuids) AS k FROM jobs j "
        "WHERE j.scheduled_at IS NOT NULL",
    )
    inst = {
        r["gpu_uuid"]: r
        for r in sql(
            cli,
            parted,
            "SELECT DISTINCT gpu_uuid, node, vendor, mig_profile, partition_share FROM gpu_samples "
            "WHERE parent_gpu_uuid IS NOT NULL",
        )
    }
    asks = [j for j in jobs if j["mig_profile"]]
    assert {j["gpu_model"] for j in asks} == {H100, MI300X, ASCEND}  # every partitioned model got partition asks
    for j in jobs:
        if not j["mig_profile"]:  # a whole-GPU job or a share never lands on a partitioned node
            assert j["node"] not in PARTED and j["gpu_sharing"] in ("exclusive", "fraction")
            continue
        uuids = j["uuids"].split(" ")
        held = [inst[u] for u in uuids]
        vendor = held[0]["vendor"]
        assert j["node"] in PARTED and all(h["node"] == j["node"] for h in held) and len(set(uuids)) == len(uuids)
        assert j["gpu_sharing"] == ("mig" if vendor == "nvidia" else "partition")
        # gpus = instances x one instance's share, and every instance is of the profile asked
        assert float(j["gpus"]) == pytest.approx(int(j["k"]) * float(held[0]["partition_share"]), rel=1e-12)
        assert len({h["mig_profile"] for h in held}) == 1
        resource = read_resource(RESOURCE[vendor].format(j["mig_profile"].replace(".", "_", vendor == "amd")))
        assert resource is not None and resource.profile == j["mig_profile"]
        sample_profile = held[0]["mig_profile"]
        if vendor == "huawei":  # Ascend910-5c asked, vnpu-5c reported: the same 5 AI cores
            assert (j["mig_profile"], sample_profile) == ("Ascend910-5c", "vnpu-5c")
        else:  # MIG 1g.10gb / AMD cpx.nps4 on both sides
            assert j["mig_profile"] == sample_profile


def test_an_instance_reports_its_jobs_utilization_and_its_gpu_the_sum(cli, parted):
    # the GPU's utilization is its instances' own (whole percents), each times its share, rounded once: within
    # half a percent of the rounded instances' sum plus half a percent per instance of rounding on their side
    rows = sql(
        cli,
        parted,
        "SELECT p.ts, p.gpu_uuid, any_value(p.util_gpu_pct) AS gpu, sum(c.util_gpu_pct * c.partition_share) AS parts, "
        "sum(c.partition_share) AS shares, count(c.pod) AS held, max(c.util_gpu_pct) AS top "
        "FROM gpu_samples p JOIN gpu_samples c ON c.parent_gpu_uuid = p.gpu_uuid AND c.ts = p.ts GROUP BY ALL",
    )
    assert len(rows) == 6 * 144 and all(float(r["shares"]) == pytest.approx(1.0) for r in rows)
    for r in rows:
        assert abs(float(r["gpu"]) - float(r["parts"])) <= 0.5 + 0.5 + 1e-6
    assert max(float(r["top"]) for r in rows) > 50  # instances are busy, not a thin slice of their GPU's figure
    assert any(int(r["held"]) for r in rows)
    # an instance nobody holds is idle; one a pod holds names it
    idle = sql(
        cli,
        parted,
        "SELECT count(*) AS n FROM gpu_samples WHERE parent_gpu_uuid IS NOT NULL AND pod IS NULL AND "
        "(util_gpu_pct > 0 OR mem_used_bytes > 0)",
    )
    assert int(idle[0]["n"]) == 0


def test_analyze_prices_an_instance_as_its_parents_model_on_the_parent(cli, parted):
    r = cli("analyze", "--lake", parted)
    assert r.exit_code == 0, r.output
    parent = {
        r["gpu_uuid"]: (r["parent_gpu_uuid"], r["model"])
        for r in sql(cli, parted, "SELECT DISTINCT gpu_uuid, parent_gpu_uuid, model FROM gpu_samples")
    }
    alloc = sql(
        cli,
        parted,
        "SELECT a.gpu_uuid, a.share, j.gpus, len(j.gpu_uuids) AS k FROM gpu_allocations a JOIN jobs j USING (job_id) "
        "WHERE j.mig_profile IS NOT NULL AND j.status = 'running'",
    )
    assert alloc
    for a in alloc:  # each instance holds one instance's share (two 5c vNPUs of a 0.5 ask: 0.25 each, not 0.5)
        assert float(a["share"]) == pytest.approx(float(a["gpus"]) / int(a["k"]), rel=1e-12)
        assert parent[a["gpu_uuid"]][0] is not None
    cost = sql(
        cli,
        parted,
        "SELECT c.gpu_uuid, c.slice_uuid, c.gpu_model, c.gpu_hours, c.cost_usd FROM cost_allocation c "
        "JOIN (SELECT DISTINCT job_id FROM jobs WHERE mig_profile IS NOT NULL) USING (job_id)",
    )
    assert {c["gpu_model"] for c in cost} == {H100, MI300X, ASCEND}
    for c in cost:
        # the physical GPU carries the cost, the instance is named as the slice, at the parent's model's rate
        assert parent[c["slice_uuid"]] == (c["gpu_uuid"], c["gpu_model"])
        assert float(c["cost_usd"]) == pytest.approx(float(c["gpu_hours"]) * PRICE[c["gpu_model"]], rel=1e-9)


def test_the_ask_a_small_job_makes_on_each_layout():
    bal = sim_layout("H100", "all-balanced")  # 1g.10gb x 2 (1/7), 2g.20gb (2/7), 3g.40gb (3/7)
    most = per_node(bal, 8)
    assert ask(bal, "training", 0.25, most) == ("2g.20gb", 1)  # the smallest holding 0.25: 2/7 = 0.286
    assert ask(bal, "other", 0.5, most) == ("3g.40gb", 1)  # none holds 0.5: 3g x round(0.5 / 0.429 = 1.17) = 1
    assert ask(bal, "notebook", 1.0, most) == ("1g.10gb", 1)  # a session on the smallest slice
    assert ask(bal, "inference", 1.0, most) == ("3g.40gb", 1)  # a small model served on the largest
    assert ask(bal, "training", 1.0, most) is None and ask(bal, "inference", 2.0, most) is None
    one = sim_layout("H100", "all-1g.10gb")
    assert ask(one, "evaluation", 0.5, per_node(one, 8)) == ("1g.10gb", 4)  # round(0.5 x 7 = 3.5) = 4
    cpx = sim_layout("MI300X", "cpx")
    assert ask(cpx, "training", 0.25, per_node(cpx, 8)) == ("cpx", 2)  # 0.25 / (1/8) = 2
    assert (cpx.sample_profiles[0], cpx.job_profile("cpx")) == ("cpx.nps4", "cpx.nps4")
    dpx = sim_layout("MI300X", "dpx.nps2")
    assert (dpx.types, dpx.sample_profiles, dpx.job_profile("dpx")) == (("dpx",) * 2, ("dpx.nps2",) * 2, "dpx.nps2")
    vnpu = sim_layout("Ascend910B", "vnpu-5c*4")
    assert ask(vnpu, "other", 0.5, per_node(vnpu, 8)) == ("vnpu-5c", 2)  # 0.5 / (5 / 20) = 2
    assert vnpu.job_profile("vnpu-5c") == "Ascend910-5c" and vnpu.shares == (0.25,) * 4


def test_the_state_names_the_layouts_and_another_layout_is_another_fleet(tmp_path):
    cfg = defaults()
    lake = tmp_path / "lake"
    shape = dict(nodes=2, gpus_per_node=2, models=("H100",), seed=5)
    backfill(cfg, lake, END - 3600, END, 600, **shape, workers=1, partitions={"H100": "all-1g.10gb"},
             partitioned_node_share=0.5)  # fmt: skip
    st = sim_state.load(lake, cfg.cluster)
    assert (st.partitions, st.partitioned_node_share) == ({"H100": "all-1g.10gb"}, 0.5)
    same = plan_window(cfg, lake, END, END + 3600, **shape, partitions={"H100": "all-1g.10gb"},
                       partitioned_node_share=0.5)  # fmt: skip
    assert same.epoch_s == st.epoch_s  # continued
    other = plan_window(cfg, lake, END, END + 3600, **shape, partitions={"H100": "all-balanced"},
                        partitioned_node_share=0.5)  # fmt: skip
    assert other.epoch_s is None  # a new fleet
    assert plan_window(cfg, lake, END, END + 3600, **shape).epoch_s is None  # and so is one without partitions
    # the live source continues the lake's partitioned fleet: its scrape has the instances' rows
    src = SimSource(cfg, lake, END + 60)
    live = {b.table: b for b in src.collect(END + 120)}
    kids = [p for p in live["gpu_samples"].columns["mig_profile"] if p is not None]
    assert kids == ["1g.10gb"] * 14  # one scrape: the partitioned node (1 of 2) has 2 GPUs of seven 1g each
    src.checkpoint()
    assert sim_state.load(lake, cfg.cluster).partitions == {"H100": "all-1g.10gb"}


def test_a_bad_layout_is_one_line_naming_the_model_and_writes_nothing(tmp_path):
    lake = tmp_path / "lake"
    r = CliRunner().invoke(main, ["simulate", "--lake", str(lake), "--partition", "L40S=all-1g.10gb"])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "--partition 'L40S=all-1g.10gb': L40S has no partitions (the simulator partitions H100" in r.output
    r = CliRunner().invoke(main, ["simulate", "--lake", str(lake), "--partition", "H100"])
    assert r.exit_code == 1 and "--partition 'H100': expected MODEL=LAYOUT (H100=all-balanced)" in r.output
    conf = tmp_path / "g.toml"
    conf.write_text('[simulator]\npartitions = {H100 = "cpx", MI300X = "cpx*9", Ascend910B = "vnpu-5c*5"}\n')
    r = CliRunner().invoke(main, ["simulate", "--lake", str(lake), "--config", str(conf)])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert f"{conf}: simulator.partitions.H100: 'cpx' is a layout of AMD compute modes; H100 takes MIG" in r.output
    assert f"{conf}: simulator.partitions.MI300X: AMD layout cpx, " in r.output
    assert "CPX makes 8 partitions of AMD Instinct MI300X OAM" in r.output
    # 5 x 5 AI cores on a 910B3, which has 20 (hiascend: 910B3 and 910B4 have 20)
    assert (
        f"{conf}: simulator.partitions.Ascend910B: vNPU layout " in r.output
        and "25 AI cores, the chip has 20" in r.output
    )
    assert not lake.exists()


def test_no_partitions_no_partition_rows(tmp_path):
    cfg = defaults()
    assert cfg.simulator.partitions == {}
    lake = tmp_path / "lake"
    backfill(cfg, lake, END - 3600, END, 600, nodes=2, gpus_per_node=2, models=("H100",), seed=5, workers=1)
    st = json.loads((lake / "_sim" / f"{cfg.cluster}.json").read_text())
    assert "partitions" not in st and "partitioned_node_share" not in st  # the state file as before partitions
    assert math.isclose(sim_state.load(lake, cfg.cluster).partitioned_node_share, 0.0)


def test_the_configs_model_names_are_the_catalogs():
    # gpuledger/config.py checks a layout against the model's name without importing the simulator (core layer)
    assert SIM_MODEL_NAMES == {k: s.name for k, s in CATALOG.items()} and SIM_MODELS == tuple(CATALOG)
    assert set(SIM_PARTITIONING) == {"H100", "H200", "A100", "MI300X", "Ascend910B"}


def test_an_instance_type_is_offered_about_the_fleets_load():
    """40 H100 nodes at load 0.5, 4 of them all-balanced (share 0.1), two weeks after a day's warm-up. The 3g's
    chance is below 1 (the services and evaluations mapped to it would bring more than its part): the GPU-hours its
    asks hold over its capacity (4 nodes x 8 GPUs x 3/7) are near the fleet's 0.5 (the measured 0.55; at a chance
    of 1 it would be 0.55 / 0.63 = 0.86). The 1g's small jobs cannot fill it (chance 1)."""
    f = Fleet(defaults(), 0, 40, 8, ("H100",), 42, 0.5, {"H100": "all-balanced"}, 0.1)
    chance = f.workload.partitions["H100"][2]
    assert chance["1g.10gb"] == 1.0 and 0.3 < chance["3g.40gb"] < 0.9
    f.advance(15 * DAY)
    held: dict[str, float] = {}
    for n in f.nodes:
        for a in f.allocations[n.index]:
            s, e = max(a.start_s, DAY), min(a.end_s, 15 * DAY)
            for _, slot in a.instances if e > s else ():
                t = n.layout.types[slot]
                held[t] = held.get(t, 0.0) + (e - s) * n.layout.shares[slot]
    assert sum(1 for n in f.nodes if n.layout) == 4
    load_3g = held["3g.40gb"] / (14 * DAY * 4 * 8 * 3 / 7)
    assert 0.35 < load_3g < 0.7
    assert held["1g.10gb"] / (14 * DAY * 4 * 8 * 2 / 7) < 0.5
