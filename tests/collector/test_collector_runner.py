import datetime as dt
import socket
import time

from gpuledger.collector.runner import Collector, ScrapeReport
from gpuledger.collector.source import Batch
from gpuledger.errors import SourceError, SpoolError
from gpuledger.lake import LakeWriter, scan
from gpuledger.spool import HEADER, Spool

T = 1_793_577_600.0  # 2026-11-02T00:00:00Z


class Scripted:
    """A source that returns what it is told to, or fails."""

    name = "scripted"

    def __init__(self, fail=False):
        self.fail = fail

    def collect(self, now_s):
        if self.fail:
            raise SourceError("endpoint refused the connection")
        yield Batch(
            "gpu_samples",
            {
                "ts": [int(now_s * 1e6)],
                "cluster": ["c"],
                "node": ["n1"],
                "gpu_uuid": ["GPU-1"],
                "util_gpu_pct": [42.0],
                "source": ["scripted"],
            },
        )

    def close(self):
        pass


def make(tmp_path, src, clock=lambda: T):
    return Collector([src], Spool(tmp_path / "spool", "n1"), LakeWriter(tmp_path / "lake"), "c", "n1", clock=clock)


def test_scrape_flush_close(tmp_path):
    acks = []
    col = make(tmp_path, Scripted())
    col.on_ack = acks.append
    col.start()
    col.scrape()
    assert [a.table for a in acks] == ["gpu_samples"]  # acknowledged once durable
    col.close()
    df = scan(tmp_path / "lake", "gpu_samples").collect()
    assert df["util_gpu_pct"].to_list() == [42.0] and df["source"].to_list() == ["scripted"]


def test_a_failing_source_becomes_a_health_event_and_is_retried_with_backoff(tmp_path):
    now = [T]
    src = Scripted(fail=True)
    col = make(tmp_path, src, clock=lambda: now[0])
    col.interval_s = 10
    col.start()
    # Failures at T, T+10 (retry at once after the first), then waits of 20 s, 40 s: tries at T, T+10, T+30, T+70.
    tried = []
    for step in range(0, 80, 10):
        now[0] = T + step
        before = col.errors
        col.scrape_logged()
        if col.errors > before:
            tried.append(step)
    assert tried == [0, 10, 30, 70]
    src.fail = False
    now[0] = T + 150
    col.scrape_logged()  # recovers: the failure count resets
    now[0] = T + 160
    col.scrape_logged()
    col.close()
    ev = scan(tmp_path / "lake", "health_events").collect()
    assert ev["kind"].to_list() == ["scrape_error"] * 4
    assert ev["detail"][0] == "scripted: endpoint refused the connection"
    assert scan(tmp_path / "lake", "gpu_samples").collect().height == 2


def test_self_metrics(tmp_path):
    from prometheus_client import generate_latest

    col = make(tmp_path, Scripted())
    col.start()
    col.scrape()
    col.scrape()
    text = generate_latest(col.metrics.registry).decode()
    assert 'gpuledger_rows_written_total{table="gpu_samples"} 2.0' in text
    assert 'gpuledger_scrape_duration_seconds_count{source="scripted"} 2.0' in text
    assert "gpuledger_spool_segments 1.0" in text
    col.flush()
    assert "gpuledger_flushes_total 1.0" in generate_latest(col.metrics.registry).decode()
    col.close()


def test_corrupt_spool_segment_is_reported_as_a_health_event(tmp_path):
    col = make(tmp_path, Scripted())
    col.start()
    col.scrape()
    col.scrape()
    seg = col.spool._current
    col.spool.close()
    data = bytearray(seg.read_bytes())
    data[HEADER.size + 3] ^= 0xFF  # break the first record; the second follows it
    seg.write_bytes(bytes(data))
    col2 = make(tmp_path, Scripted())
    col2.start()
    col2.close()
    ev = scan(tmp_path / "lake", "health_events").collect()
    assert ev["kind"].to_list() == ["spool_corrupt"]
    assert "corrupt at byte 0" in ev["detail"][0] and seg.name in ev["detail"][0]
    assert (tmp_path / "spool" / "corrupt" / seg.name).exists()
    # The damaged record is lost; the acknowledged one after it is recovered by resynchronising.
    assert scan(tmp_path / "lake", "gpu_samples").collect().height == 1


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the socket is: a connection there is refused


