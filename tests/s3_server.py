"""An S3-protocol server for tests: moto in server mode, started as its own process on loopback, so the real clients
(polars' object_store, pyarrow's S3FileSystem, DuckDB through an fsspec filesystem) talk real HTTP to it, signatures,
listing and multipart included; never an in-process patch of a client.

moto runs from a venv of its own (`.venv-moto`, made here when absent, as tests/deploy does for checkov): moto
needs botocore, which pins python-dateutil<3, while our kubernetes (37) needs python-dateutil>=3, so the two cannot
share our venv. Only the server needs moto; our clients need no botocore at all.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

MOTO = "5.2.5"
ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-moto"
REGION = "us-east-1"
# moto checks no credentials until told to (enforce_auth); any pair works before that.
KEY_ID, SECRET = "testing", "testing"


def moto_python() -> str:
    """The interpreter that runs moto: ours when moto is importable here, else .venv-moto's, made when absent.
    Raises RuntimeError naming what failed (the fixture turns it into a skip)."""
    try:
        import moto.server  # noqa: F401

        return sys.executable
    except ImportError:
        pass
    exe = VENV / "bin" / "python"
    probe = [str(exe), "-c", "import moto.server, boto3"]
    if exe.exists() and subprocess.run(probe, capture_output=True, timeout=60).returncode == 0:
        return str(exe)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True, timeout=120)
    r = subprocess.run(
        [str(VENV / "bin" / "pip"), "install", "-q", f"moto[server]=={MOTO}"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if r.returncode != 0:
        raise RuntimeError(f"cannot install moto[server]=={MOTO} into {VENV}: {r.stderr.strip().splitlines()[-1:]}")
    return str(exe)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MotoServer:
    """`python -m moto.server` on 127.0.0.1:<port> in a child process; stop() and start() again keep the port (and
    lose the objects: moto keeps them in memory), for tests of a store that goes away mid-run."""

    def __init__(self, python: str | None = None, port: int | None = None):
        self.python = python or moto_python()
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, ready_s: float = 30.0) -> MotoServer:
        self.proc = subprocess.Popen(
            [self.python, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + ready_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"moto.server exited {self.proc.returncode}: {self.proc.stderr.read().decode()[-300:]}"
                )
            try:
                urllib.request.urlopen(f"{self.url}/moto-api/", timeout=1).close()
                return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto.server did not answer on {self.url} within {ready_s} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def env(self) -> dict[str, str]:
        """The standard AWS variables that point any client at this server."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
        }

    def filesystem(self, **kw):
        """pyarrow's S3FileSystem on this server (kw: access_key, secret_key, ... override)."""
        import pyarrow.fs as pafs

        args = dict(endpoint_override=self.url, scheme="http", access_key=KEY_ID, secret_key=SECRET, region=REGION)
        return pafs.S3FileSystem(**(args | kw))

    def create_bucket(self, name: str) -> None:
        self.filesystem(allow_bucket_creation=True).create_dir(name)

    def enforce_auth(self) -> tuple[str, str]:
        """From now on only signed requests with a key moto's IAM knows pass (others: InvalidAccessKeyId /
        SignatureDoesNotMatch / AccessDenied, as on AWS). Makes a user allowed s3:* and returns its (key id, secret).
        Runs boto3 in moto's interpreter: our venv has no botocore (see the module docstring)."""
        script = f"""
import boto3, json, urllib.request
kw = dict(endpoint_url={self.url!r}, region_name={REGION!r}, aws_access_key_id="x", aws_secret_access_key="x")
iam = boto3.client("iam", **kw)
iam.create_user(UserName="lake")
doc = {{"Version": "2012-10-17", "Statement": [{{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}}]}}
iam.put_user_policy(UserName="lake", PolicyName="s3", PolicyDocument=json.dumps(doc))
k = iam.create_access_key(UserName="lake")["AccessKey"]
req = urllib.request.Request({self.url!r} + "/moto-api/reset-auth", data=b"0", method="POST",
                             headers={{"Content-Type": "text/plain"}})  # form-encoded bodies never reach it
urllib.request.urlopen(req).close()
print(json.dumps([k["AccessKeyId"], k["SecretAccessKey"]]))
"""
        r = subprocess.run([self.python, "-c", script], capture_output=True, text=True, timeout=60, env=os.environ)
        if r.returncode != 0:
            raise RuntimeError(f"enforce_auth failed: {r.stderr.strip()[-300:]}")
        key_id, secret = json.loads(r.stdout)
        return key_id, secret


@dataclass(frozen=True)
class S3:
    """A bucket on a running server, with the standard AWS variables that reach it."""

    endpoint_url: str
    bucket: str
    env: dict[str, str]  # AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION (+ DEFAULT_REGION)
    server: MotoServer
