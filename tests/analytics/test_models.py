"""The lake's GPU models checked against the quota keys, read as a reader of the lake must (analytics/models.py)."""

import threading
import time

import pytest

from gpuledger import config
from gpuledger.analytics import decisions
from gpuledger.analytics.models import read_checked_models
from gpuledger.errors import ConfigError
from gpuledger.store import local_lock, open_store

from builders import at, epoch_us, write_rows


def _lake(path):
    write_rows(
        path,
        "nodes",
        [
            {
                "cluster": "default",
                "node": n,
                "gpu_model": m,
                "first_seen": epoch_us(at(2)),
                "last_seen": epoch_us(at(2)),
            }
            | {"source": "k8s"}
            for n, m in (("n1", "NVIDIA L4"), ("n2", "Tesla T4"))
        ],
    )
    return path


def _cfg(quota_key: str) -> config.Config:
    return config.parse({"tenants": [{"name": "vision", "namespaces": ["v"], "quota": {quota_key: 4}}]}, "q.toml")


def test_a_quota_key_naming_a_model_of_the_lake_passes_and_the_models_come_back(tmp_path):
    assert read_checked_models(_lake(tmp_path / "lake"), _cfg("T4")) == ["NVIDIA L4", "Tesla T4"]


def test_a_quota_key_naming_no_model_of_the_lake_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError) as e:
        read_checked_models(_lake(tmp_path / "lake"), _cfg("H100"))
    assert "q.toml: tenants[0] (vision).quota.H100: names no GPU model in the lake (known: NVIDIA L4, Tesla T4)" in str(
        e.value
    )


def test_a_local_lake_is_read_under_its_read_lock(tmp_path):
    """A writer publishing (an analytics run or a compaction replacing files) holds the read back until it is done."""
    lake = _lake(tmp_path / "lake")
    published = threading.Event()

    def publish() -> None:
        with local_lock.publishing(lake):
            published.set()
            time.sleep(0.5)

    t = threading.Thread(target=publish)
    t.start()
    published.wait(5)
    t0 = time.monotonic()
    read_checked_models(lake, _cfg("L4"))
    waited_s = time.monotonic() - t0
    t.join()
    assert waited_s >= 0.3, waited_s


@pytest.mark.parametrize("where", ["local", "s3"])
def test_the_models_are_read_without_writing(where, tmp_path, monkeypatch):
    """No day memo written into the lake (read_only): these callers only read it. (No store is reached: the models
    are stubbed, and an object store's reading() takes nothing.)"""
    seen = []

    def known(lake, read_only=False):
        seen.append((lake, read_only))
        return ["NVIDIA L4"]

    monkeypatch.setattr(decisions, "known_models", known)
    store = open_store(str(tmp_path / "lake") if where == "local" else "s3://bucket/lake")
    assert read_checked_models(store, _cfg("L4")) == ["NVIDIA L4"]
    assert seen == [(store, True)]
