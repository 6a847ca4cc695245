"""Lake locations (gpuledger.store.open_store, gpuledger/store/s3.py) without a server: a local path is a folder,
s3:// is a bucket and prefix, any other scheme is one line naming the value, and the AWS settings come from the
environment or the shared files' profile as the SDKs read them."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuledger import config as config_mod
from gpuledger.errors import ConfigError, LakeError
from gpuledger.lake import LakeWriter
from gpuledger.store import open_store
from gpuledger.store import s3 as store_s3
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


def test_settings_come_from_the_environment_before_the_profile(tmp_path):
    aws = tmp_path / ".aws"
    aws.mkdir()
    (aws / "credentials").write_text(
        "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = s1\n"
        "[ceph]\naws_access_key_id = AKIACEPH\naws_secret_access_key = s2\naws_session_token = t2\n"
    )
    (aws / "config").write_text(
        "[default]\nregion = eu-west-1\n[profile ceph]\nregion = ceph-1\nendpoint_url = http://ceph:7480\n"
    )
    env = {"HOME": str(tmp_path)}
    assert store_s3.aws_settings(env) == store_s3.AwsSettings(None, "eu-west-1", "AKIADEFAULT", "s1", None)
    prof = store_s3.storage_options(env | {"AWS_PROFILE": "ceph"})
    assert prof == {
        "connect_timeout": "2s",
        "timeout": "60s",
        "max_retries": 3,
        "aws_endpoint_url": "http://ceph:7480",
        "aws_region": "ceph-1",
        "aws_access_key_id": "AKIACEPH",
        "aws_secret_access_key": "s2",
        "aws_session_token": "t2",
        "aws_allow_http": "true",  # only because the endpoint is http://
    }
    over = env | {
        "AWS_PROFILE": "ceph",
        "AWS_ACCESS_KEY_ID": "AKIAENV",
        "AWS_SECRET_ACCESS_KEY": "s3",
        "AWS_ENDPOINT_URL": "https://minio:9000",
        "AWS_REGION": "us-east-2",
    }
    assert store_s3.aws_settings(over) == store_s3.AwsSettings("https://minio:9000", "us-east-2", "AKIAENV", "s3", None)
    with pytest.raises(LakeError, match=r"^AWS_PROFILE 'nope' is in neither .*credentials nor .*config$"):
        store_s3.aws_settings(env | {"AWS_PROFILE": "nope"})


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


def test_a_store_failure_is_named_by_what_it_is():
    """store.s3.explain on the texts obstore and polars gave for real failures (against moto, in this repo's tests)."""
    from gpuledger.store import StoreUnreachable
    from gpuledger.store.s3 import explain

    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"}
    lake = S3Location("lake-a", "p")
    # The store stopped in the middle of a LIST's answer (test_s3_analyze_outage): the endpoint went away.
    cut = "Generic S3 error: Error getting list response body: HTTP error: request or response body error"
    e = explain(OSError(cut), lake / "gpu_hourly", "listing", env)
    assert isinstance(e, StoreUnreachable)
    assert str(e) == "object store endpoint http://127.0.0.1:9000 unreachable, while listing s3://lake-a/p/gpu_hourly"
    # A DeleteObjects answer refusing one key (test_s3_permissions: a user without s3:DeleteObject).
    denied = (
        "Generic S3 error: DeleteObjects request failed for key p/job_hourly/date=2026-11-02/part-job_hourly.parquet: "
        "Access Denied (code: AccessDenied)"
    )
    e = explain(OSError(denied), lake / "job_hourly", "deleting", env)
    assert str(e) == "no permission to delete s3://lake-a/p/job_hourly (AccessDenied), while deleting"
    # Anything else: the store's own first line, named as an object store error.
    e = explain(OSError("Generic S3 error: something new\nmore"), lake, "reading", env)
    assert str(e) == "object store error on s3://lake-a/p while reading: Generic S3 error: something new"
