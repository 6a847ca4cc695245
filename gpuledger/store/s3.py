"""A lake under a prefix of an S3 bucket (`s3://bucket/prefix`): the S3Store, and how to reach the bucket (the
options polars, pyarrow and obstore take, a preflight that names what is wrong). The only module, with the rest of
gpuledger.store, that imports obstore.

Endpoint, region and credentials come the standard AWS ways, nothing of our own: AWS_ENDPOINT_URL_S3 /
AWS_ENDPOINT_URL (MinIO, Ceph), AWS_REGION / AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
AWS_SESSION_TOKEN, else the static keys, region and endpoint_url of the profile AWS_PROFILE names (default
`default`) in the shared files (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, ~/.aws/credentials and config); with
no key anywhere the Rust client's own chain is left to find one (web identity, i.e. IRSA, ECS, instance metadata).
A profile's role_arn, sso_* or credential_process are not read.

Why a profile chain of our own: the clients we keep (obstore for conditional PUTs, polars' object_store reads) read
the environment's AWS_* variables but not the shared files; the one library resolver that does (botocore, through
obstore.auth.boto3) would add boto3, whose python-dateutil<3 pin clashes with the kubernetes client's (.ci/run keeps
moto in a venv of its own for that reason).

Every client gets a short connect timeout and bounded retries (the SDK defaults retry for minutes), so an unreachable
store is an error within seconds and the collector's spool, not a blocked thread, holds the data meanwhile.
"""

from __future__ import annotations

import configparser
import contextlib
import datetime as dt
import hashlib
import itertools
import json
import os
import re
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import obstore

from gpuledger.errors import LakeError
from gpuledger.store.base import QUARANTINE, Merge, Staging, Stamp, Store, StoreUnreachable, parquet_bytes

CONNECT_TIMEOUT = "2s"
REQUEST_TIMEOUT = "60s"  # a whole request: a day's merged file at loopback or LAN speed, well inside it
MAX_RETRIES = 3
RETRY_TIMEOUT_S = 10


@dataclass(frozen=True)
class S3Location:
    """`s3://bucket/prefix`: the lake's root, or (joined with `/`) a folder or object under it."""

    bucket: str
    key: str = ""  # without a leading or trailing '/'

    def __truediv__(self, part: str) -> S3Location:
        return S3Location(self.bucket, f"{self.key}/{part}".strip("/") if self.key else str(part).strip("/"))

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}" if self.key else f"s3://{self.bucket}"

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]


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
    bucket, access denied (no permission to write, when `doing` is a write), else the store's own first line.

    By obstore's exception type first. S3 answers both bad credentials and a refused operation with 403 (both
    PermissionDeniedError), and a missing bucket and a missing key with 404: the error code in the body tells them
    apart. An endpoint that does not answer has no type of its own (a GenericError whose text is the HTTP client's
    words, pinned by tests/objectstore/test_s3_clients.py), nor has a failure polars passes up from a scan."""
    text = str(e)
    code = m.group(1) if (m := _CODE.search(text) or _BATCH_CODE.search(text)) else None
    endpoint = aws_settings(environ).endpoint or "the AWS endpoint"
    denied = isinstance(e, (obstore.exceptions.PermissionDeniedError, obstore.exceptions.UnauthenticatedError))
    if code in _BAD_CREDENTIALS or (isinstance(e, obstore.exceptions.UnauthenticatedError) and code is None):
        s = aws_settings(environ)
        who = f"access key {s.key_id!r}" if s.key_id else "the credentials found"
        why = code or "unauthenticated"
        return LakeError(f"object store refused {who} for {where} ({why}): bad credentials, while {doing}")
    if code == "NoSuchBucket":
        return LakeError(f"bucket {where.bucket!r} does not exist at {endpoint} ({where}), while {doing}")
    if denied or code in ("AccessDenied", "AllAccessDisabled"):
        what = (
            "no permission to write to"
            if doing.startswith("writ")
            else "no permission to delete"
            if doing.startswith("delet")
            else "access denied to"
        )
        return LakeError(f"{what} {where} ({code or 'AccessDenied'}), while {doing}")
    low = text.lower()
    if code is None and any(s in low for s in _UNREACHABLE):
        return StoreUnreachable(f"object store endpoint {endpoint} unreachable, while {doing} {where}")
    first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
    return LakeError(f"object store error on {where} while {doing}: {first[:300]}")


# What the clients that read and write through object_store (polars' scans and sinks, obstore) put in the text of a
# failure they pass up as their own exception type (ConnectionRefusedError, ComputeError, OSError...).
_STORE_TEXT = ("object-store error", "Generic S3 error", "object_store", "error sending request")


@contextlib.contextmanager
def store_errors(lake: S3Location, doing: str) -> Iterator[None]:
    """A failure of the store surfacing from inside polars or obstore during the block (the store went away mid-run,
    credentials expired) re-raised as explain()'s one-line LakeError; any other exception stays what it is. polars
    raises its own types (ComputeError, OSError...) with object_store's words in the text: the only way to tell."""
    try:
        yield
    except LakeError:
        raise
    except obstore.exceptions.BaseError as e:
        raise explain(e, lake, doing) from None
    except Exception as e:
        if any(t in str(e) for t in _STORE_TEXT):
            raise explain(e, lake, doing) from None
        raise


