"""Where the lake is: a local directory (a Path, as always) or a prefix of an S3 bucket (`s3://bucket/prefix`), and
how to reach an S3 one: the options polars, pyarrow and obstore take, a preflight that names what is wrong, and the
one write an object-store lake allows, a new key that is never overwritten.

Endpoint, region and credentials come the standard AWS ways, nothing of our own: AWS_ENDPOINT_URL_S3 /
AWS_ENDPOINT_URL (MinIO, Ceph), AWS_REGION / AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
AWS_SESSION_TOKEN, else the static keys, region and endpoint_url of the profile AWS_PROFILE names (default
`default`) in the shared files (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, ~/.aws/credentials and config); with
no key anywhere the Rust client's own chain is left to find one (web identity, i.e. IRSA, ECS, instance metadata).
A profile's role_arn, sso_* or credential_process are not read.

Every client gets a short connect timeout and bounded retries (the SDK defaults retry for minutes), so an unreachable
store is an error within seconds and the collector's spool, not a blocked thread, holds the data meanwhile.
"""

from __future__ import annotations

import configparser
import contextlib
import datetime as dt
import hashlib
import io
import itertools
import json
import os
import re
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gpuledger.errors import LakeError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# S3's bucket naming rules (general purpose buckets): 3-63 of lowercase letters, digits, '.', '-'.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
CONNECT_TIMEOUT = "2s"
REQUEST_TIMEOUT = "60s"  # a whole request: a day's merged file at loopback or LAN speed, well inside it
MAX_RETRIES = 3
RETRY_TIMEOUT_S = 10


@dataclass(frozen=True)
class S3Location:
    """`s3://bucket/prefix`: the lake's root, or (joined with `/`) a folder or object under it, as a Path would be."""

    bucket: str
    key: str = ""  # without a leading or trailing '/'

    def __truediv__(self, part: str) -> S3Location:
        return S3Location(self.bucket, f"{self.key}/{part}".strip("/") if self.key else str(part).strip("/"))

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}" if self.key else f"s3://{self.bucket}"

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    def resolve(self) -> S3Location:  # what the CLI prints for a local lake's root: already absolute
        return self


Location = Path | S3Location


def is_url(value: object) -> bool:
    return isinstance(value, str) and _SCHEME.match(value) is not None


def problem(value: str) -> str | None:
    """What is wrong with `value` as a lake location, or None (for config checks: the caller names the key)."""
    m = _SCHEME.match(value)
    if m is None:
        return None
    scheme = m.group(1)
    if scheme.lower() != "s3":
        return f"unknown scheme {scheme + '://'!r} in {value!r}: a lake is a local directory or s3://bucket/prefix"
    bucket = value[m.end() :].split("/", 1)[0]
    if not _BUCKET.match(bucket):
        return (
            f"{value!r} does not start with a valid S3 bucket name ({bucket!r}: 3-63 lowercase letters, digits, "
            "'.' or '-')"
        )
    if any(part in (".", "..") for part in value[m.end() :].split("/")[1:]):
        return f"{value!r}: '.' and '..' are not key segments of an S3 lake"
    return None


def parse(value: str | os.PathLike) -> Location:
    """A local path (any Path or path string, unchanged) or an S3Location; LakeError naming the value otherwise."""
    if isinstance(value, S3Location):
        return value
    if not is_url(value):
        return Path(value)
    bad = problem(value)
    if bad:
        raise LakeError(f"lake {bad}")
    bucket, _, key = value[_SCHEME.match(value).end() :].partition("/")
    return S3Location(bucket, key.strip("/"))


def default_spool_dir(lake: Location, writer: str, environ: Mapping[str, str] = os.environ) -> Path:
    """Where a collector's write-ahead log lives when collector.spool_dir is not set: beside a local lake as before
    (`<lake>/_spool/<node>`); for an object-store lake on this machine's disk, in the XDG state folder
    (`$XDG_STATE_HOME`, else ~/.local/state) under `gpuledger/spool/s3/<bucket>/<prefix>/<node>`: one spool per lake
    and node, so collectors of two lakes on one host never share one."""
    if isinstance(lake, Path):
        return lake / "_spool" / writer
    return local_state_dir(lake, "spool", environ) / writer


# -- the standard AWS chain ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AwsSettings:
    endpoint: str | None = None
    region: str | None = None
    key_id: str | None = None
    secret: str | None = None
    token: str | None = None


