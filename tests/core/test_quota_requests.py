"""Quota requests and approvals on both stores: the CLI (request, approve, reject, list), the rules and bad input
(one line, exit 1, nothing written), two approvals racing (threads and processes: one wins), the quota_requests view
against `request_states`, and `active_grants` (gpuledger/quota_requests.py, docs/governance.md)."""

import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time

import polars as pl
import pytest

from gpuledger import quota_requests as qr
from gpuledger.query import Lake

from builders import all_keys

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 11, 2, 9, 30, tzinfo=UTC)  # the clock when a case starts
HOUR, DAY = dt.timedelta(hours=1), dt.timedelta(days=1)
ASK = ["--tenant", "vision", "--model", "H100", "--gpus", "4", "--from", "2026-11-02", "--until", "2026-11-08"]


@pytest.fixture
def clock(monkeypatch):
    """The steps' clock, set by the test (every step reads quota_requests.utc_now)."""
    now = [T0]
    monkeypatch.setattr(qr, "utc_now", lambda: now[0])
    return now


@pytest.fixture
def as_user(monkeypatch):
    def set_user(name):
        monkeypatch.setenv("GPULEDGER_USER", name)

    set_user("alice")
    return set_user


def ask(cli, store, *extra, reason="paper deadline on Friday"):
    r = cli("quota", "request", "--lake", str(store), *ASK, *extra, "--reason", reason)
    assert r.exit_code == 0, r.output
    return r.stdout.strip()