def preflight(loc: S3Location, write_probe: str | None = None, environ: Mapping[str, str] = os.environ) -> None:
    """Check the lake is reachable and readable (one LIST), and with `write_probe` writable: a PUT of
    `<lake>/_state/probe/<write_probe>` (outside every table's prefix, so no reader lists it; overwritten by each
    start of that writer, never deleted: a collector needs no delete permission). LakeError naming the problem."""
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
    try:
        return bytes(obstore.get(object_store(obj, environ), obj.key).bytes())
    except FileNotFoundError:
        return None
    except (obstore.exceptions.BaseError, OSError) as e:
        raise explain(e, obj, "reading", environ) from None


def write_bytes(obj: S3Location, data: bytes, environ: Mapping[str, str] = os.environ) -> None:
    """Put (or replace) a small state object in one PUT: readers see the old or the new bytes, never a mix. Only
    for state one writer owns (a simulated fleet's position); table files go through put_new."""
    try:
        obstore.put(object_store(obj, environ), obj.key, data, use_multipart=False)
    except (obstore.exceptions.BaseError, OSError) as e:
        raise explain(e, obj, "writing", environ) from None


def put_many(
    objects: list[tuple[S3Location, bytes]], workers: int = 8, environ: Mapping[str, str] = os.environ
) -> None:
    """Put (or replace) each object in one PUT, several at a time: a reader sees each old or new, whole. For keys one
    writer owns (the analytics' tables, under their lease); a collector's files go through put_new."""
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
    if not objects:
        return
    try:
        obstore.delete(object_store(objects[0], environ), [o.key for o in objects])
    except FileNotFoundError:
        pass
    except (obstore.exceptions.BaseError, OSError) as e:
        raise explain(e, objects[0], "deleting", environ) from None


def machine_state_root(environ: Mapping[str, str] | None = None) -> Path:
    from gpuledger.store.local import machine_state_root as root

    return root(environ)


