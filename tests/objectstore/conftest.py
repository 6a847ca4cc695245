"""An S3-protocol server (moto, its own process on loopback) and a bucket on it, for the object-store lake's tests."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from s3_server import MotoServer


@dataclass(frozen=True)
class S3:
    endpoint_url: str
    bucket: str
    env: dict[str, str]  # AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION (+ DEFAULT_REGION)
    server: MotoServer


@pytest.fixture(scope="session")
def moto_server():
    try:
        server = MotoServer().start()
    except (RuntimeError, OSError) as e:
        pytest.skip(f"no S3 server: {e}")
    yield server
    server.stop()


@pytest.fixture
def s3(moto_server, monkeypatch) -> S3:
    """A fresh bucket on the session's server, with the standard AWS variables set in the environment."""
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    moto_server.create_bucket(bucket)
    env = moto_server.env()
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return S3(moto_server.url, bucket, env, moto_server)
