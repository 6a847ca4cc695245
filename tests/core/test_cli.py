import json
import re

import polars as pl
import pytest
from click.testing import CliRunner

from gpuledger import __version__
from gpuledger.cli import main
from gpuledger.lake import scan, table_files

from builders import all_keys


def test_version(cli):
    r = cli("--version")
    assert r.exit_code == 0 and __version__ in r.output


@pytest.mark.parametrize(
    "cmd",
    [
        [],
        ["up"],
        ["simulate"],
        ["collect"],
        ["sql"],
        ["compact"],
        ["views"],
        ["analyze"],
        ["export", "focus"],
        ["dashboard"],
        ["enforcer", "serve"],
    ],
)
def test_help_on_everything(cli, cmd):
    r = cli(*cmd, "--help")
    assert r.exit_code == 0 and "Usage:" in r.output
    if cmd:
        assert "--lake" in r.output and "--config" in r.output


@pytest.mark.parametrize("cmd", [["enforcer"], ["enforcer", "certs"], ["enforcer", "manifest"]])
def test_help_on_commands_without_a_lake(cli, cmd):
    r = cli(*cmd, "--help")
    assert r.exit_code == 0 and "Usage:" in r.output


def test_unknown_option_is_a_usage_error(cli):
    r = CliRunner().invoke(main, ["simulate", "--nodez", "3"])
    assert r.exit_code == 2 and "No such option '--nodez'" in r.output
    r = CliRunner().invoke(main, ["collect", "--metrics-port", "99999"])
    assert r.exit_code == 2 and "Invalid value for '--metrics-port'" in r.output
    # --models is checked by the config key's own item check (simulator.models), as the file's value would be.
    r = CliRunner().invoke(main, ["simulate", "--models", "H100,V100"])
    assert r.exit_code == 2 and "Invalid value for '--models': unknown simulated model 'V100' (known: " in r.output
    r = CliRunner().invoke(main, ["simulate", "--models", "H100,"])
    assert r.exit_code == 2 and "Invalid value for '--models': an empty item in the list" in r.output


def test_simulate_writes_the_lake_and_sql_reads_it(cli, store, tmp_path):
    lake = str(store)
    r = cli(
        "simulate",
        "--lake",
        lake,
        "--nodes",
        2,
        "--gpus-per-node",
        2,
        "--days",
        0.25,
        "--step-s",
        60,
        "--seed",
        3,
        "--models",
        "L4,T4",
        "--end",
        "2026-11-02T00:00:00Z",
        "--workers",
        1,
    )
    assert r.exit_code == 0, r.output
    # 2 nodes x 2 GPUs x 6 h / 60 s
    assert "wrote 1,440 GPU samples" in r.output
    # The day is closed (before --end's date): one file, as the simulator writes a small fleet's day in one batch
    # (a larger fleet's batches are merged afterwards; the merge has nothing to do here).
    assert "merged 0 files of 0 closed day partitions" in r.output
    assert [k.split("/")[-1][:9] for k in table_files(store, "gpu_samples") if "date=2026-11-01" in k] == ["part-sim3"]
    r = cli(
        "sql",
        "--lake",
        lake,
        "--format",
        "json",
        "SELECT model, count(*) AS n FROM gpu_samples GROUP BY model ORDER BY model",
    )
    assert json.loads(r.output) == [{"model": "NVIDIA L4", "n": 720}, {"model": "Tesla T4", "n": 720}]
    r = cli(
        "sql",
        "--lake",
        lake,
        "--format",
        "csv",
        "--param",
        "m=Tesla T4",
        "SELECT count(*) AS n FROM gpu_samples WHERE model = $m",
    )
    assert r.output.splitlines() == ["n", "720"]
    out = tmp_path / "nodes.parquet"
    r = cli("sql", "--lake", lake, "--format", "parquet", "--out", out, "SELECT * FROM nodes")
    assert r.exit_code == 0 and pl.read_parquet(out).height == 2
    r = cli("sql", "--lake", lake, "--limit", 3, "SELECT * FROM gpu_samples")
    assert "first 3 rows" in r.output