def _profile(environ: Mapping[str, str]) -> dict[str, str]:
    """The named profile's keys from the shared credentials and config files (credentials file first, as the SDKs
    read them); {} when the files are absent. LakeError when AWS_PROFILE names a profile neither file has."""
    name = environ.get("AWS_PROFILE") or environ.get("AWS_DEFAULT_PROFILE") or "default"
    home = Path(environ.get("HOME", "~")).expanduser()
    files = [
        (Path(environ.get("AWS_SHARED_CREDENTIALS_FILE") or home / ".aws" / "credentials"), name),
        (
            Path(environ.get("AWS_CONFIG_FILE") or home / ".aws" / "config"),
            name if name == "default" else f"profile {name}",
        ),
    ]
    out: dict[str, str] = {}
    found = False
    for path, section in files:
        cp = configparser.RawConfigParser()
        try:
            cp.read(path)
        except configparser.Error as e:
            raise LakeError(f"AWS shared file {path} cannot be read: {e.message.splitlines()[0]}") from None
        if cp.has_section(section):
            found = True
            for k, v in cp.items(section):
                out.setdefault(k, v.strip())
    if not found and (environ.get("AWS_PROFILE") or environ.get("AWS_DEFAULT_PROFILE")):
        raise LakeError(f"AWS_PROFILE {name!r} is in neither {files[0][0]} nor {files[1][0]}")
    return out


def aws_settings(environ: Mapping[str, str] = os.environ) -> AwsSettings:
    """Endpoint, region and keys by the SDKs' precedence: the environment, then the profile."""
    prof = _profile(environ)
    env_keys = environ.get("AWS_ACCESS_KEY_ID") and environ.get("AWS_SECRET_ACCESS_KEY")
    return AwsSettings(
        endpoint=environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL") or prof.get("endpoint_url"),
        region=environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or prof.get("region"),
        key_id=environ["AWS_ACCESS_KEY_ID"] if env_keys else prof.get("aws_access_key_id"),
        secret=environ["AWS_SECRET_ACCESS_KEY"] if env_keys else prof.get("aws_secret_access_key"),
        token=environ.get("AWS_SESSION_TOKEN") if env_keys else prof.get("aws_session_token"),
    )


def storage_options(environ: Mapping[str, str] = os.environ) -> dict[str, str | int]:
    """polars' `storage_options` (object_store's keys) for an S3 lake."""
    s = aws_settings(environ)
    opts: dict[str, str | int] = {
        "connect_timeout": CONNECT_TIMEOUT,
        "timeout": REQUEST_TIMEOUT,
        "max_retries": MAX_RETRIES,
    }
    for k, v in (
        ("aws_endpoint_url", s.endpoint),
        ("aws_region", s.region),
        ("aws_access_key_id", s.key_id),
        ("aws_secret_access_key", s.secret),
        ("aws_session_token", s.token),
    ):
        if v:
            opts[k] = v
    if s.endpoint and s.endpoint.startswith("http://"):
        opts["aws_allow_http"] = "true"
    return opts


def pyarrow_filesystem(environ: Mapping[str, str] = os.environ):
    """pyarrow's S3FileSystem with the same settings (for readers that take a pyarrow or fsspec filesystem)."""
    import pyarrow.fs as pafs

    s = aws_settings(environ)
    kw: dict = dict(
        connect_timeout=float(CONNECT_TIMEOUT.removesuffix("s")),
        request_timeout=float(REQUEST_TIMEOUT.removesuffix("s")),
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=MAX_RETRIES + 1),
    )
    if s.endpoint:
        scheme, _, host = s.endpoint.partition("://")
        kw |= dict(endpoint_override=host.rstrip("/"), scheme=scheme)
    if s.region:
        kw["region"] = s.region
    if s.key_id and s.secret:
        kw |= dict(access_key=s.key_id, secret_key=s.secret, session_token=s.token)
    return pafs.S3FileSystem(**kw)


_stores: dict[tuple, object] = {}  # (pid, bucket, settings) -> S3Store


def object_store(loc: S3Location, environ: Mapping[str, str] = os.environ):
    """obstore's S3Store rooted at the lake's bucket (keys are full keys): the client for conditional writes.

    One per bucket and settings in a process, kept: building one (and its connection pool) cost 8 ms, 73 times in
    an incremental analytics run (benchmarks/objectstore_analytics.py). Per process id, as a forked child must not
    use its parent's connections."""
    s = aws_settings(environ)
    key = (os.getpid(), loc.bucket, s)
    if key not in _stores:
        _stores[key] = _new_store(loc.bucket, s)
    return _stores[key]


