"""FGD task types from counted requests (one row per distinct request, `pods` jobs each) are those of one row per
job: the run keeps a year of jobs as a few counted shapes."""

from __future__ import annotations

import polars as pl
from polars.testing import assert_frame_equal

from gpuledger.analytics.frag_series import task_types_of


def test_counted_requests_give_the_task_types_of_one_row_per_job():
    counted = pl.DataFrame({"gpu_model": ["H100"] * 4, "gpus": [1.0, 8.0, 0.5, 2.0], "pods": [60, 25, 10, 5]})
    rows = counted.select(pl.col("gpu_model", "gpus").repeat_by("pods")).explode("gpu_model", "gpus")
    got, want = task_types_of(counted), task_types_of(rows)
    assert_frame_equal(got, want)
    # 95% coverage keeps 1 GPU (60), 8 GPUs (25) and the half GPU (10): 95 of 100 jobs; p = count / 95.
    assert got["count"].to_list() == [60, 25, 10]
    assert got["p"].to_list() == [60 / 95, 25 / 95, 10 / 95]