def test_env_var_names_the_lake(cli, tmp_path, monkeypatch, small_lake):
    monkeypatch.setenv("GPULEDGER_LAKE", str(small_lake))
    r = cli("sql", "--format", "csv", "SELECT count(*) AS n FROM nodes")
    assert r.output.splitlines() == ["n", "3"]


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["sql", "SELECT * FROM gpu_sample"],
            "Error: query error: Catalog Error: Table with name gpu_sample does not exist",
        ),
        (["sql", "COPY (SELECT 1) TO 'x.csv'"], "Error: query error: only read-only queries are allowed"),
        (["sql", "--format", "parquet", "SELECT 1"], "Error: usage error: --format parquet writes binary data"),
        (["sql", "--param", "oops", "SELECT 1"], "Error: usage error: --param 'oops': expected NAME=VALUE"),
        (["simulate", "--end", "yesterday"], "Error: usage error: --end 'yesterday' is not an ISO-8601 time"),
        (["collect", "--source", "dcgm", "--once"], "Error: source error: dcgm: no URL (give --url"),
        (["collect", "--source", "nvml", "--once"], "Error: source error: nvml: NVML could not start"),
    ],
)
def test_user_mistakes_get_one_line_and_exit_1(tmp_path, args, message):
    r = CliRunner().invoke(main, [*args, "--lake", str(tmp_path)])  # an empty folder: a lake with nothing written yet
    assert r.exit_code == 1, r.output
    assert message in r.output
    assert "Traceback" not in r.output


