"""Lake locations (gpuledger.store.open_store), without a server: a local path is a folder, s3:// is a bucket and
prefix, any other scheme is one line naming the value, the CLI and the config take the same, and a lake's machine
folders (its spool) are on local disk outside the lake, for either kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuledger import config as config_mod
from gpuledger.errors import ConfigError, LakeError
from gpuledger.lake import LakeWriter
from gpuledger.store import open_store
from gpuledger.store.local import LocalStore
from gpuledger.store.s3 import S3Location, S3Store


def test_local_paths_are_local_folders():
    assert open_store("data/lake") == LocalStore(Path("data/lake"))
    assert open_store("data/lake").folder == Path.cwd() / "data/lake"  # the same lake from any working folder
    assert open_store(Path("/srv/lake")).folder == Path("/srv/lake")
    assert LakeWriter(Path("/srv/lake")).root.folder == Path("/srv/lake")
    assert LakeWriter("rel").root.folder == Path.cwd() / "rel"


def test_s3_urls_are_a_bucket_and_a_prefix():
    store = open_store("s3://my-lake/fleet/eu/")
    assert isinstance(store, S3Store) and store.loc == S3Location("my-lake", "fleet/eu")
    assert str(store) == "s3://my-lake/fleet/eu"
    assert store.url("gpu_samples/date=2026-11-01") == "s3://my-lake/fleet/eu/gpu_samples/date=2026-11-01"
    assert str(store.loc / "gpu_samples" / "date=2026-11-01") == "s3://my-lake/fleet/eu/gpu_samples/date=2026-11-01"
    assert open_store("s3://my-lake").url("nodes") == "s3://my-lake/nodes"


@pytest.mark.parametrize(
    "value, words",
    [
        ("gs://bucket/lake", "unknown scheme 'gs://' in 'gs://bucket/lake'"),
        ("s3://Bad_Bucket/x", "does not start with a valid S3 bucket name ('Bad_Bucket'"),
        ("s3:///x", "valid S3 bucket name (''"),
        ("s3://lake-a/a/../b", "'.' and '..' are not key segments"),
    ],
)
def test_a_bad_lake_url_is_one_line_naming_it(value, words):
    with pytest.raises(LakeError, match="^lake ") as e:
        open_store(value)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_the_cli_and_the_config_take_an_s3_lake_and_refuse_other_schemes(cli, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[lake]\npath = "s3://lake-a/p"\n')
    assert open_store(config_mod.load(cfg).lake.path).loc == S3Location("lake-a", "p")
    cfg.write_text('[lake]\npath = "ftp://host/lake"\n[collector]\nspool_dir = "s3://lake-a/spool"\n')
    with pytest.raises(ConfigError) as e:
        config_mod.load(cfg)
    assert "lake.path: unknown scheme 'ftp://'" in str(e.value)
    assert "collector.spool_dir: must be a local directory" in str(e.value)
    r = cli("sql", "--lake", "gs://x/y", "SELECT 1")
    assert r.exit_code == 2 and "Invalid value for '--lake': unknown scheme 'gs://' in 'gs://x/y'" in r.output


def test_the_spool_of_an_s3_lake_is_on_local_disk(tmp_path):
    # The default spool (gpuledger.cli: collector.spool_dir unset) is the store's machine folder "spool" / node.
    local = open_store(Path("/srv/lake")).machine_folder("spool", {"XDG_STATE_HOME": "/var/lib/st"})
    assert local / "n1" == Path("/var/lib/st/gpuledger/spool/local/srv/lake/n1")  # outside the lake, as S3's
    s3 = S3Location("lake-a", "eu/p")
    assert S3Store(s3, {"XDG_STATE_HOME": "/var/lib/st"}).machine_folder("spool") / "n1" == Path(
        "/var/lib/st/gpuledger/spool/s3/lake-a/eu/p/n1"
    )
    assert S3Store(s3, {"HOME": "/home/u"}).machine_folder("spool") / "n1" == Path(
        "/home/u/.local/state/gpuledger/spool/s3/lake-a/eu/p/n1"
    )