def _new_store(bucket: str, s: AwsSettings):
    from obstore.store import S3Store

    config = {
        k: v
        for k, v in (
            ("endpoint", s.endpoint),
            ("region", s.region or "us-east-1"),
            ("access_key_id", s.key_id),
            ("secret_access_key", s.secret),
            ("session_token", s.token),
        )
        if v
    }
    client = {"connect_timeout": CONNECT_TIMEOUT, "timeout": REQUEST_TIMEOUT}
    if s.endpoint and s.endpoint.startswith("http://"):
        client["allow_http"] = True
    retry = {
        "max_retries": MAX_RETRIES,
        "retry_timeout": dt.timedelta(seconds=RETRY_TIMEOUT_S),
        "backoff": {"init_backoff": dt.timedelta(milliseconds=100), "max_backoff": dt.timedelta(seconds=2), "base": 2},
    }
    return S3Store(bucket, config=config, client_options=client, retry_config=retry)


# -- errors, named ------------------------------------------------------------------------------------------------
class StoreUnreachable(LakeError):
    """The endpoint did not answer: may pass by itself (a store restarting, a network partition), unlike bad
    credentials, a missing bucket or a refused write."""


_CODE = re.compile(r"<Code>([^<]+)</Code>")
_BATCH_CODE = re.compile(r"\(code: (\w+)")  # a DeleteObjects answer's per-key error, as obstore words it
_BAD_CREDENTIALS = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "TokenRefreshRequired",
    "InvalidClientTokenId",
    "AuthorizationHeaderMalformed",
}
_UNREACHABLE = (
    "error sending request",
    "connection refused",
    "dns error",
    "timed out",
    "connect error",
    # The endpoint went away in the middle of an answer (a LIST's body cut off by a store restarting).
    "response body error",
    "connection reset",
    "connection closed",
    "broken pipe",
    "incomplete message",
)


def explain(e: Exception, where: S3Location, doing: str, environ: Mapping[str, str] = os.environ) -> LakeError:
    """One line naming which problem an object-store failure is: endpoint unreachable, bad credentials, missing
    bucket, access denied (no permission to write, when `doing` is a write), else the store's own first line."""
    text = str(e)
    code = m.group(1) if (m := _CODE.search(text) or _BATCH_CODE.search(text)) else None
    endpoint = aws_settings(environ).endpoint or "the AWS endpoint"
    if code in _BAD_CREDENTIALS:
        s = aws_settings(environ)
        who = f"access key {s.key_id!r}" if s.key_id else "the credentials found"
        return LakeError(f"object store refused {who} for {where} ({code}): bad credentials, while {doing}")
    if code == "NoSuchBucket":
        return LakeError(f"bucket {where.bucket!r} does not exist at {endpoint} ({where}), while {doing}")
    if code in ("AccessDenied", "AllAccessDisabled"):
        what = (
            "no permission to write to"
            if doing.startswith("writ")
            else "no permission to delete"
            if doing.startswith("delet")
            else "access denied to"
        )
        return LakeError(f"{what} {where} ({code}), while {doing}")
    low = text.lower()
    if code is None and any(s in low for s in _UNREACHABLE):
        return StoreUnreachable(f"object store endpoint {endpoint} unreachable, while {doing} {where}")
    first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
    return LakeError(f"object store error on {where} while {doing}: {first[:300]}")


# What the clients that read and write through object_store (polars' scans and sinks, obstore) put in the text of a
# failure they pass up as their own exception type (ConnectionRefusedError, ComputeError, OSError...).
_STORE_TEXT = ("object-store error", "Generic S3 error", "object_store", "error sending request")


@contextlib.contextmanager
def store_errors(lake: Location) -> Iterator[None]:
    """A failure of an object-store lake surfacing from inside polars or obstore during the block (the store went
    away mid-run, credentials expired) re-raised as explain()'s one-line LakeError; any other exception, and
    anything on a local lake, stays what it is."""
    try:
        yield
    except LakeError:
        raise
    except Exception as e:
        if isinstance(lake, S3Location) and any(t in str(e) for t in _STORE_TEXT):
            raise explain(e, lake, "reading or writing") from None
        raise