def test_collect_once_where_every_target_failed_exits_1_with_one_line_per_target(cli, tmp_path):
    urls = [f"http://127.0.0.1:{closed_port()}/metrics", f"http://127.0.0.1:{closed_port()}/metrics"]
    r = cli("collect", "--source", "dcgm", "--url", urls[0], "--url", urls[1], "--once", "--lake", tmp_path / "lake")
    assert r.exit_code == 1
    assert r.output.splitlines()[-3:] == [
        "Error: source error: collect --once: nothing collected, every source or target failed:",
        f"  {urls[0]}: connection refused",
        f"  {urls[1]}: connection refused",
    ]
    events = scan(tmp_path / "lake", "health_events").collect()  # the failures are recorded all the same
    assert events["kind"].to_list() == ["scrape_error"] * 2


def test_a_scrape_reports_its_rows_and_failures(tmp_path):
    col = make(tmp_path, Scripted(fail=True))
    col.start()
    assert col.scrape() == ScrapeReport(0, ["scripted: endpoint refused the connection"])
    col.sources[0].fail = False
    assert col.scrape() == ScrapeReport(1, [])
    col.close()


def test_batches_the_spool_refuses_wait_in_memory_in_order_up_to_a_bound(tmp_path, monkeypatch):
    now, acks = [T], []
    col = Collector(
        [Scripted()],
        Spool(tmp_path / "spool", "n1"),
        LakeWriter(tmp_path / "lake"),
        "c",
        "n1",
        clock=lambda: now[0],
        on_ack=lambda b: acks.append(b.columns["ts"][0]),
        max_pending_rows=2,
    )
    col.start()

    def full(*_a, **_k):
        raise SpoolError("cannot append to spool segment: No space left on device")

    monkeypatch.setattr(col.spool, "append", full)
    for i in range(4):  # one row each, at T+1 .. T+4: only the last two fit under the bound
        now[0] = T + 1 + i
        col.scrape()
    assert acks == []
    assert col.metrics.registry.get_sample_value("gpuledger_spool_pending_rows") == 2
    assert col.metrics.registry.get_sample_value("gpuledger_rows_dropped_total", {"table": "gpu_samples"}) == 2
    monkeypatch.undo()
    now[0] = T + 5
    col.scrape()
    assert acks == [int((T + k) * 1e6) for k in (3, 4, 5)]  # the kept ones first, in order, then the new one
    col.close()
    assert sorted(scan(tmp_path / "lake", "gpu_samples").collect()["ts"].dt.epoch("s").to_list()) == [
        int(T) + 3,
        int(T) + 4,
        int(T) + 5,
    ]


def test_close_appends_what_a_flush_made_room_for_before_calling_it_lost(tmp_path, monkeypatch):
    """The spool's disk is full until a flush turns the log into Parquet and deletes it: close must drain after
    that flush, not report the kept rows as lost."""
    col = make(tmp_path, Scripted())
    col.start()
    real_append, real_flush, flushed = col.spool.append, col.spool.flush, []

    def append_while_full(*a, **k):
        if not flushed:
            raise SpoolError("cannot append to spool segment: No space left on device")
        return real_append(*a, **k)

    def flush_frees_space(lake):
        flushed.append(1)
        return real_flush(lake)

    monkeypatch.setattr(col.spool, "append", append_while_full)
    monkeypatch.setattr(col.spool, "flush", flush_frees_space)
    col.scrape()
    assert col._pending_rows == 1
    col.close()  # raised "1 scraped row(s) never reached the spool and are lost" before
    assert scan(tmp_path / "lake", "gpu_samples").collect()["util_gpu_pct"].to_list() == [42.0]


