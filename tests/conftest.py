"""Shared fixtures: small deterministic lakes (built by builders.make_lake, read-only), and a CLI runner.

Every lake is built by the real simulator at a fixed seed and a fixed end time, so values are reproducible.
"""

from __future__ import annotations

import importlib.abc
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from builders import END, make_lake

__all__ = ["END", "REPO", "SHARED", "make_lake"]  # END and make_lake live in builders; some tests take them here

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

# The stage folders sit at the top of the repository, which `python -m pytest` puts on sys.path, so `import
# analytics` would find the folder here although an installed gpuledger has no such module (only
# gpuledger.analytics). Refusing the bare names keeps the tests importing what users import.
STAGE_FOLDERS = frozenset({"collector", "analytics", "dashboards", "enforcer", "sql"})


class _OnlyTheInstalledNamespace(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if path is None and name in STAGE_FOLDERS:
            raise ModuleNotFoundError(f"No module named {name!r} (installed as gpuledger.{name})", name=name)
        return None


sys.meta_path.insert(0, _OnlyTheInstalledNamespace())


@pytest.fixture(autouse=True)
def _state_home(tmp_path_factory, monkeypatch) -> None:
    """Every test (and every process it starts) gets its own state folder, where spools live by default
    (gpuledger.spool.default_dir): never the developer's ~/.local/state, never one shared by two tests."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@pytest.fixture(scope="session")
def small_lake(tmp_path_factory) -> Path:
    """3 nodes x 4 GPUs, one day at 60 s. Read-only for tests: copy it before writing."""
    path = tmp_path_factory.mktemp("lake") / "lake"
    make_lake(path)
    return path


@pytest.fixture(scope="session")
def analysed_lake(small_lake, tmp_path_factory) -> Path:
    """small_lake after `gpuledger analyze` up to END with the built-in config. Read-only for tests."""
    import shutil

    from gpuledger.analytics.runner import run

    path = tmp_path_factory.mktemp("analysed") / "lake"
    shutil.copytree(small_lake, path)
    run(path, until_s=END)
    return path


@pytest.fixture
def cli():
    from gpuledger.cli import main

    runner = CliRunner()

    def run(*args, **kw):
        return runner.invoke(main, [str(a) for a in args], catch_exceptions=False, **kw)

    return run


@pytest.fixture
def los_angeles(monkeypatch):
    """The host's local time zone is Los Angeles (UTC-7, then -8 from Nov 1), so a new DuckDB session starts in
    it, as on a laptop there. Without it a UTC host passes a zone test whatever the code does (issue 14, item 6)."""
    import time

    import duckdb

    monkeypatch.setenv("TZ", "America/Los_Angeles")
    time.tzset()
    assert duckdb.connect().execute("SELECT current_setting('TimeZone')").fetchone() == ("America/Los_Angeles",)
    yield
    monkeypatch.undo()
    time.tzset()


# -- dashboards: dash[testing]'s dash_duo drives Debian's headless Chromium ---------------------------------
def pytest_setup_options():
    """dash_duo's browser: headless Chromium (root in CI containers needs --no-sandbox)."""
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.remote.remote_connection import RemoteConnection

    # dash[testing] pins selenium <= 4.2 (it resolves to 3.141), whose default HTTP timeout is a sentinel that
    # urllib3 2 (which the kubernetes client needs) refuses; a number works with both.
    RemoteConnection.set_timeout(60)

    options = Options()
    for arg in ("--headless", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(arg)
    return options


@pytest.fixture(scope="session")
def dash_lake(tmp_path_factory) -> Path:
    """4 nodes x 4 GPUs, 35 days at 30-minute steps (the forecast needs 28 days), analysed. Read-only."""
    from gpuledger.analytics.runner import run

    path = tmp_path_factory.mktemp("dash") / "lake"
    make_lake(path, nodes=4, gpus=4, days=35, step_s=1800)
    run(path, until_s=END)
    return path


# -- the object-store lake: an S3-protocol server (moto, its own process on loopback), tests/s3_server.py ------------
@pytest.fixture(scope="session")
def moto_server():
    from s3_server import MotoServer

    try:
        server = MotoServer().start()
    except (RuntimeError, OSError) as e:
        pytest.skip(f"no S3 server: {e}")
    yield server
    server.stop()


@pytest.fixture
def s3(moto_server, monkeypatch):
    """A fresh bucket on the session's server, with the standard AWS variables set in the environment."""
    import uuid

    from s3_server import S3

    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    moto_server.create_bucket(bucket)
    env = moto_server.env()
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return S3(moto_server.url, bucket, env, moto_server)


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    """An empty lake on each kind of Store: a folder, and a prefix of a fresh bucket on the session's S3 server. A
    behaviour tested through it is checked once, on both."""
    from gpuledger.store import open_store

    if request.param == "local":
        return open_store(tmp_path / "lake")
    return open_store(f"s3://{request.getfixturevalue('s3').bucket}/lake")


@pytest.fixture
def analysed_store(store, analysed_lake):
    """analysed_lake's files on each kind of Store (a copy: tests may write to it)."""
    from builders import put_lake

    return put_lake(analysed_lake, store)