def test_bad_config_is_reported_with_file_and_key(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[collector]\ninterval_s = -1\n")
    r = CliRunner().invoke(main, ["sql", "--config", str(cfg), "SELECT 1"])
    assert r.exit_code == 1
    assert re.search(rf"bad config: 1 problem\(s\) in {re.escape(str(cfg))}", r.output)
    assert f"{cfg}: collector.interval_s: must be at least 0.01 (the floor), got -1" in r.output


def test_unwritable_lake_is_reported(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = CliRunner().invoke(main, ["simulate", "--lake", str(blocker / "lake"), "--nodes", "1", "--days", "0.01"])
    # The first thing simulate does with the lake is read which fleet it holds (to continue it, not repeat it).
    assert r.exit_code == 1 and r.output.count("\n") == 1
    assert r.output.startswith(f"Error: lake error: cannot read {blocker}/lake/_sim/default.json: Not a directory")


def test_collect_once_writes_live_rows(cli, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[collector]\nnode = "n0"\n[simulator]\nnodes = 2\ngpus_per_node = 2\n')
    r = cli("collect", "--source", "sim", "--once", "--lake", tmp_path / "lake", "--config", cfg)
    assert r.exit_code == 0, r.output
    r = cli(
        "sql",
        "--lake",
        tmp_path / "lake",
        "--format",
        "csv",
        "SELECT count(*) AS samples, count(DISTINCT node) AS nodes FROM gpu_samples",
    )
    assert r.output.splitlines() == ["samples,nodes", "4,2"]


def test_compact_command(cli, tmp_path):
    lake = tmp_path / "lake"
    # Two windows of one day, simulated apart: a closed day is one file per run, so the day holds two.
    for end in ("2026-11-01T12:00:00Z", "2026-11-02T00:00:00Z"):
        args = ["--nodes", 2, "--gpus-per-node", 1, "--days", 0.1, "--step-s", 60, "--end", end]
        cli("simulate", "--lake", lake, *args, "--workers", 1, "--no-compact")
    day = lake / "gpu_samples" / "date=2026-11-01"
    before = pl.read_parquet(day / "*.parquet").sort("ts", "gpu_uuid")
    assert len(list(day.glob("*.parquet"))) == 2
    r = cli("compact", "--lake", lake)
    assert r.exit_code == 0 and "compacted" in r.output
    assert len(list(day.glob("*.parquet"))) == 1
    assert pl.read_parquet(day / "*.parquet").sort("ts", "gpu_uuid").equals(before)


def test_import_commands(cli, tmp_path):
    from conftest import REPO

    fx = REPO / "tests" / "fixtures" / "imports"
    lake = tmp_path / "lake"
    r = CliRunner().invoke(main, ["import", "jobs", str(fx / "jobs_good.csv"), "--lake", str(lake)])
    assert r.exit_code == 0 and "rejected 0" in r.output, r.output
    r = CliRunner().invoke(main, ["import", "jobs", str(fx / "jobs_bad_rows.csv"), "--lake", str(lake)])
    assert r.exit_code == 1 and "jobs_bad_rows.csv:6: gpus 'two' is not a number" in r.output
    r = CliRunner().invoke(
        main,
        [
            "import",
            "trace",
            "alibaba-2023",
            str(fx / "openb_tiny"),
            "--lake",
            str(lake),
            "--origin",
            "2026-11-01T00:00:00Z",
        ],
    )
    assert r.exit_code == 0, r.output
    r = cli("sql", "--lake", lake, "--format", "csv", "SELECT count(*) AS n FROM nodes WHERE source = 'import'")
    assert int(r.output.splitlines()[1]) > 0
    r = CliRunner().invoke(
        main, ["import", "trace", "alibaba-2023", str(fx / "openb_tiny"), "--lake", str(lake), "--workload", "nope"]
    )
    assert r.exit_code == 1 and "Traceback" not in r.output and "nope" in r.output


def test_simulate_and_import_again_add_nothing(cli, store):
    """`simulate` (two worker processes) and both imports, run twice: the second run finds its own bytes under every
    key it writes (writes that are never overwrites) and the lake is unchanged, key for key, byte for byte."""
    from conftest import REPO

    imports, lake = REPO / "tests" / "fixtures" / "imports", str(store)

    def fill() -> list[int]:
        return [
            cli(
                "simulate", "--lake", lake, "--nodes", "3", "--days", "2", "--step-s", "600",
                "--end", "2026-11-02T00:00:00Z", "--workers", "2", "--no-compact",
            ).exit_code,
            cli("import", "jobs", "--lake", lake, f"{imports}/jobs_bad_rows.csv").exit_code,
            cli("import", "trace", "alibaba-2025", f"{imports}/alibaba2025_tiny", "--lake", lake).exit_code,
        ]  # fmt: skip

    def contents() -> dict[str, bytes]:
        return {k: store.get(k) for k in all_keys(store) if not k.startswith("_state/")}

    # Exit 1 for both imports: their fixtures hold bad rows on purpose (listed, skipped); the good rows are in.
    assert fill() == [0, 1, 1]
    first = contents()
    rows = {t: scan(store, t).select(pl.len()).collect().item() for t in ("gpu_samples", "jobs", "nodes")}
    # 3 nodes x 8 GPUs (the simulator's default) x 2 days / 600 s; the imports add jobs and nodes, no samples.
    assert rows["gpu_samples"] == 3 * 8 * 288 and rows["jobs"] > 0 and rows["nodes"] > 3, rows
    assert fill() == [0, 1, 1]
    assert contents() == first


def test_dashboard_refuses_a_missing_password_variable(cli, tmp_path, monkeypatch):
    cfg = tmp_path / "gl.toml"
    cfg.write_text('[dashboard]\nauth_user = "ops"\nauth_password_env = "GL_TEST_DASH_PASSWORD"\n')
    monkeypatch.delenv("GL_TEST_DASH_PASSWORD", raising=False)
    r = cli("dashboard", "--config", cfg, "--lake", tmp_path / "lake")
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert "dashboard.auth_password_env: names 'GL_TEST_DASH_PASSWORD', which is not set" in r.output


def test_dashboard_on_a_port_in_use_is_one_clear_line(cli, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = cli("dashboard", "--lake", tmp_path / "lake", "--port", port)
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert f"cannot serve the dashboards on 127.0.0.1:{port}:" in r.output
