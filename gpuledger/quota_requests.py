"""Quota requests and their approvals: each step a row of the append-only lake table `quota_events`, a file of its own.

A tenant asks for more GPUs of a model for a while (`request`); someone else approves or rejects it (`decide`); an
approved request is a grant, in force between its dates (`active_grants`), which the analytics add to the tenant's
quota in the decisions the webhook reads (analytics/decisions.py). docs/governance.md tells the flow.

Nothing is updated in place. A request is the file `quota_events/date=<its day>/part-<request_id>-request.parquet`,
its decision `part-<request_id>-decision.parquet` beside it, each created with Store.put_new (create-if-absent: a
link(2) on disk, a PUT with If-None-Match on S3). So a request has at most one decision: of two approvers racing, one
creates the file and the other finds it there and is told who decided, and when. The request's day is in its id,
so the decision's name is known before either writes (schema.QUOTA_EVENTS is partitioned by the request's time, and
`gpuledger compact` leaves it alone, so the name stays taken).

A request's state at a time `at` (`request_states`) is read from the steps taken by then: pending, approved (not yet
in force), active, rejected, or expired (its `valid_until` passed, approved or not). sql/quota_requests.sql is the
same rule over the view's `now()`.

Who asks: GPULEDGER_USER, else the login name (getpass). Nothing here authenticates anyone: whoever may write the
lake may take these steps, and the audit says who they said they were (docs/governance.md).
"""

from __future__ import annotations

import datetime as dt
import getpass
import math
import os
import re
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import polars as pl

from gpuledger.config import Config, match_model
from gpuledger.errors import GpuledgerError, LakeError
from gpuledger.lake import LakeWriter, Partition, frame_from_rows, read_file, scan
from gpuledger.store import LakeRef, open_store

TABLE = "quota_events"
UTC = dt.timezone.utc
STATES = ("pending", "approved", "active", "rejected", "expired")
USER_VARIABLE = "GPULEDGER_USER"
WRITE_RETRIES_S = (0.1, 0.3, 1.0)  # waits before writing a decision again when its name was neither free nor taken
_ID = re.compile(r"^q-(\d{8})-[0-9a-f]{8}$")


class QuotaError(GpuledgerError):
    """A quota request or decision refused: bad input, a rule it breaks, or a decision taken already."""

    title = "quota"


@dataclass(frozen=True)
class Grant:
    """An approved request in force: `tenant` may hold `gpus` more GPUs of `gpu_model` (a quota key's name: `H100`
    names every model with that word) from `valid_from` until `valid_until` (exclusive), in `cluster`."""

    request_id: str
    tenant: str
    gpu_model: str
    gpus: float
    valid_from: dt.datetime
    valid_until: dt.datetime
    cluster: str = "default"


def utc_now() -> dt.datetime:
    """The clock of every step (the tests move it: a grant's life is days long)."""
    return dt.datetime.now(UTC)


def requester(environ: Mapping[str, str] = os.environ) -> str:
    """Who is asking: $GPULEDGER_USER, else the login name (getpass.getuser: $LOGNAME, $USER, ..., the password
    database). QuotaError when neither says."""
    name = (environ.get(USER_VARIABLE) or "").strip()
    if name:
        return name
    try:
        name = getpass.getuser().strip()
    except (OSError, KeyError):  # no login variable and a uid with no passwd entry (a bare container)
        name = ""
    if not name:
        raise QuotaError(f"cannot tell who is asking: set {USER_VARIABLE} to your name")
    return name


