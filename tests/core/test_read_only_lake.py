"""A lake on a read-only filesystem: writing commands say so in one line and exit 1 (issue 13, item 11).

We run as root, and chmod does not stop root: the lake is copied onto a tmpfs that is then remounted read-only.
Where mounting is not permitted (an unprivileged run), the test is skipped.
"""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess

import pytest

from builders import END

END_ISO = dt.datetime.fromtimestamp(END, dt.timezone.utc).isoformat()


@pytest.fixture
def read_only_lake(analysed_lake, tmp_path):
    mnt = tmp_path / "ro"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mnt)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        shutil.copytree(analysed_lake, mnt / "lake")
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        yield mnt / "lake"
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


@pytest.mark.parametrize(
    "args, path",
    [
        # A run first records that it runs (Store.put_run, which the dashboards read): its first write.
        (["analyze", "--to", END_ISO], "_state/runs/analytics.json"),
        (["views", "--out", "{lake}/views.sql"], "views.sql"),
    ],
)
def test_writing_to_a_read_only_lake_is_one_line(read_only_lake, args, path):
    from click.testing import CliRunner

    from gpuledger.cli import main

    args = [a.format(lake=read_only_lake) for a in args] + ["--lake", str(read_only_lake)]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)  # no traceback: click's clean exit
    lines = r.output.strip().splitlines()
    assert lines[-1] == f"Error: lake error: cannot write {read_only_lake / path}: read-only file system"
    assert "Traceback" not in r.output
