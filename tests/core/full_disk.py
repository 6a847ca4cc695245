"""A collector and a webhook writing on a disk that fills up and is freed again, run on a real small filesystem.

Two ways to fill it, same scenarios: a 3 MB tmpfs filled by another file (needs root to mount), or a file-size
limit (RLIMIT_FSIZE) set in a subprocess. Either way an append gets a short write and then an error, as on a
real full disk. Run as a script (`python full_disk.py collector|webhook SPOOL LAKE`) for the limit: it prints
the scenario's result as JSON.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import resource
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from gpuledger.collector.runner import Collector  # noqa: E402
from gpuledger.collector.source import Batch  # noqa: E402
from gpuledger.lake import LakeWriter, has_data, scan  # noqa: E402
from gpuledger.spool import Spool, read_segment  # noqa: E402

T = 1_793_577_600.0  # 2026-11-02T00:00:00Z
GPUS = 96  # rows per batch; with a 200-character uuid a record is about 27 KB, several pages
SCRAPES, FULL_AT, FREED_AT = 30, 10, 20  # the disk is full for scrapes 10..19


class WideSource:
    name = "wide"

    def collect(self, now_s):
        n = GPUS
        yield Batch(
            "gpu_samples",
            {
                "ts": [int(now_s * 1e6)] * n,
                "cluster": ["c"] * n,
                "node": ["n1"] * n,
                "gpu_uuid": [f"GPU-{i:04d}-" + "x" * 200 for i in range(n)],
                "util_gpu_pct": [42.0] * n,
                "source": ["wide"] * n,
            },
        )

    def close(self):
        pass


def collector_scenario(spool_dir: Path, lake: Path, fill, free) -> dict:
    """Scrapes every 10 s (simulated); flushes before the disk fills and after it is freed. `fill(spool_dir)`
    makes the next append a short write followed by an error; `free()` undoes it."""
    now = [T]
    acks: list[int] = []
    col = Collector(
        [WideSource()],
        Spool(spool_dir, "n1"),
        LakeWriter(lake),
        "c",
        "n1",
        clock=lambda: now[0],
        on_ack=lambda b: acks.append(b.columns["ts"][0]),
    )
    col.start()
    acked_at_fill = acked_at_free = -1
    for i in range(SCRAPES):
        if i == FULL_AT:
            acked_at_fill = len(acks)
            fill(spool_dir)
        if i == FREED_AT:
            acked_at_free = len(acks)
            pending_when_full = col.metrics.registry.get_sample_value("gpuledger_spool_pending_rows")
            free()
        now[0] += 10
        col.scrape_logged()
        if i in (5, 25):
            col.flush_logged()
    col.close()
    samples = scan(lake, "gpu_samples").collect()
    return {
        "acked_ts": acks,
        "acked_at_fill": acked_at_fill,
        "acked_at_free": acked_at_free,
        "pending_rows_when_full": pending_when_full,
        "lake_rows": samples.height,
        "lake_ts": sorted({int(t.timestamp() * 1e6) for t in samples["ts"]}),
        "corrupt": sorted(p.name for p in (spool_dir / "corrupt").glob("*")),
        "segments_left": sorted(p.name for p in spool_dir.glob("seg-*.wal")),
    }


def _review(uid: str) -> dict:
    raw = REPO / "tests" / "fixtures" / "admission" / "kubewarden_loadtesting_pod_create_v1.json"
    doc = copy.deepcopy(json.loads(raw.read_text()))
    doc["request"]["uid"], doc["request"]["namespace"] = uid, "vision-train"
    doc["request"]["object"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    return doc


def webhook_scenario(lake: Path, fill, free) -> dict:
    """5 decisions, the disk fills, 10 decisions, it is freed, 5 more: every answer must be an AdmissionReview.
    Then the spool as a kill -9 would leave it, and the lake after a flush."""
    from starlette.testclient import TestClient

    from gpuledger.enforcer.decide import Settings, Table
    from gpuledger.enforcer.policies import TenantRow
    from gpuledger.enforcer.server import Webhook, create_app
    from gpuledger.enforcer.store import AuditWriter

    audit = AuditWriter(lake, "r0", "c")
    hook = Webhook(Settings({"vision-train": "vision"}), None, audit)
    hook.set_table(Table({("vision", None): TenantRow("vision", None, 0, 16)}, dt.datetime.now(dt.timezone.utc)))
    client = TestClient(create_app(hook))
    statuses, acked = [], []
    for i in range(20):
        if i == 5:
            fill(audit.spool.dir)
        if i == 15:
            free()
        uid = f"u-{i:02d}"
        before = hook.registry.get_sample_value("gpuledger_audit_errors_total")
        r = client.post("/validate", json=_review(uid))
        statuses.append([r.status_code, r.json()["response"]["uid"] == uid])
        if hook.registry.get_sample_value("gpuledger_audit_errors_total") == before:
            acked.append(uid)
    segs = sorted(audit.spool.dir.glob("seg-*.wal"))
    on_disk = [read_segment(s) for s in segs]
    audit.flush()
    uids = sorted(scan(lake, "admission_decisions").collect()["uid"].to_list())
    events = scan(lake, "health_events").collect().to_dicts() if has_data(lake, "health_events") else []
    metrics = client.get("/metrics").text
    audit.close()
    return {
        "statuses": statuses,
        "acked": acked,
        "unspooled": getattr(audit, "unspooled", None),
        "spooled_uids": [c["uid"][0] for s in on_disk for _, c in s.records],
        "corrupt_at": [s.corrupt_at for s in on_disk],
        "lake_uids": uids,
        "events": [[e["kind"], e["code"], e["source"]] for e in events],
        "audit_errors_metric": [ln for ln in metrics.splitlines() if ln.startswith("gpuledger_audit_errors_total")],
    }


# -- a file-size limit as the full disk (run in a subprocess: the limit is the process's own) --------------------
def _limit_fill(spool_dir: Path) -> None:
    """The next append may write 100 bytes past the open segment's end (less than any record: a short write),
    then EFBIG."""
    size = max((p.stat().st_size for p in spool_dir.glob("seg-*.wal")), default=0)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def _limit_free() -> None:
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))


if __name__ == "__main__":
    which, spool_dir, lake = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if which == "collector":
        out = collector_scenario(spool_dir, lake, _limit_fill, _limit_free)
    else:
        out = webhook_scenario(lake, _limit_fill, _limit_free)
    os.write(1, json.dumps(out).encode())