def preflight(loc: S3Location, write_probe: str | None = None, environ: Mapping[str, str] = os.environ) -> None:
    """Check the lake is reachable and readable (one LIST), and with `write_probe` writable: a PUT of
    `<lake>/_state/probe/<write_probe>` (outside every table's prefix, so no reader lists it; overwritten by each
    start of that writer, never deleted: a collector needs no delete permission). LakeError naming the problem."""
    import obstore

    try:
        store = object_store(loc, environ)
    except (ValueError, obstore.exceptions.BaseError) as e:
        raise LakeError(f"object store settings for {loc} are not usable: {str(e).splitlines()[0]}") from None
    try:
        next(iter(obstore.list(store, prefix=loc.key or None, chunk_size=1)), None)
    except (obstore.exceptions.BaseError, OSError) as e:
        raise explain(e, loc, "listing the lake", environ) from None
    if write_probe is not None:
        probe = loc / "_state" / "probe" / write_probe
        try:
            obstore.put(store, probe.key, b"", use_multipart=False)
        except (obstore.exceptions.BaseError, OSError) as e:
            raise explain(e, loc, "writing a probe object", environ) from None


def put_new(store, obj: S3Location, data: bytes, environ: Mapping[str, str] = os.environ) -> None:
    """Create `obj` with `data` unless it exists (If-None-Match: *, one PUT, so a reader sees it whole or not at
    all). A key that exists with the same bytes is this write done before (a flush retried after a crash or a lost
    answer): done. With other bytes it is another writer's: LakeError, never an overwrite."""
    import obstore

    try:
        obstore.put(store, obj.key, data, mode="create", use_multipart=False)
        return
    except obstore.exceptions.AlreadyExistsError:
        pass
    except (obstore.exceptions.BaseError, OSError) as e:
        raise explain(e, obj, "writing", environ) from None
    try:
        have = obstore.get(store, obj.key).bytes()
    except (obstore.exceptions.BaseError, OSError) as e:
        raise explain(e, obj, "reading back an existing object", environ) from None
    if hashlib.sha256(bytes(have)).digest() != hashlib.sha256(data).digest():
        raise LakeError(
            f"{obj} already exists with other contents: another writer wrote this key (two collectors with "
            "one collector.node?); not overwritten"
        )


def parquet_bytes(df, **kw) -> bytes:
    """`df` (a polars DataFrame) as the bytes of one Parquet file."""
    buf = io.BytesIO()
    df.write_parquet(buf, **kw)
    return buf.getvalue()


# A compaction's record, in the day's folder beside the objects it merged (gpuledger/compaction_s3.py):
# {"inputs": [names], "output": name}. '~' sorts after '-', so a LIST reaches it after every `part-` object of the day.
MERGE_RECORD = re.compile(r"^part~merged-[0-9a-f]{16}\.json$")
_records: dict[str, dict] = {}  # key -> record: a record is never rewritten (content-addressed, If-None-Match)
RELISTS = 5


def live(names: set[str], records: list[dict]) -> set[str] | None:
    """The Parquet objects of one day a reader reads, given the names one LIST found and the day's merge records:
    every name less the inputs of each record whose output is there (or itself merged again since). None when the
    LIST is not one moment of the compaction: an input already deleted while its output was not yet listed (a LIST
    of many pages is not a snapshot): list again. A record whose output is absent and inputs all there is a merge
    not yet published (or a compactor that died before it): its inputs are read."""
    retired: set[str] = set()
    settled: list[dict] = []
    changed = True
    while changed:  # a day merged twice: the first output is an input of the second
        changed = False
        for r in records:
            if r not in settled and (r["output"] in names or r["output"] in retired):
                settled.append(r)
                retired |= set(r["inputs"])
                changed = True
    for r in records:
        if r not in settled and not set(r["inputs"]) <= names | retired:
            return None
    return names - retired


def glob(folder: S3Location, pattern: str, environ: Mapping[str, str] = os.environ) -> list[S3Location]:
    """The objects under `folder` whose key below it matches `pattern` segment by segment (`date=*/*.parquet`: a
    '*' never crosses a '/'), sorted, each day's less what a compaction merged (`live`). One LIST of the folder's
    prefix (again when it caught a compaction mid-way); LakeError naming the problem."""
    return list(listing(folder, pattern, environ))


