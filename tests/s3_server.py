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
import tempfile
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
        self.log = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, ready_s: float = 30.0) -> MotoServer:
        # The server logs a line per request to stderr. A pipe nobody reads fills after ~64 KiB (about 760
        # requests) and then every request blocks in the log write: that, not werkzeug's threading (moto.server
        # serves threaded) nor keep-alive, stalled the 30-file scans and writes (docs/design/16-object-store.md).
        # A file takes any amount and keeps the tail for an error message.
        deadline = time.monotonic() + ready_s
        while True:
            self.log = tempfile.TemporaryFile()
            self.proc = subprocess.Popen(
                [self.python, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=subprocess.DEVNULL,
                stderr=self.log,
            )
            if self._ready(deadline):
                return self
            self.log.seek(0)
            err = self.log.read().decode()[-300:]
            # Started again on its port while a client still holds pooled connections to the stopped server:
            # their server ends linger (FIN_WAIT2) and keep the port until the client closes them, which it does
            # when it next tries them. Try again until then.
            if self.proc.returncode is None or "Address already in use" not in err or time.monotonic() > deadline:
                break
            self.log.close()
            time.sleep(0.5)
        if self.proc.returncode is not None:
            raise RuntimeError(f"moto.server exited {self.proc.returncode}: {err}")
        self.stop()
        raise RuntimeError(f"moto.server did not answer on {self.url} within {ready_s} s")

    def _ready(self, deadline: float) -> bool:
        """True once the server answers; False when it exited or the deadline passed."""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                urllib.request.urlopen(f"{self.url}/moto-api/", timeout=1).close()
                return True
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self.log is not None:
            self.log.close()
            self.log = None

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

    def save(self, bucket: str) -> dict[str, bytes]:
        """Every object of `bucket`, by key: moto keeps objects in memory, so a test that stops the server and starts
        it again puts them back with `load`, as a real store's disks would keep them."""
        import pyarrow.fs as pafs

        fs = self.filesystem()
        infos = fs.get_file_info(pafs.FileSelector(bucket, recursive=True))
        return {i.path: fs.open_input_stream(i.path).readall() for i in infos if i.type == pafs.FileType.File}

    def load(self, bucket: str, objects: dict[str, bytes]) -> None:
        self.create_bucket(bucket)
        fs = self.filesystem()
        for path, data in objects.items():
            with fs.open_output_stream(path) as out:
                out.write(data)

    def enforce_auth(self, actions: tuple[str, ...] = ("s3:*",)) -> tuple[str, str]:
        """From now on only signed requests with a key moto's IAM knows pass (others: InvalidAccessKeyId /
        SignatureDoesNotMatch / AccessDenied, as on AWS). Makes a user allowed `actions` (IAM action names) and
        returns its (key id, secret).
        Runs boto3 in moto's interpreter: our venv has no botocore (see the module docstring)."""
        script = f"""
import boto3, json, urllib.request
kw = dict(endpoint_url={self.url!r}, region_name={REGION!r}, aws_access_key_id="x", aws_secret_access_key="x")
iam = boto3.client("iam", **kw)
iam.create_user(UserName="lake")
doc = {{"Version": "2012-10-17", "Statement": [{{"Effect": "Allow", "Action": {list(actions)!r}, "Resource": "*"}}]}}
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


def upload(local: Path, lake) -> int:
    """Every file of the local lake (its spool aside: a collector's own) under the object-store lake `lake` (an
    S3Store or s3://bucket/prefix), same relative keys. Returns how many."""
    from gpuledger.store import open_store  # here: the server's own code above runs without our package

    store = open_store(lake)
    n = 0
    for f in sorted(local.rglob("*")):
        rel = f.relative_to(local)
        if f.is_file() and rel.parts[0] != "_spool":
            store.put(rel.as_posix(), f.read_bytes())
            n += 1
    return n


def download(lake, local: Path, keep=lambda rel: True) -> list[str]:
    """The reverse of `upload`: every object under the lake's prefix (an S3Store or s3://bucket/prefix) whose key
    relative to it `keep` accepts, written to the same relative path under `local`. Returns those relative keys,
    sorted. Every object of the prefix, as one LIST gives them (a compaction's inputs and records too)."""
    import obstore

    from gpuledger.store import open_store

    store = open_store(lake)
    prefix = f"{store.loc.key}/" if store.loc.key else ""
    listed = (meta["path"] for batch in obstore.list(store.client(), prefix=prefix or None) for meta in batch)
    rels = [rel for rel in sorted(key[len(prefix) :] for key in listed) if keep(rel)]
    for rel in rels:
        dst = local / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(store.get(rel))
    return rels
