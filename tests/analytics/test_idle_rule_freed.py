"""What a stricter idle rule would have freed (analytics/whatif.py idle_rule_freed): the capacity what-if's rule,
summed per rule and tenant, on jobs computed by hand."""

from __future__ import annotations

import datetime as dt

import polars as pl

from gpuledger.analytics.whatif import idle_rule_freed

UTC = dt.timezone.utc
START = dt.datetime(2026, 11, 1, tzinfo=UTC)
END = dt.datetime(2026, 11, 2, tzinfo=UTC)


def stats(*rows):
    cols = ("job_id", "tenant", "gpus", "held_h", "efficiency")
    return pl.DataFrame(
        {
            **{c: [r[i] for r in rows] for i, c in enumerate(cols) if c != "held_h"},
            "gpu_model": ["H100"] * len(rows),
            "submitted_at": [START + dt.timedelta(hours=1)] * len(rows),
            "scheduled_at": [START + dt.timedelta(hours=1)] * len(rows),
            "held_s": [r[3] * 3600.0 for r in rows],
        },
        schema_overrides={"submitted_at": pl.Datetime("us", "UTC"), "scheduled_at": pl.Datetime("us", "UTC")},
    ).with_columns(pl.col("gpus").cast(pl.Float64), pl.col("efficiency").cast(pl.Float64))


def test_per_rule_and_tenant():
    s = stats(
        ("a", "vision", 2, 5.0, 0.01),  # idle: beyond 0.5 h 4.5 h x 2 = 9; beyond 1 h 8; beyond 2 h 6
        ("b", "vision", 1, 5.0, 0.50),  # busy: never cut
        ("c", "nlp", 1, 0.75, 0.02),  # idle but short: beyond 0.5 h 0.25; under 1 h and 2 h, nothing
        ("d", "nlp", 4, 3.0, None),  # no efficiency measured: never cut
    )
    got = idle_rule_freed(s, START, END).rows()
    assert got == [
        (0.5, "vision", 1, 9.0),
        (0.5, "nlp", 1, 0.25),
        (1.0, "vision", 1, 8.0),
        (2.0, "vision", 1, 6.0),
    ]


def test_nothing_to_free_is_an_empty_frame():
    got = idle_rule_freed(stats(("b", "vision", 1, 5.0, 0.5)), START, END)
    assert got.is_empty() and got.columns == ["idle_after_h", "tenant", "jobs", "freed_gpu_hours"]
