"""Float sums whose bits do not depend on the order polars' threads add the values in.

polars splits a group's rows among threads and adds the partial sums in whichever order they finish, so one
group_by over the same frame gives results that differ in the last bits from run to run (measured: 2 distinct
results in 15 runs of a 200,000-row sum). A run that recomputes one day must write the very rows a run from
scratch writes, so the analytics tables sum as exact decimals (18 places: far below a float's precision for the
GPU-hours, dollars and watt-hours summed here) and round once to a float.
"""

from __future__ import annotations

import polars as pl

EXACT = pl.Decimal(38, 18)


def exact_sum(e: pl.Expr) -> pl.Expr:
    """sum() of a float expression, order-independent (0.0 when every value is null, like sum())."""
    return e.cast(EXACT).sum().cast(pl.Float64)


def exact_mean(e: pl.Expr) -> pl.Expr:
    """mean() of a float expression, order-independent (null when every value is null, like mean())."""
    n = e.count()
    return pl.when(n > 0).then(exact_sum(e) / n)
