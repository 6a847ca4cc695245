"""The AWS settings of an object-store lake without a server (gpuledger/store/s3.py): they come from the environment
or the shared files' profile as the SDKs read them, and a store's failure is named by what it is. (Lake locations
of either kind: tests/core/test_store_location.py.)"""

from __future__ import annotations

import pytest

from gpuledger.errors import LakeError
from gpuledger.store import s3 as store_s3
from gpuledger.store.s3 import S3Location


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