def parse_time(value: str | None, option: str, end_of_day: bool = False) -> dt.datetime:
    """A --from/--until value: a UTC day (YYYY-MM-DD: its start, or with `end_of_day` the start of the next, so
    `--until 2026-11-30` includes the 30th) or an ISO-8601 time (UTC unless it names a zone)."""
    if value is None or not value.strip():
        raise QuotaError(f"{option} is required (a UTC day YYYY-MM-DD, or an ISO-8601 time)")
    text = value.strip()
    try:
        if len(text) == 10:
            day = dt.date.fromisoformat(text)
            return dt.datetime.combine(day + dt.timedelta(days=1 if end_of_day else 0), dt.time(), UTC)
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise QuotaError(f"{option} {value!r} is not a day (YYYY-MM-DD) or an ISO-8601 time") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def parse_gpus(value: str | None) -> float:
    if value is None or not value.strip():
        raise QuotaError("--gpus is required (how many GPUs more, e.g. 4)")
    try:
        gpus = float(value)
    except ValueError:
        raise QuotaError(f"--gpus {value!r} is not a number") from None
    if not math.isfinite(gpus) or gpus <= 0:
        raise QuotaError(f"--gpus {value}: must be more than 0")
    return gpus


def _text(value: str | None, option: str, what: str) -> str:
    if value is None or not value.strip():
        raise QuotaError(f"{option} is required: {what}")
    return value.strip()


def _model(model: str, known: Iterable[str]) -> str:
    """`model` as a quota key names models: valid when it names one the lake or the rate card knows."""
    known = sorted({k for k in known if k})
    if model == "*":
        raise QuotaError("--model '*': a request names one GPU model (as a quota key does, e.g. H100)")
    # Either way round: the request names a model the lake knows (H100 names "NVIDIA H100 80GB HBM3"), or a rate
    # card key names the model requested (on a lake with no telemetry yet, only the rate card knows the models).
    if not any(match_model(k, [model]) or match_model(model, [k]) for k in known):
        names = ", ".join(known)
        raise QuotaError(f"--model {model!r} names no GPU model of the lake or the rate card (known: {names})")
    return model


def _key(request_id: str, step: str) -> tuple[Partition, str]:
    m = _ID.match(request_id)
    if m is None:
        raise QuotaError(f"no quota request {request_id!r} (ids look like q-20261102-1a2b3c4d)")
    day = dt.datetime.strptime(m.group(1), "%Y%m%d").date()
    return Partition(TABLE, day), f"{request_id}-{step}"