class S3Store(Store):
    """A lake under `s3://bucket/prefix`. Files are objects PUT whole; a collector's never overwritten
    (If-None-Match); readers need no lock (objects are never replaced in place, and a compaction retires its inputs
    only well after its merged object: gpuledger.store.s3_compaction); the analytics' state is a snapshot committed
    under a lease (gpuledger.store.s3_state)."""

    def __init__(self, loc: S3Location, environ: Mapping[str, str] | None = None):
        self.loc = loc
        self._environ = environ  # None: this process's environment when used (a Dask worker uses its own)

    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def __str__(self) -> str:
        return str(self.loc)

    def url(self, key: str = "") -> str:
        return str(self.loc / key) if key else str(self.loc)

    @property
    def storage_options(self) -> dict:  # type: ignore[override]
        return storage_options(self.environ)

    def client(self):
        return object_store(self.loc, self.environ)

    def views_script_notes(self) -> list[str]:
        s = aws_settings(self.environ)
        endpoint = (s.endpoint or "").split("://")[-1].rstrip("/")
        return [
            "-- An object-store lake: DuckDB reads it with httpfs and an S3 secret (keys left out here), e.g.",
            "--   INSTALL httpfs; LOAD httpfs;",
            "--   CREATE SECRET (TYPE s3, KEY_ID '...', SECRET '...'"
            + (f", REGION '{s.region}'" if s.region else "")
            + (f", ENDPOINT '{endpoint}', URL_STYLE 'path'" if endpoint else "")
            + (", USE_SSL false" if (s.endpoint or "").startswith("http://") else "")
            + ");",
            "-- A glob does not follow compaction's merge records: a query in the moment between a merged object",
            "-- and its inputs' deletion counts that day twice (gpuledger sql does not: it lists the lake itself).",
        ]

    # -- checks ------------------------------------------------------------------------------------------------
    def require(self) -> None:
        preflight(self.loc, environ=self.environ)

    def prepare_writer(self, probe_name: str) -> None:
        preflight(self.loc, write_probe=probe_name, environ=self.environ)

    # -- listing and bytes -------------------------------------------------------------------------------------
    def files(self, folder: str, pattern: str) -> dict[str, Stamp]:
        base = self.loc / folder if folder else self.loc
        cut = len(self.loc.key) + 1 if self.loc.key else 0
        return {obj.key[cut:]: stamp for obj, stamp in listing(base, pattern, self.environ).items()}

    def get(self, key: str) -> bytes | None:
        return read_bytes(self.loc / key, self.environ)

    def put(self, key: str, data: bytes) -> None:
        write_bytes(self.loc / key, data, self.environ)

    def put_new(self, key: str, data: bytes) -> None:
        put_new(self.client(), self.loc / key, data, self.environ)

    def put_many(self, items: list[tuple[str, bytes]], workers: int = 8) -> None:
        put_many([(self.loc / key, data) for key, data in items], workers, self.environ)

    def delete(self, keys: list[str]) -> None:
        delete_many([self.loc / key for key in keys], self.environ)

    def set_aside(self, key: str) -> str:
        dest_key = f"{QUARANTINE}/{key}"
        src, dest = self.loc / key, self.loc / dest_key
        try:
            obstore.copy(self.client(), src.key, dest.key)
        except FileNotFoundError:
            return dest_key  # set aside already (by another run), or gone
        except (obstore.exceptions.BaseError, OSError) as e:
            raise explain(e, dest, "writing", self.environ) from None
        self.delete([key])
        return dest_key

    def version(self, key: str) -> tuple:
        try:
            return (obstore.head(self.client(), (self.loc / key).key)["e_tag"],)
        except FileNotFoundError:
            return ()
        except (obstore.exceptions.BaseError, OSError) as e:
            raise explain(e, self.loc / key, "reading", self.environ) from None

    # -- exclusion and state -----------------------------------------------------------------------------------
    def reading(self) -> contextlib.AbstractContextManager[None]:
        # Nothing to hold: an object is never replaced in place, and a merged day's inputs outlive any read.
        return contextlib.nullcontext()

    def rewriting(self, lease_s: float = 0.0) -> contextlib.AbstractContextManager[None]:
        # A compaction needs no turn here (its inputs are retired minutes after the merge, so an analytics run that
        # listed them still reads them); an analytics run takes its lease in state().
        return contextlib.nullcontext()

    def state(self, what: str, lease_s: float) -> contextlib.AbstractContextManager[Path]:
        from gpuledger.store import s3_state

        return s3_state.session(self, what, lease_s)

    def state_folder(self, what: str) -> Path:
        return self.machine_folder(what)

    def state_version(self, what: str) -> tuple:
        # A run commits its state by one PUT of the manifest: its ETag changes with every run (the lease beside it
        # changes while a run works: not a new state).
        return self.version(f"_state/{what}/manifest.json")

    def machine_folder(self, what: str, environ: Mapping[str, str] | None = None) -> Path:
        root = machine_state_root(self.environ if environ is None else environ)
        return root / "gpuledger" / what / "s3" / self.loc.bucket / self.loc.key

    # -- compaction and other writers ----------------------------------------------------------------------------
    def merge(self, merge: Merge, rows) -> bool:
        from gpuledger.store import s3_compaction

        return s3_compaction.merge(self, merge, rows)

    def finish_merges(self) -> tuple[int, int]:
        from gpuledger.store import s3_compaction

        return 0, s3_compaction.retire(self)

    def staging(self, run_id: str) -> Staging:
        return S3Staging(self, run_id)

    def errors(self, doing: str = "reading or writing") -> contextlib.AbstractContextManager[None]:
        return store_errors(self.loc, doing)


class S3Staging(Staging):
    """Nothing is staged in the bucket: a worker returns its files' (key, Parquet bytes), and the client PUTs a
    chunk's once every task of it succeeded."""

    def __init__(self, store: S3Store, run_id: str):
        self.store = store
        self.probe_key = f"_state/probe/dask-{run_id}/probe"  # only the workers' probe

    def probe(self, token: str) -> str:
        self.store.put(self.probe_key, token.encode())
        return self.probe_key

    def stage(self, key: str, frame) -> tuple[str, bytes]:
        return key, parquet_bytes(frame)

    def publish(self, handles: list) -> None:
        self.store.put_many(list(handles))

    def clean(self) -> None:
        with contextlib.suppress(LakeError):
            self.store.delete([self.probe_key])