def listing(folder: S3Location, pattern: str, environ: Mapping[str, str] = os.environ) -> dict[S3Location, tuple]:
    """glob's objects, each with its (ETag, size) from the same LIST: what changes when the object is written again
    (the analytics' "has this file changed since the last run" without a HEAD per object)."""
    import obstore

    depth = pattern.count("/") + 1
    store = object_store(folder, environ)
    # The pattern's leading folders without a wildcard narrow the LIST (`date=2026-11-02/*.parquet`: that day's
    # objects and merge records, not the table's year of them).
    fixed = list(itertools.takewhile(lambda seg: not any(c in seg for c in "*?["), pattern.split("/")[:-1]))
    prefix = "/".join([folder.key, *fixed]) + "/"
    for _ in range(RELISTS):
        try:
            meta = {
                o["path"]: (o["e_tag"] or str(o["last_modified"]), o["size"])
                for batch in obstore.list(store, prefix=prefix)
                for o in batch
            }
        except (obstore.exceptions.BaseError, OSError) as e:
            raise explain(e, folder, "listing", environ) from None
        listed = list(meta)
        days: dict[str, tuple[set[str], list[dict]]] = {}
        for key in listed:
            rel = PurePosixPath(key[len(folder.key) + 1 :])
            day, name = str(rel.parent), rel.name
            if len(rel.parts) == depth and rel.match(pattern):
                days.setdefault(day, (set(), []))[0].add(name)
            elif len(rel.parts) == depth and MERGE_RECORD.match(name):
                days.setdefault(day, (set(), []))[1].append(
                    _record(store, (folder if day == "." else folder / day) / name, environ)
                )
        out, consistent = [], True
        for day, (names, records) in days.items():
            keep = live(names, records)
            if keep is None:
                consistent = False
                break
            out += [(folder if day == "." else folder / day) / n for n in keep]
        if consistent:
            return {o: meta[o.key] for o in sorted(out, key=lambda o: o.key)}
    raise LakeError(f"{folder}: {RELISTS} listings in a row each caught a compaction mid-way; try again")


def _record(store, obj: S3Location, environ: Mapping[str, str]) -> dict:
    if obj.key not in _records:
        data = read_bytes(obj, environ)
        if data is None:
            raise LakeError(f"{obj}: a merge record listed a moment ago is gone (records are never deleted)")
        _records[obj.key] = json.loads(data)
    return _records[obj.key]


def read_bytes(obj: S3Location, environ: Mapping[str, str] = os.environ) -> bytes | None:
    """The object's bytes, or None when there is no such key; LakeError naming any other problem."""
    import obstore

    try:
        return bytes(obstore.get(object_store(obj, environ), obj.key).bytes())
    except FileNotFoundError:
        return None
    except (obstore.exceptions.BaseError, OSError) as e:
        raise explain(e, obj, "reading", environ) from None


def write_bytes(obj: S3Location, data: bytes, environ: Mapping[str, str] = os.environ) -> None:
    """Put (or replace) a small state object in one PUT: readers see the old or the new bytes, never a mix. Only
    for state one writer owns (a simulated fleet's position); table files go through put_new."""
    import obstore

    try:
        obstore.put(object_store(obj, environ), obj.key, data, use_multipart=False)
    except (obstore.exceptions.BaseError, OSError) as e:
        raise explain(e, obj, "writing", environ) from None


def put_many(
    objects: list[tuple[S3Location, bytes]], workers: int = 8, environ: Mapping[str, str] = os.environ
) -> None:
    """Put (or replace) each object in one PUT, several at a time: a reader sees each old or new, whole. For keys one
    writer owns (the analytics' tables, under their lease); a collector's files go through put_new."""
    import obstore

    if not objects:
        return
    store = object_store(objects[0][0], environ)

    def one(item):
        obj, data = item
        try:
            obstore.put(store, obj.key, data, use_multipart=False)
        except (obstore.exceptions.BaseError, OSError) as e:
            raise explain(e, obj, "writing", environ) from None

    with ThreadPoolExecutor(min(workers, len(objects))) as pool:
        list(pool.map(one, objects))


def delete_many(objects: list[S3Location], environ: Mapping[str, str] = os.environ) -> None:
    """Delete these keys (a key already gone is fine: S3's DELETE of a missing key succeeds)."""
    import obstore

    if not objects:
        return
    try:
        obstore.delete(object_store(objects[0], environ), [o.key for o in objects])
    except FileNotFoundError:
        pass
    except (obstore.exceptions.BaseError, OSError) as e:
        raise explain(e, objects[0], "deleting", environ) from None


def local_state_dir(lake: S3Location, what: str, environ: Mapping[str, str] = os.environ) -> Path:
    """A folder on this machine's disk for an object-store lake's `what` (`spool`, `analytics`): under the XDG state
    folder (`$XDG_STATE_HOME`, else ~/.local/state), `gpuledger/<what>/s3/<bucket>/<prefix>`, one per lake."""
    state = Path(environ.get("XDG_STATE_HOME") or Path(environ.get("HOME", "~"), ".local", "state")).expanduser()
    return state / "gpuledger" / what / "s3" / lake.bucket / lake.key
