"""AdmissionReview `admission.k8s.io/v1` in and out: pure functions, no I/O.

`parse` turns a request body into a Review or raises ReviewError with the HTTP status to answer (400 for what is
not a v1 AdmissionReview with a request and a uid, 413 for a body over the limit) and a message naming the field.
The responses follow the Kubernetes documentation's examples (tests compare them with the verbatim copies in
tests/fixtures/admission): the request's uid echoed; a denial with status.code 403 and a message (the API server
forces any code under 400 to 400); warnings of at most 120 characters each (longer ones may be truncated, and
past 4,096 characters in all they are dropped); a JSONPatch, base64-encoded, with patchType.
"""

from __future__ import annotations

import base64
import json
import re
import textwrap
from dataclasses import dataclass, field

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
# The API server caps an object at ~1.5 MiB in etcd and a request body at 3 MiB; a review carries object and
# oldObject, so twice that is the most a real one holds.
MAX_BODY_BYTES = 6 * 1024 * 1024
MAX_INT_DIGITS = 4300  # sys.get_int_max_str_digits()'s default: int() of a longer string raises
# A UTF-16 surrogate, as a JSON escape or as the bytes json.loads lets through: one left unpaired decodes to a
# string that cannot be encoded again, and would fail the response (a 500) and the audit's Parquet (every row of
# its segment). The API server never sends one (Go's encoder writes U+FFFD for invalid text).
# Two checks, each with a literal to find first: one alternation without it took 30 us of a 60 us parse.
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
WARNING_MAX_CHARS = 120
WARNINGS_TOTAL_CHARS = 4096


class ReviewError(ValueError):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Review:
    uid: str
    kind: str  # request.kind.kind: Pod, Job, ...
    group: str
    version: str
    namespace: str
    name: str  # "" on CREATE with generateName
    operation: str
    dry_run: bool
    obj: dict | None  # null for DELETE
    labels: dict = field(default_factory=dict)


def parse(body: bytes) -> Review:
    if len(body) > MAX_BODY_BYTES:
        raise ReviewError(413, f"request body of {len(body):,} bytes is over the {MAX_BODY_BYTES:,}-byte limit")
    try:
        doc = json.loads(body, parse_int=_json_int)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReviewError(400, f"request body is not JSON: {e}") from None
    except RecursionError:  # the parser recurses once per level: ~1,000 levels exhaust Python's stack limit
        raise ReviewError(400, "request body: JSON nested too deeply to read (no AdmissionReview is)") from None
    if b"\xed" in body or _ESCAPED_SURROGATE.search(body):  # rare (\xed also starts U+D000-D7FF): checked whole then
        try:
            json.dumps(doc, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise ReviewError(400, "request body: a string with an unpaired UTF-16 surrogate (not Unicode)") from None
        except RecursionError:
            raise ReviewError(400, "request body: JSON nested too deeply to read (no AdmissionReview is)") from None
    if not isinstance(doc, dict):
        raise ReviewError(400, "request body: expected an AdmissionReview object")
    if doc.get("apiVersion") != API_VERSION:
        raise ReviewError(400, f"apiVersion {doc.get('apiVersion')!r}: only {API_VERSION} is served")
    if doc.get("kind") != KIND:
        raise ReviewError(400, f"kind {doc.get('kind')!r}: expected {KIND}")
    req = doc.get("request")
    if not isinstance(req, dict):
        raise ReviewError(400, "request: missing (an AdmissionReview must carry a request)")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError(400, "request.uid: missing or not a string (it must be echoed in the response)")
    gvk = req.get("kind")
    if not isinstance(gvk, dict) or not isinstance(gvk.get("kind"), str):
        raise ReviewError(400, "request.kind: expected {group, version, kind}")
    op = req.get("operation", "CREATE")
    if op not in OPERATIONS:
        raise ReviewError(400, f"request.operation {op!r}: expected one of {', '.join(OPERATIONS)}")
    obj = req.get("object")
    if obj is not None and not isinstance(obj, dict):
        raise ReviewError(400, "request.object: expected an object or null")
    dry = req.get("dryRun", False)
    if dry is None:
        dry = False
    if not isinstance(dry, bool):
        raise ReviewError(400, f"request.dryRun {dry!r}: expected true or false")
    meta = (obj or {}).get("metadata") or {}
    labels = meta.get("labels") if isinstance(meta, dict) and isinstance(meta.get("labels"), dict) else {}
    return Review(
        uid=uid,
        kind=gvk["kind"],
        group=str(gvk.get("group") or ""),
        version=str(gvk.get("version") or ""),
        namespace=str(req.get("namespace") or ""),
        name=str(req.get("name") or (meta.get("name") if isinstance(meta, dict) else "") or ""),
        operation=op,
        dry_run=dry,
        obj=obj,
        labels=labels,
    )


def _json_int(digits: str) -> int:
    """A JSON integer, refused past Python's 4,300-digit limit with a 400 (int() would raise a ValueError that read
    as a bug); Kubernetes' own integers have at most 19 digits, and the workload's counts are bounded there."""
    if len(digits) > MAX_INT_DIGITS:
        raise ReviewError(400, f"request body: an integer of {len(digits):,} digits (no Kubernetes field takes one)")
    return int(digits)


def _review(response: dict) -> dict:
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def fit_warnings(warnings) -> list[str]:
    """Each at most 120 characters, and no more than 4,096 characters in all.

    A longer warning is wrapped at word boundaries into several, each continuation starting with an ellipsis,
    rather than cut: kubectl prints one "Warning:" line per entry, and the end of a message (which pods are idle,
    by how much a quota is exceeded) is what the user needs. A word longer than a line is cut.
    """
    out, total = [], 0
    for w in warnings:
        lines = textwrap.wrap(w, WARNING_MAX_CHARS, subsequent_indent="… ", break_on_hyphens=False) or [""]
        for line in lines:
            if total + len(line) > WARNINGS_TOTAL_CHARS:
                return out
            out.append(line)
            total += len(line)
    return out


def allow(uid: str, warnings=(), patch: list[dict] | None = None) -> dict:
    response: dict = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    w = fit_warnings(warnings)
    if w:
        response["warnings"] = w
    return _review(response)


def deny(uid: str, message: str, reason: str = "Forbidden", code: int = 403, warnings=()) -> dict:
    response: dict = {"uid": uid, "allowed": False, "status": {"code": code, "reason": reason, "message": message}}
    w = fit_warnings(warnings)
    if w:
        response["warnings"] = w
    return _review(response)
