"""`gpuledger whatif placement` end to end on the hand-built lake of tests/placement_case.py: the table, csv and json
carry the hand-computed figures; a bad input is one line naming it, never a traceback."""

import json
import subprocess
import sys

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from placement_case import CONFIG, EXPECTED, build_lake


@pytest.fixture
def lake_and_config(tmp_path):
    config = tmp_path / "gpuledger.toml"
    config.write_text(CONFIG)
    return build_lake(tmp_path / "lake"), config


def test_csv_and_json_carry_the_hand_computed_figures(cli, lake_and_config):
    lake, config = lake_and_config
    args = ("whatif", "placement", "--lake", lake, "--config", config, "--from", "2026-11-02", "--to", "2026-11-02")
    r = cli(*args, "--format", "csv")
    assert r.exit_code == 0, r.output
    got = pl.read_csv(r.stdout.encode(), schema=EXPECTED.schema)
    assert_frame_equal(got, EXPECTED, abs_tol=1e-9)
    assert "replayed cluster 'c' from 2026-11-02 to 2026-11-02" in r.stderr
    r = cli(*args, "--format", "json", "--policy", "fgd")
    rows = json.loads(r.stdout)
    fleet_fgd = next(row for row in rows if row["policy"] == "fgd" and row["gpu_model"] is None)
    assert fleet_fgd["freed_gpus"] == pytest.approx(1.0) and fleet_fgd["freed_usd"] == pytest.approx(72.0)
    assert {row["policy"] for row in rows} == {"measured", "fgd"}


def test_the_default_period_ends_at_the_last_measured_day_and_the_table_shows_it(cli, lake_and_config):
    lake, config = lake_and_config
    r = cli("whatif", "placement", "--lake", lake, "--config", config)  # the week to 2026-11-02; the lake has that day
    assert r.exit_code == 0, r.output
    assert "from 2026-10-27 to 2026-11-02" in r.stderr
    fgd = next(line for line in r.stdout.splitlines() if "fgd" in line and "T4" in line)
    assert "72.00" in fgd and "24.00" in fgd  # USD and GPU-hours freed: only the measured hours count
    r = cli("whatif", "placement", "--lake", lake, "--config", config, "--curves", "--format", "csv")
    curves = pl.read_csv(r.stdout.encode())
    assert curves.columns == ["policy", "gpu_model", "arrived_pct", "alloc_pct", "frag_pct"]


@pytest.mark.parametrize(
    "args,message",
    [
        (("--from", "2026-11-31"), "usage error: --from '2026-11-31' is not a date (YYYY-MM-DD)"),
        (("--from", "2026-11-03", "--to", "2026-11-02"), "usage error: --from 2026-11-03 is after --to 2026-11-02"),
        (("--policy", "random"), "usage error: unknown policy random; policies are: fgd, bestfit"),
        (
            ("--from", "2026-10-30", "--to", "2026-10-31"),
            "usage error: no GPU jobs of the inventory's models were submitted or running for cluster 'c'",
        ),
        (("--to", "2026-12-01"), "usage error: no GPU nodes in the lake's nodes table for cluster 'c' from 2026-11-25"),
        (("--cluster", "eu-1"), "usage error: no measured fragmentation for cluster 'eu-1' in the lake"),
    ],
)
def test_bad_input_is_one_line_naming_it(cli, lake_and_config, args, message):
    lake, config = lake_and_config
    r = cli("whatif", "placement", "--lake", lake, "--config", config, *args)
    assert r.exit_code == 1
    assert r.stderr == f"Error: {message}" + r.stderr.removeprefix(f"Error: {message}")
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.output


def test_the_installed_command_runs_from_another_folder(tmp_path, lake_and_config):
    """As a user runs it: a process of its own, from a folder that is not the repository."""
    lake, config = lake_and_config
    cmd = [sys.executable, "-m", "gpuledger.cli", "whatif", "placement", "--lake", str(lake), "--config", str(config)]
    r = subprocess.run([*cmd, "--to", "2026-11-02"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "bestfit" in r.stdout and "measured" in r.stdout
    r = subprocess.run([*cmd, "--to", "yesterday"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stderr == "Error: usage error: --to 'yesterday' is not a date (YYYY-MM-DD)\n"
