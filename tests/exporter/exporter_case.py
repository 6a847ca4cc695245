"""A hand-built lake for the exporter, every figure's value worked out by hand below (tests/exporter/).

One cluster, "default"; the analytics last ran at RUN = 2026-11-10 00:30 UTC, so the last complete hour is
2026-11-09 23:00 and "this month" is November. Rows of other hours, days or runs are there to be left out.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from builders import epoch_us, write_rows

UTC = dt.timezone.utc
RUN = dt.datetime(2026, 11, 10, 0, 30, tzinfo=UTC)
HOUR = dt.datetime(2026, 11, 9, 23, tzinfo=UTC)  # the last complete hour
H100, B200 = "NVIDIA H100 80GB HBM3", "NVIDIA B200"  # B200: in no rate card or config (an unknown model)


def day(d: int, month: int = 11) -> dt.datetime:
    return dt.datetime(2026, month, d, tzinfo=UTC)


def write(lake: Path, table: str, rows: list[dict], name: str = "case") -> None:
    """write_rows, with times given as datetimes."""
    conv = lambda v: epoch_us(v) if isinstance(v, dt.datetime) else v  # noqa: E731
    write_rows(lake, table, [{k: conv(v) for k, v in r.items()} for r in rows], name)


def write_case(lake: Path) -> None:
    w = lambda table, rows, name="case": write(lake, table, rows, name)  # noqa: E731

    # The run: tenants (every run rewrites it); an older run's rows are superseded.
    for at, name in ((RUN - dt.timedelta(hours=1), "old"), (RUN, "case")):
        w("tenants", [{"computed_at": at, "cluster": "default", "tenant": "a", "weight": 1.0}], name)

    # Tenant a on H100 in the last complete hour: two jobs of one GPU each, one busy all hour, one idle all hour.
    # The hour before, and a null tenant's job (exported as tenant "unknown"), and ghost on a B200 (unknown both).
    jh = dict(cluster="default", node="n1")
    w(
        "job_hourly",
        [
            {
                **jh,
                "hour": HOUR,
                "tenant": "a",
                "job_id": "j1",
                "gpu_model": H100,
                "allocated_gpu_hours": 1.0,
                "busy_gpu_hours": 1.0,
                "idle_gpu_hours": 0.0,
            },
            {
                **jh,
                "hour": HOUR,
                "tenant": "a",
                "job_id": "j2",
                "gpu_model": H100,
                "allocated_gpu_hours": 1.0,
                "busy_gpu_hours": 0.0,
                "idle_gpu_hours": 1.0,
            },
            {
                **jh,
                "hour": HOUR - dt.timedelta(hours=1),
                "tenant": "a",
                "job_id": "j1",
                "gpu_model": H100,
                "allocated_gpu_hours": 5.0,
                "busy_gpu_hours": 5.0,
                "idle_gpu_hours": 0.0,
            },
            {
                **jh,
                "hour": HOUR,
                "tenant": None,
                "job_id": "j3",
                "gpu_model": H100,
                "allocated_gpu_hours": 0.5,
                "busy_gpu_hours": 0.25,
                "idle_gpu_hours": 0.0,
            },
            {
                **jh,
                "hour": HOUR,
                "tenant": "ghost",
                "job_id": "j4",
                "gpu_model": B200,
                "allocated_gpu_hours": 4.0,
                "busy_gpu_hours": 3.0,
                "idle_gpu_hours": 0.0,
            },
            # The last complete UTC day (Nov 9) for the efficiency: a's jobs, 24 + 2 allocated, 12 + 1 busy.
            {
                **jh,
                "hour": day(9, 11) + dt.timedelta(hours=3),
                "tenant": "a",
                "job_id": "j5",
                "gpu_model": H100,
                "allocated_gpu_hours": 24.0,
                "busy_gpu_hours": 12.0,
                "idle_gpu_hours": 0.0,
            },
        ],
    )

    # Cost: a on H100, 10 USD + 1 USD idle share every day of November up to Nov 8, 30 + 3 on Nov 9, and 100 on
    # Oct 31 (last month). A null tenant (unshared idle capacity) is not a tenant.
    cost = [
        {
            "day_start": day(d),
            "cluster": "default",
            "tenant": "a",
            "gpu_model": H100,
            "cost_usd": 10.0,
            "idle_share_usd": 1.0,
        }
        for d in range(1, 9)
    ]
    cost += [
        {
            "day_start": day(9),
            "cluster": "default",
            "tenant": "a",
            "gpu_model": H100,
            "cost_usd": 30.0,
            "idle_share_usd": 3.0,
        },
        {
            "day_start": day(31, 10),
            "cluster": "default",
            "tenant": "a",
            "gpu_model": H100,
            "cost_usd": 100.0,
            "idle_share_usd": 0.0,
        },
        {
            "day_start": day(5),
            "cluster": "default",
            "tenant": None,
            "gpu_model": H100,
            "cost_usd": 7.0,
            "idle_share_usd": None,
        },
    ]
    w("cost_daily", cost)

    # Decisions of the run (what analytics/decisions.py wrote): a's H100 row and its all-models row.
    dec = dict(
        computed_at=RUN,
        cluster="default",
        tenant="a",
        budget_usd=1000.0,
        spent_usd=121.0,
        budget_left_usd=879.0,
        budget_used_pct=12.1,
        weight_share=1.0,
        usage_share=1.0,
        fairshare=0.5,
    )
    w(
        "decisions",
        [
            {**dec, "gpu_model": H100, "allocated_gpus": 2.0, "quota_gpus": 8.0, "headroom_gpus": 6.0},
            {**dec, "gpu_model": None, "allocated_gpus": 2.0, "quota_gpus": 16.0, "headroom_gpus": 14.0},
        ],
    )
    # Idle holds: one GPU idle 3 h (>= idle_min_h 2), half a GPU idle 1 h (not yet).
    hold = dict(computed_at=RUN, cluster="default", tenant="a", gpu_model=H100, job_id="j2", node="n1")
    w(
        "idle_holds",
        [
            {**hold, "gpu_uuid": "g2", "share": 1.0, "idle_s": 3 * 3600.0, "idle_since": RUN - dt.timedelta(hours=3)},
            {**hold, "gpu_uuid": "g3", "share": 0.5, "idle_s": 3600.0, "idle_since": RUN - dt.timedelta(hours=1)},
        ],
    )

    # Jobs: two of a's pending on H100 (1 + 2 GPUs), one of ghost's on B200 (8); five H100 jobs scheduled in the
    # last 24 h waited 0, 100, 200, 300, 400 s; one scheduled 30 h ago waited 9,999 s (outside the window).
    js = dict(cluster="default", gpu_model=H100, tenant="a", submitted_at=day(9))
    jobs = [
        {**js, "job_id": "p1", "status": "pending", "gpus": 1.0, "queue_s": 50.0},
        {**js, "job_id": "p2", "status": "pending", "gpus": 2.0, "queue_s": 60.0},
        {**js, "job_id": "p3", "status": "pending", "gpus": 8.0, "tenant": "ghost", "gpu_model": B200},
    ]
    for i, q in enumerate((0.0, 100.0, 200.0, 300.0, 400.0)):
        jobs.append(
            {
                **js,
                "job_id": f"s{i}",
                "status": "running",
                "gpus": 1.0,
                "queue_s": q,
                "scheduled_at": RUN - dt.timedelta(hours=i + 1),
            }
        )
    jobs.append(
        {
            **js,
            "job_id": "old",
            "status": "succeeded",
            "gpus": 1.0,
            "queue_s": 9999.0,
            "scheduled_at": RUN - dt.timedelta(hours=30),
        }
    )
    w("job_stats", jobs)

    # The fleet's last complete hour (and the one before, left out).
    fh = dict(
        cluster="default",
        gpu_model=H100,
        pending_gpus=3.0,
        pending_gpus_max=3.0,
        pending_jobs_max=2,
        demand_gpus=5.0,
        energy_kwh=1.0,
    )
    w(
        "fleet_hourly",
        [
            {**fh, "hour": HOUR, "gpus": 8, "allocated_gpus": 2.5, "busy_gpus": 1.25},
            {**fh, "hour": HOUR - dt.timedelta(hours=1), "gpus": 16, "allocated_gpus": 9.0, "busy_gpus": 9.0},
        ],
    )
    # Fragmentation: the latest hour at or before the run.
    fr = dict(cluster="default", gpu_model=H100, gpus=8, fragmented_gpus=1.0)
    w(
        "fragmentation",
        [
            {
                **fr,
                "ts": day(10),
                "free_gpus": 4.0,
                "frag_rate": 0.25,
                "stranded_1gpu": 1,
                "stranded_2gpu": 0,
                "stranded_4gpu": 2,
                "stranded_8gpu": 4,
            },
            {
                **fr,
                "ts": HOUR,
                "free_gpus": 6.0,
                "frag_rate": 0.5,
                "stranded_1gpu": 3,
                "stranded_2gpu": 3,
                "stranded_4gpu": 3,
                "stranded_8gpu": 6,
            },
        ],
    )
    # Inventory: n1 (8 H100) seen now; n2 (8 H100) last seen in October, retired; n3 a B200 node.
    node = dict(cluster="default", gpu_mem_bytes=85520809984, source="sim")
    w(
        "nodes",
        [
            {**node, "node": "n1", "gpu_model": H100, "gpu_count": 8, "first_seen": day(1), "last_seen": day(10)},
            {
                **node,
                "node": "n2",
                "gpu_model": H100,
                "gpu_count": 8,
                "first_seen": day(1, 10),
                "last_seen": day(2, 10),
            },
            {
                **node,
                "node": "n3",
                "gpu_model": B200,
                "gpu_count": 4,
                "gpu_mem_bytes": 192 * 2**30,
                "first_seen": day(1),
                "last_seen": day(10),
            },
        ],
    )
    # Health: on n1 Xid 79 twice, Xid 48 once, one ECC event; Xid 13 on a node the inventory lacks; GPU g1 lost 2 h
    # before the run, g2 lost 30 h before (a lost event, not a GPU lost in the last 24 h).
    ev = dict(cluster="default", node="n1", source="sim")
    w("health_events", health_rows(ev))
    # The driver, from the raw samples of the last complete hour.
    w(
        "gpu_samples",
        [
            {
                "ts": HOUR + dt.timedelta(minutes=10),
                "cluster": "default",
                "node": "n1",
                "gpu_uuid": "g1",
                "model": H100,
                "driver_version": "550.54.15",
                "mem_total_bytes": 85520809984,
                "source": "sim",
            }
        ],
    )


def health_rows(ev: dict, extra_79: int = 0) -> list[dict]:
    t = RUN - dt.timedelta(hours=5)
    rows = [
        {**ev, "ts": t, "gpu_uuid": "g1", "kind": "xid", "code": 79},
        {**ev, "ts": t + dt.timedelta(seconds=1), "gpu_uuid": "g1", "kind": "xid", "code": 79},
        {**ev, "ts": t, "gpu_uuid": "g2", "kind": "xid", "code": 48},
        {**ev, "ts": t, "gpu_uuid": "g2", "kind": "ecc", "detail": "3 single-bit ECC errors corrected"},
        {**ev, "ts": t, "node": "nX", "gpu_uuid": "gx", "kind": "xid", "code": 13},
        {**ev, "ts": RUN - dt.timedelta(hours=2), "gpu_uuid": "g1", "kind": "lost", "code": 79},
        {**ev, "ts": RUN - dt.timedelta(hours=30), "gpu_uuid": "g2", "kind": "lost", "code": 79},
        {**ev, "ts": t, "gpu_uuid": "g1", "kind": "throttle"},  # not a counter of its own
    ]
    rows += [
        {**ev, "ts": t + dt.timedelta(seconds=10 + i), "gpu_uuid": "g1", "kind": "xid", "code": 79}
        for i in range(extra_79)
    ]
    return rows


def samples(registry) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted label pairs): value} of what the registry serves, through the text exposition."""
    out = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(found: dict, name: str, **labels) -> float:
    return found[(name, tuple(sorted(labels.items())))]


def names(found: dict) -> set[str]:
    return {n for n, _ in found}


def frame_of(found: dict, name: str) -> pl.DataFrame:
    rows = [dict(lbl) | {"value": v} for (n, lbl), v in found.items() if n == name]
    return pl.DataFrame(rows)