def test_a_job_slower_than_its_interval_is_said_once_a_minute_and_counted_not_warned_at_every_tick(caplog):
    """A real scheduler (run_until_stopped), a job of 0.3 s every 0.05 s for about 1.2 s: apscheduler skips the ticks
    that come while a run goes (max_instances=1) and would warn at each; SkippedRuns counts them and says it once
    (a minute has not passed), in gpuledger's words."""
    import logging
    import threading

    from gpuledger.collector.metrics import CollectorMetrics
    from gpuledger.collector.runner import run_until_stopped

    metrics, stop, runs = CollectorMetrics(), threading.Event(), []

    def slow():
        runs.append(time.monotonic())
        time.sleep(0.3)
        if len(runs) == 3:
            stop.set()

    def jobs(sch):
        # as Collector.schedule adds the scrape (no misfire limit: a late tick under load is run, not warned of)
        opts = dict(coalesce=True, max_instances=1, misfire_grace_time=None)
        sch.add_job(slow, "interval", seconds=0.05, id="scrape", **opts)

    with caplog.at_level(logging.WARNING):
        run_until_stopped(jobs, stop, metrics)
    skipped = metrics.registry.get_sample_value("gpuledger_skipped_runs_total", {"job": "scrape"})
    # 3 runs of 0.3 s at a 0.05 s interval (a 4th may start while the scheduler shuts down): each of the first two
    # outlasts 5 ticks; a loaded machine may wake the scheduler fewer times, but at least once in each
    assert len(runs) >= 3 and skipped >= 2
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [m for m in lines if "maximum number of running instances" in m]
    assert lines == [
        "scrape: a run outlasted its interval, so the next tick is skipped (and every tick a run outlasts); said "
        "again at most every 60 s, with the count"
    ]


def test_skipped_runs_are_said_again_with_their_count_after_a_minute():
    from gpuledger.collector.metrics import CollectorMetrics
    from gpuledger.collector.runner import SkippedRuns

    class Event:
        job_id = "analytics"

    now = [100.0]
    metrics = CollectorMetrics()
    said = SkippedRuns(metrics, every_s=60, clock=lambda: now[0])
    lines = []
    import logging

    handler = logging.Handler()
    handler.emit = lambda r: lines.append(r.getMessage())
    logging.getLogger("gpuledger.collector.runner").addHandler(handler)
    try:
        for t in (100.0, 110.0, 150.0, 159.0, 161.0, 170.0):  # the first said at once; 4 more, said at 161
            now[0] = t
            said(Event())
    finally:
        logging.getLogger("gpuledger.collector.runner").removeHandler(handler)
    assert lines == [
        "analytics: a run outlasted its interval, so the next tick is skipped (and every tick a run outlasts); said "
        "again at most every 60 s, with the count",
        "analytics: 4 tick(s) skipped in the last 61 s: its runs outlast its interval",  # 110, 150, 159, 161
    ]
    assert metrics.registry.get_sample_value("gpuledger_skipped_runs_total", {"job": "analytics"}) == 6


def test_a_job_that_ctrl_c_reaches_mid_run_ends_in_one_line(caplog):
    """polars raises KeyboardInterrupt in the thread running a query when Ctrl-C comes (its own SIGINT hook): a
    scheduled job (an analytics run) gets it; it ends in one line, not apscheduler's 'raised an exception' and a
    traceback."""
    import logging
    import threading

    from gpuledger.collector.runner import run_until_stopped

    stop = threading.Event()

    def analytics():
        stop.set()
        raise KeyboardInterrupt

    with caplog.at_level(logging.INFO):
        run_until_stopped(lambda sch: sch.add_job(analytics, "interval", seconds=60, id="analytics",
                                                  next_run_time=dt.datetime.now(dt.timezone.utc)), stop)  # fmt: skip
    assert "analytics: stopped by Ctrl-C mid-run" in [r.getMessage() for r in caplog.records]
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def test_every_scheduled_job_runs_late_rather_than_never_and_never_twice_at_once():
    """apscheduler's defaults drop a run more than 1 s late (a loaded machine wakes the scheduler late): the first
    analytics run of `up` would then wait 5 minutes. run_until_stopped's defaults: late runs run, once, alone."""
    import threading

    from gpuledger.collector.runner import run_until_stopped

    stop, seen = threading.Event(), {}

    def jobs(sch):
        def look():  # added with no options, as up's compaction and the analytics are
            job = sch.get_job("analytics")
            seen.update(misfire=job.misfire_grace_time, coalesce=job.coalesce, instances=job.max_instances)
            stop.set()

        sch.add_job(look, "interval", seconds=300, id="analytics", next_run_time=dt.datetime.now(dt.timezone.utc))

    run_until_stopped(jobs, stop)
    assert seen == {"misfire": None, "coalesce": True, "instances": 1}
