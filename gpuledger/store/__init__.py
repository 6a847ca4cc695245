"""Where a lake's bytes live, behind one interface (gpuledger.store.base.Store): a folder on this machine
(gpuledger.store.local) or a prefix of an S3 bucket (gpuledger.store.s3). `open_store` is the one place that reads
a lake's location and picks the kind; `problem` is the config check of the same text."""

from __future__ import annotations

import os
import re

from gpuledger.errors import LakeError
from gpuledger.store.base import Merge, Staging, Stamp, Store, StoreUnreachable

__all__ = ["Merge", "Stamp", "Staging", "Store", "StoreUnreachable", "LakeRef", "open_store", "problem", "is_url"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# S3's bucket naming rules (general purpose buckets): 3-63 of lowercase letters, digits, '.', '-'.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")

# What a caller may hand a function that opens the lake itself: a Store, or its location as a person gives it.
LakeRef = Store | str | os.PathLike


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


def open_store(value: LakeRef) -> Store:
    """The Store at `value`: a Store (unchanged), `s3://bucket/prefix`, or a local folder (any path). LakeError
    naming the value when it is neither."""
    if isinstance(value, Store):
        return value
    if not is_url(value):
        from gpuledger.store.local import LocalStore

        return LocalStore(value)
    bad = problem(value)
    if bad:
        raise LakeError(f"lake {bad}")
    from gpuledger.store.s3 import S3Location, S3Store

    bucket, _, key = value[_SCHEME.match(value).end() :].partition("/")
    return S3Store(S3Location(bucket, key.strip("/")))