def _us(t: dt.datetime) -> int:
    return (t - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(microseconds=1)


def _write(store, row: dict, step: str) -> str:
    """Create the step's file (Store.put_new through the lake writer); LakeError when the name is taken by other
    bytes."""
    part, name = _key(row["request_id"], step)
    frame = frame_from_rows(TABLE, [{k: _us(v) if isinstance(v, dt.datetime) else v for k, v in row.items()}])
    LakeWriter(store).write_partition(part, frame, name)
    return part.key(name)


def request(
    lake: LakeRef,
    cfg: Config,
    models: Iterable[str],
    tenant: str | None,
    model: str | None,
    gpus: str | None,
    valid_from: str | None,
    valid_until: str | None,
    reason: str | None,
    by: str,
    now: dt.datetime | None = None,
) -> str:
    """Record a request for `gpus` more GPUs of `model` for `tenant` between the two times, and return its id.
    `models`: the GPU models the lake knows; the rate card's are added. QuotaError naming the first bad input, before
    anything is written."""
    now = now or utc_now()
    tenants = [t.name for t in cfg.tenants]
    tenant = _text(tenant, "--tenant", "the tenant whose quota to raise")
    if tenant not in tenants:
        raise QuotaError(f"--tenant {tenant!r}: no such tenant (tenants: {', '.join(tenants)})")
    model = _text(model, "--model", "the GPU model, as a quota key names it (e.g. H100)")
    model = _model(model, [*models, *(r.gpu_model for r in cfg.rates)])
    amount = parse_gpus(gpus)
    start = parse_time(valid_from, "--from")
    end = parse_time(valid_until, "--until", end_of_day=True)
    if end <= start:
        raise QuotaError(f"--until {valid_until} is not after --from {valid_from}")
    if end <= now:
        raise QuotaError(f"--until {valid_until} is already past ({now:%Y-%m-%d %H:%M} UTC): nothing to grant")
    why = _text(reason, "--reason", "say why the tenant needs the GPUs (it is kept with the request)")
    store = open_store(lake)
    for _ in range(3):  # an id taken already (2^32 per day: never in practice): draw another
        request_id = f"q-{now:%Y%m%d}-{secrets.token_hex(4)}"
        row = {
            "requested_at": now,
            "cluster": cfg.cluster,
            "ts": now,
            "event_id": f"{request_id}-request",
            "request_id": request_id,
            "action": "request",
            "actor": by,
            "tenant": tenant,
            "gpu_model": model,
            "gpus": amount,
            "valid_from": start,
            "valid_until": end,
            "reason": why,
        }
        try:
            _write(store, row, "request")
            return request_id
        except LakeError:
            if read_file(store, _key(request_id, "request")[0].key(f"{request_id}-request")) is None:
                raise
    raise QuotaError("could not draw a free request id three times (the lake's quota_events is not writable?)")


def events(lake: LakeRef, day: dt.date | None = None) -> pl.DataFrame:
    """Every step of every request (or of the requests made on `day`), as written. LakeError naming the first file
    that cannot be read (the analytics set it aside, lake_check.quarantine, and read the rest)."""
    store = open_store(lake)
    try:
        return scan(store, TABLE, day).collect()
    except (pl.exceptions.PolarsError, OSError) as e:
        raise damaged(store, e) from e


def damaged(store, e: Exception) -> LakeError:
    """The error of a read of quota_events that failed: naming the first file failing its check (each read whole:
    only on this failing path)."""
    from gpuledger.lake_check import verify_file

    for key in store.files(TABLE, "date=*/*.parquet"):
        why = verify_file(store, TABLE, key)
        if why is not None:
            return LakeError(f"{TABLE}: {store.url(key)} {why}")
    return LakeError(f"{TABLE}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")


def request_states(steps: pl.DataFrame, at: dt.datetime) -> pl.DataFrame:
    """One row per request made by `at`, in its state at `at` from the steps taken by then, oldest first:
    rejected (a reject), expired (`valid_until` passed, approved or not), active (approved and `valid_from`
    reached), approved (not yet in force), else pending. A request has one decision (its file is a claim); were
    there two (a decision file put back by hand), the first taken counts."""
    at_lit = pl.lit(at).dt.cast_time_unit("us")
    steps = steps.filter(pl.col("ts") <= at_lit)
    asked = steps.filter(pl.col("action") == "request").unique("request_id", keep="first")
    decided = (
        steps.filter(pl.col("action") != "request")
        .sort("ts", "event_id")
        .unique("request_id", keep="first", maintain_order=True)
        .select(
            "request_id",
            pl.col("action").alias("decision"),
            pl.col("actor").alias("decided_by"),
            pl.col("ts").alias("decided_at"),
            pl.col("reason").alias("note"),
        )
    )
    out = asked.join(decided, on="request_id", how="left")
    state = (
        pl.when(pl.col("decision") == "reject")
        .then(pl.lit("rejected"))
        .when(at_lit >= pl.col("valid_until"))
        .then(pl.lit("expired"))
        .when((pl.col("decision") == "approve") & (at_lit >= pl.col("valid_from")))
        .then(pl.lit("active"))
        .when(pl.col("decision") == "approve")
        .then(pl.lit("approved"))
        .otherwise(pl.lit("pending"))
    )
    return out.sort("requested_at", "request_id").select(
        "request_id",
        state.alias("state"),
        "cluster",
        "tenant",
        "gpu_model",
        "gpus",
        "valid_from",
        "valid_until",
        pl.col("actor").alias("requested_by"),
        "requested_at",
        "reason",
        "decided_by",
        "decided_at",
        "note",
    )


def states(lake: LakeRef, at: dt.datetime | None = None) -> pl.DataFrame:
    """`request_states` of the lake's requests now (or at `at`)."""
    return request_states(events(lake), at or utc_now())


def active_grants(lake: LakeRef, at: dt.datetime, cluster: str | None = None) -> list[Grant]:
    """The grants in force at `at` (approved by then, `valid_from <= at < valid_until`), of `cluster` or of every
    cluster, oldest request first."""
    rows = states(lake, at).filter(pl.col("state") == "active")
    if cluster is not None:
        rows = rows.filter(pl.col("cluster") == cluster)
    return [
        Grant(r["request_id"], r["tenant"], r["gpu_model"], r["gpus"], r["valid_from"], r["valid_until"], r["cluster"])
        for r in rows.iter_rows(named=True)
    ]


def decide(
    lake: LakeRef, request_id: str, action: str, by: str | None, note: str | None = None, now: dt.datetime | None = None
) -> dict:
    """Approve or reject the request `request_id` as `by`; returns the request's row (request_states) as decided.
    QuotaError when there is no such request, it was decided already (naming by whom and when), it expired, or
    `by` asked for it and would approve it (rejecting one's own request withdraws it, and is allowed)."""
    assert action in ("approve", "reject"), action
    now = now or utc_now()
    by = _text(by, "--by", "the name of whoever decides (not the requester)")
    part, _ = _key(request_id, "decision")
    store = open_store(lake)
    mine = events(store, part.date).filter(pl.col("request_id") == request_id)
    asked = mine.filter(pl.col("action") == "request")
    if asked.is_empty():
        raise QuotaError(f"no quota request {request_id!r}")
    req = asked.row(0, named=True)
    done = mine.filter(pl.col("action") != "request").sort("ts")
    if done.height:
        raise _decided_already(request_id, done.row(0, named=True))
    if action == "approve" and by.casefold() == req["actor"].casefold():
        raise QuotaError(f"{by} asked for {request_id}: a request is approved by someone else")
    if now >= req["valid_until"]:
        raise QuotaError(f"{request_id} expired at {req['valid_until']:%Y-%m-%d %H:%M} UTC: nothing to {action}")
    row = {
        **{k: req[k] for k in ("requested_at", "cluster", "request_id", "tenant", "gpu_model", "gpus")},
        **{k: req[k] for k in ("valid_from", "valid_until")},
        "ts": now,
        "event_id": f"{request_id}-decision",
        "action": action,
        "actor": by,
        "reason": note.strip() if note and note.strip() else None,
    }
    key = part.key(f"{request_id}-decision")
    for wait_s in (*WRITE_RETRIES_S, None):
        try:
            _write(store, row, "decision")
            break
        except LakeError:
            first = read_file(store, key)
            if first is not None:
                raise _decided_already(request_id, first.row(0, named=True)) from None
            if wait_s is None:
                raise  # not a taken name: the lake's own failure
            # S3 answers a conditional PUT racing another one on the same key with 409 (ConditionalRequestConflict)
            # while neither is written yet: try again, and the other's decision is there, or the name still free.
            time.sleep(wait_s)
    # Read back: the decision there is this one. A store whose create-if-absent is not one step (moto, the tests'
    # S3 server, checks then writes, so two PUTs at one instant both pass) would otherwise tell two racers they won;
    # here the one whose bytes were replaced learns that it lost (AWS S3, MinIO and link(2) decide in one step).
    there = read_file(store, key)
    if there is None:
        raise LakeError(f"{store.url(key)}: written, then not found")
    if (there["actor"][0], there["ts"][0]) != (by, now):
        raise _decided_already(request_id, there.row(0, named=True))
    return request_states(events(store, part.date).filter(pl.col("request_id") == request_id), now).row(0, named=True)


def _decided_already(request_id: str, step: dict) -> QuotaError:
    word = "approved" if step["action"] == "approve" else "rejected"
    return QuotaError(f"{request_id} was already {word} by {step['actor']} at {step['ts']:%Y-%m-%d %H:%M:%S} UTC")


def describe(row: Mapping) -> str:
    """A request in words: "vision: +4 H100 GPUs from 2026-11-02 00:00 to 2026-11-09 00:00 UTC"."""
    return (
        f"{row['tenant']}: +{row['gpus']:g} {row['gpu_model']} GPUs from {row['valid_from']:%Y-%m-%d %H:%M} to "
        f"{row['valid_until']:%Y-%m-%d %H:%M} UTC"
    )