def listed(cli, store, *args):
    r = cli("quota", "list", "--lake", str(store), "--format", "json", *args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_request_approve_list_on_each_store(cli, store, clock, as_user):
    request_id = ask(cli, store)
    assert request_id.startswith("q-20261102-")
    assert all_keys(store) == {f"quota_events/date=2026-11-02/part-{request_id}-request.parquet"}
    (row,) = listed(cli, store, "--pending")
    # --from 2026-11-02 is that day's start; --until 2026-11-08 includes the 8th: until the 9th's start.
    assert row == {
        "request_id": request_id,
        "state": "pending",
        "cluster": "default",
        "tenant": "vision",
        "gpu_model": "H100",
        "gpus": 4.0,
        "valid_from": "2026-11-02T00:00:00+00:00",
        "valid_until": "2026-11-09T00:00:00+00:00",
        "requested_by": "alice",
        "requested_at": "2026-11-02T09:30:00+00:00",
        "reason": "paper deadline on Friday",
        "decided_by": None,
        "decided_at": None,
        "note": None,
    }
    clock[0] = T0 + HOUR
    r = cli("quota", "approve", request_id, "--by", "bob", "--note", "ok for a week", "--lake", str(store))
    assert r.exit_code == 0, r.output
    assert r.stdout == (
        f"approved {request_id} (vision: +4 H100 GPUs from 2026-11-02 00:00 to 2026-11-09 00:00 UTC), now active\n"
    )
    assert listed(cli, store, "--pending") == []
    (row,) = listed(cli, store)
    assert (row["state"], row["decided_by"], row["decided_at"], row["note"]) == (
        "active",
        "bob",
        "2026-11-02T10:30:00+00:00",
        "ok for a week",
    )
    # Two files, one per step, in the request's day: nothing was rewritten.
    assert all_keys(store) == {
        f"quota_events/date=2026-11-02/part-{request_id}-{step}.parquet" for step in ("request", "decision")
    }
    steps = qr.events(store).sort("ts")
    assert steps["action"].to_list() == ["request", "approve"] and steps["actor"].to_list() == ["alice", "bob"]
    assert steps["date"].to_list() == [dt.date(2026, 11, 2)] * 2
    # Read as a table like any other: the csv of `list` and `gpuledger sql` over the view.
    r = cli("quota", "list", "--lake", str(store), "--format", "csv")
    assert r.stdout.splitlines()[0].startswith("request_id,state,cluster,tenant,gpu_model,gpus,valid_from")


def test_a_mistyped_lake_is_one_line_not_an_empty_list(cli, tmp_path):
    for args in (("list",), ("approve", "q-20261102-00000000", "--by", "bob")):
        r = cli("quota", *args, "--lake", tmp_path / "nowhere")
        assert r.exit_code == 1 and r.output.startswith(f"Error: lake error: no lake at {tmp_path / 'nowhere'}"), args
        assert not (tmp_path / "nowhere").exists()


def test_the_requester_is_gpuledger_user_else_the_login_name(monkeypatch):
    assert qr.requester({"GPULEDGER_USER": " carol "}) == "carol"
    monkeypatch.setattr(qr.getpass, "getuser", lambda: "dave")
    assert qr.requester({}) == "dave"

    def nobody():
        raise OSError("No username set in the environment")

    monkeypatch.setattr(qr.getpass, "getuser", nobody)
    with pytest.raises(qr.QuotaError, match="cannot tell who is asking: set GPULEDGER_USER"):
        qr.requester({})


BAD_REQUESTS = [
    (["--tenant", "visoin"], "--tenant 'visoin': no such tenant (tenants: vision, nlp, recsys, research, platform)"),
    (["--model", "H10"], "--model 'H10' names no GPU model of the lake or the rate card (known: "),
    (["--model", "*"], "--model '*': a request names one GPU model"),
    (["--gpus", "0"], "--gpus 0: must be more than 0"),
    (["--gpus", "-2"], "--gpus -2: must be more than 0"),
    (["--gpus", "many"], "--gpus 'many' is not a number"),
    (["--until", "2026-11-01"], "--until 2026-11-01 is not after --from 2026-11-02"),
    (["--from", "2026-10-01", "--until", "2026-10-31"], "--until 2026-10-31 is already past (2026-11-02 09:30 UTC)"),
    (["--from", "tomorrow"], "--from 'tomorrow' is not a day (YYYY-MM-DD) or an ISO-8601 time"),
]


@pytest.mark.parametrize(("change", "line"), BAD_REQUESTS, ids=[b[1][:24] for b in BAD_REQUESTS])
def test_a_bad_request_is_one_line_exit_1_and_nothing_written(cli, store, clock, as_user, change, line):
    args = list(ASK)
    for flag, value in zip(change[::2], change[1::2], strict=True):
        args[args.index(flag) + 1] = value
    r = cli("quota", "request", "--lake", str(store), *args, "--reason", "x")
    assert r.exit_code == 1, r.output
    assert r.output.startswith(f"Error: quota: {line}") and r.output.count("\n") == 1, r.output
    assert all_keys(store) == set()


def test_a_request_without_a_reason_or_a_tenant_is_refused(cli, store, clock, as_user):
    r = cli("quota", "request", "--lake", str(store), *ASK)
    assert (r.exit_code, r.output) == (1, "Error: quota: --reason is required: say why the tenant needs the GPUs "
                                           "(it is kept with the request)\n")  # fmt: skip
    r = cli("quota", "request", "--lake", str(store), *ASK[2:], "--reason", "   ")
    assert (r.exit_code, r.output) == (1, "Error: quota: --tenant is required: the tenant whose quota to raise\n")
    assert all_keys(store) == set()


def test_the_rules_of_approval(cli, store, clock, as_user):
    """Own request, unknown id, no --by, decided already (by whom, when), expired: one line, exit 1, nothing written.
    Rejecting one's own request withdraws it."""
    mine = ask(cli, store)
    short = ask(cli, store, "--from", "2026-11-02T09:00:00Z", "--until", "2026-11-02T12:00:00Z")
    withdrawn = ask(cli, store)

    def decide(action, request_id, *args):
        return cli("quota", action, request_id, *args, "--lake", str(store))

    before = all_keys(store)
    refused = {
        ("approve", mine, "--by", "alice"): f"alice asked for {mine}: a request is approved by someone else",
        ("approve", mine, "--by", "ALICE"): f"ALICE asked for {mine}: a request is approved by someone else",
        ("approve", mine): "--by is required: the name of whoever decides (not the requester)",
        ("approve", "q-20261102-00000000", "--by", "bob"): "no quota request 'q-20261102-00000000'",
        ("approve", "../../etc", "--by", "bob"): "no quota request '../../etc' (ids look like q-20261102-1a2b3c4d)",
    }
    for args, line in refused.items():
        r = decide(*args)
        assert (r.exit_code, r.output) == (1, f"Error: quota: {line}\n"), args
    assert all_keys(store) == before

    clock[0] = T0 + HOUR
    assert decide("reject", mine, "--by", "bob", "--note", "no H100 free this week").exit_code == 0
    assert decide("reject", withdrawn, "--by", "alice").exit_code == 0  # her own: withdrawn
    before = all_keys(store)
    clock[0] = T0 + 2 * HOUR
    for action in ("approve", "reject"):
        r = decide(action, mine, "--by", "carol")
        assert (r.exit_code, r.output) == (
            1,
            f"Error: quota: {mine} was already rejected by bob at 2026-11-02 10:30:00 UTC\n",
        )
    clock[0] = dt.datetime(2026, 11, 2, 12, tzinfo=UTC)  # `short` ran until 12:00
    r = decide("approve", short, "--by", "bob")
    line = f"Error: quota: {short} expired at 2026-11-02 12:00 UTC: nothing to approve\n"
    assert (r.exit_code, r.output) == (1, line)
    assert all_keys(store) == before
    got = {r["request_id"]: (r["state"], r["decided_by"]) for r in listed(cli, store)}
    assert got == {mine: ("rejected", "bob"), short: ("expired", None), withdrawn: ("rejected", "alice")}


def test_two_approvers_racing_in_threads_one_wins(store, clock, monkeypatch):
    """Eight approvers (and rejecters) read the request as pending together, then all write: the decision's file is
    created by one, and each other is told who decided. A barrier holds every reader until all have read, so every
    writer reaches Store.put_new (on S3 a PUT with If-None-Match) with the request still pending to it.

    On disk they write at once (link(2) decides). On S3 they write 20 ms apart, each PUT conditional on the object
    the first one made: the path a loser takes on AWS S3, which decides two PUTs at one instant in one step, where
    moto (the tests' server) checks, then writes, and may let both through (the read-back after the write is what
    catches that: the writer whose bytes were replaced is told it lost)."""
    from gpuledger.config import defaults

    request_id = qr.request(store, defaults(), [], "vision", "H100", "4", "2026-11-02", "2026-11-08", "why", "alice")
    n = 8
    read = threading.Barrier(n)
    real = qr.events
    me = threading.local()

    def events_then_wait(lake, day=None):
        rows = real(lake, day)
        if hasattr(me, "i") and not getattr(me, "read", False):
            me.read = True  # the check's read only (the winner reads again to answer)
            read.wait(timeout=30)
            if store.folder is None:
                time.sleep(0.02 * me.i)
        return rows

    monkeypatch.setattr(qr, "events", events_then_wait)
    results: dict[int, object] = {}

    def approver(i):
        me.i = i
        try:
            results[i] = qr.decide(store, request_id, "approve" if i % 2 == 0 else "reject", f"approver{i}")
        except qr.QuotaError as e:
            results[i] = e

    threads = [threading.Thread(target=approver, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    won = [i for i, r in results.items() if isinstance(r, dict)]
    assert len(results) == n and len(won) == 1, results
    (w,) = won
    word = "approved" if w % 2 == 0 else "rejected"
    for i, r in results.items():
        if i != w:
            assert str(r).startswith(f"{request_id} was already {word} by approver{w} at "), r
    monkeypatch.setattr(qr, "events", real)
    steps = qr.events(store)
    assert steps.height == 2 and steps.filter(pl.col("action") != "request")["actor"].to_list() == [f"approver{w}"]


def test_a_decision_raced_by_a_conflicting_put_is_tried_again(store, clock, monkeypatch):
    """A write that fails with the name neither free nor taken (S3's 409 to a conditional PUT racing another) is
    tried again; one that keeps failing is the lake's error, with nothing written."""
    from gpuledger.config import defaults
    from gpuledger.errors import LakeError

    monkeypatch.setattr(qr, "WRITE_RETRIES_S", (0.0, 0.0))
    request_id = qr.request(store, defaults(), [], "vision", "H100", "4", "2026-11-02", "2026-11-08", "why", "alice")
    real, failures = qr._write, []

    def conflict_then(times):
        def write(store_, row, step):
            if len(failures) < times:
                failures.append(step)
                raise LakeError("409 ConditionalRequestConflict")
            return real(store_, row, step)

        return write

    monkeypatch.setattr(qr, "_write", conflict_then(3))  # more than the tries
    with pytest.raises(LakeError, match="409 ConditionalRequestConflict"):
        qr.decide(store, request_id, "approve", "bob")
    assert failures == ["decision"] * 3 and qr.states(store)["state"].to_list() == ["pending"]
    failures.clear()
    monkeypatch.setattr(qr, "_write", conflict_then(2))  # within them
    assert qr.decide(store, request_id, "approve", "bob")["state"] == "active"
    assert failures == ["decision"] * 2


def test_two_approvals_in_processes_one_wins(store, tmp_path):
    """Four `gpuledger quota approve` processes started together: one exits 0, the others 1 with one line naming the
    winner."""
    from gpuledger.config import defaults

    now = dt.datetime.now(UTC)
    until = (now + 7 * DAY).date().isoformat()
    request_id = qr.request(store, defaults(), [], "vision", "H100", "2", now.date().isoformat(), until, "why", "alice")
    env, lake = {**os.environ, "GPULEDGER_USER": "alice"}, str(store)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "gpuledger.cli", "quota", "approve", request_id, "--by", f"op{i}", "--lake", lake],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    out = [(p.wait(120), *p.communicate()) for p in procs]
    winners = [i for i, (rc, _, _) in enumerate(out) if rc == 0]
    assert len(winners) == 1, out
    (w,) = winners
    for i, (rc, stdout, stderr) in enumerate(out):
        if i != w:
            assert rc == 1 and stdout == "", (rc, stdout, stderr)
            assert stderr.startswith(f"Error: quota: {request_id} was already approved by op{w} at "), stderr
            assert stderr.count("\n") == 1, stderr
    assert qr.events(store).filter(pl.col("action") == "approve")["actor"].to_list() == [f"op{w}"]


def test_the_view_says_what_request_states_says_and_grants_add_up(cli, store, clock, as_user):
    """One request in each state, made around the real now (the view's clock is DuckDB's now()); the view and
    `gpuledger quota list` give the same rows; active_grants gives the two grants in force, overlapping."""
    now = dt.datetime.now(UTC).replace(microsecond=0)
    clock[0] = now - 3 * DAY

    def request(start, end, gpus="4"):
        args = ["--from", start.isoformat(), "--until", end.isoformat(), "--gpus", gpus]
        return ask(cli, store, *args)

    def approve(request_id, by="bob"):
        assert cli("quota", "approve", request_id, "--by", by, "--lake", str(store)).exit_code == 0

    lapsed = request(now - 3 * DAY, now - DAY)  # never decided, ran out a day ago
    used = request(now - 3 * DAY, now - DAY)  # approved, ran out
    approve(used)
    clock[0] = now - HOUR
    pending = request(now, now + 2 * DAY)
    later = request(now + DAY, now + 2 * DAY)
    active = request(now - DAY, now + DAY, gpus="2")
    overlapping = request(now - HOUR, now + 3 * DAY, gpus="1.5")
    rejected = request(now, now + DAY)
    for request_id in (later, active, overlapping):
        approve(request_id)
    assert cli("quota", "reject", rejected, "--by", "bob", "--lake", str(store)).exit_code == 0
    clock[0] = now
    want = {
        lapsed: "expired",
        used: "expired",
        pending: "pending",
        later: "approved",
        active: "active",
        overlapping: "active",
        rejected: "rejected",
    }
    mine = qr.states(store, now)
    assert dict(zip(mine["request_id"], mine["state"], strict=True)) == want
    with Lake(store) as q:
        view = q.execute("SELECT * FROM quota_requests").frame
    assert view.columns == mine.columns
    assert view.sort("request_id").equals(mine.sort("request_id").cast(view.schema))
    assert {r["request_id"]: r["state"] for r in listed(cli, store)} == want
    grants = sorted(qr.active_grants(store, now), key=lambda g: -g.gpus)  # asked at one time: ids in any order
    assert [(g.request_id, g.tenant, g.gpu_model, g.gpus, g.cluster) for g in grants] == [
        (active, "vision", "H100", 2.0, "default"),
        (overlapping, "vision", "H100", 1.5, "default"),
    ]
    assert (grants[0].valid_from, grants[0].valid_until) == (now - DAY, now + DAY)
    assert qr.active_grants(store, now, cluster="eu-1") == []
    # As of an earlier time, only the steps taken by then: an hour and a half ago `active` was not approved yet.
    assert qr.active_grants(store, now - 90 * dt.timedelta(minutes=1)) == []


def test_compact_leaves_the_steps_files_alone(store, clock, as_user, cli):
    """A closed day of two requests and a decision is not merged: the decision's name must stay taken."""
    from gpuledger.compaction import compact

    first, second = ask(cli, store), ask(cli, store)
    assert cli("quota", "approve", first, "--by", "bob", "--lake", str(store)).exit_code == 0
    before = all_keys(store)
    assert len(before) == 3
    assert compact(store, today=dt.date(2026, 11, 20), grace_days=1).partitions == 0
    assert {k for k in all_keys(store) if k.startswith("quota_events/")} == before  # (the disk's lock file aside)
    r = cli("quota", "approve", first, "--by", "carol", "--lake", str(store))
    assert r.exit_code == 1 and f"{first} was already approved by bob" in r.output
    assert {r["request_id"]: r["state"] for r in listed(cli, store)} == {first: "active", second: "pending"}
