"""Every script in benchmarks/ runs in its --tiny mode: it exits 0 and prints its figure lines.

A benchmark nobody runs rots: analytics_run.py globbed the old date=/node= layout and stopped on the date-only lake,
and finops_views.py met views it had no question for and a lake connection that no longer writes files. The tiny
sizes take seconds; no time is asserted, only that each figure is still printed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import REPO, SHARED

# The whole tiny run takes ~35 s on 2 cores (analytics, finops and dashboards each simulate and analyse a lake).
pytestmark = pytest.mark.slow

BENCH = REPO / "benchmarks"
N = r"[\d.,]+"

# script -> the figure lines it must print, as regexes
FIGURES: dict[str, tuple[str, ...]] = {
    # the copied fixtures alone where ../shared/data is absent: 11 of the 21 files
    "classify.py": (
        rf"^high +{N} +{N}/{N} +{N}% +{N}/{N} +{N}%$",
        rf"^low +{N} +{N}/{N} +{N}% +{N}/{N} +{N}%$",
        rf"classify_object: {N} us per object",
    ),
    "reclaim.py": (
        rf"reclaim dry run at \S+ over {N} open jobs holding {N} GPUs",
        rf"default class policies: would free {N} GPU-hours a day \({N} USD a day\) from {N} jobs",
        rf"other reclaimable after 2 h: would free {N} GPU-hours a day \({N} USD a day\) from {N} jobs",
        rf"pass, median of {N}: {N} s; baseline \(reading the open jobs alone\) {N} s",
        rf"ratio {N}x",
        rf"command \(fresh process\): {N} s, peak RSS {N} MiB",
    ),
    "exporter.py": (
        rf"series {N}, /metrics {N} KiB \(baseline 4 series\)",
        rf"scrape p50 {N} ms +p99 {N} ms +max {N} ms over {N} scrapes",
        rf"ratio p99 {N}x",
        rf"RSS {N} MiB after the scrapes, peak {N} MiB while building",
    ),
    "analytics_run.py": (
        rf"analytics over {N} GPU samples \({N} GPU-hours\)",
        rf"round 1: baseline +{N} s +all analytics +{N} s +ratio {N}x +peak RSS {N} GB",
        rf"median ratio +{N}x",
        rf"incremental run, one new hour +{N} s",
    ),
    "analytics_dask.py": (
        rf"analyze over {N} GPU samples",
        rf"local \(this process\) +whole run +{N} s +pass over samples +{N} s",
        rf"Dask LocalCluster, 2 workers whole run +{N} s +pass over samples +{N} s",
        rf"Dask overhead ratio: whole run {N}x +pass over samples {N}x",
        r"same output: yes, every table",
    ),
    "analytics_incremental.py": (
        rf"^ +{N} d +{N} s +{N} GB +{N} s +{N} GB +0$",
        rf"baseline: the {N}-day lake's run after one new hour, {N} s",
        rf"ratio, {N} days to {N}: {N}x time, {N}x RSS",
    ),
    "analytics_midnight.py": (
        rf"compaction of yesterday, hour layout +{N} s +peak RSS {N} GB",
        rf"00:30 \(to 01:00\), hour layout +median +{N} s",
        rf"12:30 \(to 13:00\), node layout +median +{N} s",
        rf"baseline: the node layout's run to 01:00, {N} s; ratio, hour layout to it: {N}x",
        r"rows differing between the layouts' derived tables: 0$",
    ),
    "samples_once.py": (
        rf"round 1: baseline \(rollup alone\) +{N} s +counted once +{N} s +ratio {N}x",
        rf"median ratio {N}x",
        rf"with {N} samples written twice: {N} s, same rows as the baseline",
    ),
    "simulate.py": (rf"samples +{N}", rf"throughput +{N} samples/s", rf"baseline +{N} s", rf"ratio +{N}x the bare"),
    "spool_append.py": (
        rf"spool append +median {N} ms +p99 {N} ms",
        rf"baseline \(disk\) +median {N} ms",
        rf"ratio +{N}x",
    ),
    "nvml_scrape.py": (rf"own CPU per scrape .* median {N} ms +p99 {N} ms", rf"NVML calls \(the fake\) .* median {N}"),
    "dcgm_parse.py": (
        rf"8-GPU node pages: 1 pages, {N} samples, .*outputs identical",
        r"real captures .*outputs identical",
        rf"parse_fast +{N} samples/s",
        rf"ratio +{N}x",
    ),
    "vendor_parse.py": (
        rf"AMD 8 x MI300X pages \(synthetic\): 1 pages, {N} samples, .*outputs identical",
        rf"Ascend 8-NPU pages \(golden\): 1 pages, {N} samples, .*outputs identical",
        rf"ratio +{N}x +\(dcgm node pages",
        rf"parse_fast \+ ascend table +{N} samples/s to lake rows",
    ),
    "dcgm_fleet.py": (rf"one round, fast parser +median {N} s", rf"one round, reference parser +median {N} s"),
    "dcgm_soak.py": (
        rf"round time +p50 {N} s +max {N} s",
        rf"ratio p50 / interval {N}x",
        rf"largest spool between flushes +{N} MB",
        r"rows in the lake = rows acknowledged: yes",
    ),
    "report.py": (
        rf"report of {N}-{N} over .+: {N} GPUs, {N} day\(s\) of cost",
        rf"round 1: views' queries alone {N} s +report \(queries \+ HTML \+ write\) {N} s +ratio {N}x",
        rf"best of 1: queries {N} s +report {N} s +ratio {N}x +file {N} KB +reconciles: yes",
        rf"gpuledger report, a whole process: {N} s",
    ),
    "fragmentation.py": (
        rf"node_fragmentation, median of 1: {N} ms",
        rf"baseline, literal Python loop: +{N} ms",
        rf"whatif placement: 2 nodes x 4 GPUs, 1 days of simulated jobs in {N} s",
        rf"fgd +frees -?{N} GPUs, -?{N} GPU-hours, -?{N} USD",
    ),
    "finops_views.py": (
        rf"gpu_hourly +{N} +{N}s +{N}s +{N}s +{N}x",
        rf"slowest analyst query over a view of the analytics tables: {N} s",
        rf"export focus --period 2026-11: {N} charges in {N} s",
        rf"baseline: COPY of that month's cost_allocation rows to Parquet {N} s",
    ),
    "dashboards.py": (
        rf"snapshot of the analytics tables: built in {N} s",
        rf"baseline: router, no query \(not found\) +{N}",
        rf"Overview: default 30 days +{N} +{N} +{N} +{N}x",
        rf"Fleet: GPU, 2 days +{N} +{N} +{N} +{N}x",
        rf"Fleet: node, whole year +{N} +{N} +{N} +{N}x",
        rf"what-if, 7 days of jobs, \+64 GPUs +{N}",
        rf"slowest callback p95 \(what-if apart\): {N} s",
    ),
    "objectstore_flush.py": (
        rf"flush to local lake +{N} rows/s +median {N} ms per flush",
        rf"flush to s3 lake +{N} rows/s +median {N} ms per flush",
        rf"ratio local/s3 {N}x",
    ),
    "objectstore_analytics.py": (
        rf"first +{N} +{N} +{N} +{N} +{N} +{N}x +{N} +{N} +{N} +{N}",
        rf"incremental +{N} +{N} +{N} +{N} +{N} +{N}x +{N} +{N} +{N} +{N}",
        r"requests per run: .*most S3 extra: ",
    ),
    "objectstore_views.py": (
        rf"tenant_daily +{N} +{N}s +{N}s +{N}x +{N}s +{N}s",
        rf"focus_cost +{N} +{N}s +{N}s +{N}x +{N}s +{N}s",
        rf"load average \(1, 5, 15 min\): {N} {N} {N}",
    ),
    "parquet_checksums.py": (
        rf"flush \(8 GPUs x 3\) +{N} +{N} ms +{N} ms +{N}x +{N}x",
        rf"polars read +check +{N}x",
        rf"single-bit flips in the pages read back silently as other values: polars {N} of {N}, lake \+ check 0 of {N}",
    ),
    "sql_output.py": (
        rf"gpuledger sql --format csv +{N} rows +{N} bytes +{N} s +peak RSS {N} GB",
        rf"baseline: DuckDB COPY, csv +{N} rows +{N} bytes +{N} s +peak RSS {N} GB",
        rf"ratio parquet: {N}x time, {N}x peak RSS",
    ),
    "enforcer_load.py": (
        rf"sustained 100 req/s for 2 s: achieved {N} req/s .*errors 0",
        rf"the most it sustains \(unpaced, 2 s\): {N} req/s",
        rf"baseline GET /healthz \(unpaced, 2 s\): {N} req/s",
        rf"audit: {N} decisions in admission_decisions",
    ),
    "mixed_fleet.py": (
        rf"{N} devices \({N} nodes x {N}\), {N} days at {N} s",
        rf"nvidia-only +analyze median {N} s .* unpriced 0$",
        rf"mixed +analyze median {N} s .* unpriced 0$",
        rf"partitioned +analyze median {N} s .* unpriced 0$",
        rf"ratio mixed / nvidia-only {N}x",
        rf"ratio partitioned / nvidia-only {N}x",
    ),
}
# A script that cannot run at all without a tool: its test is skipped where the tool is missing.
TOOLS = {"enforcer_load.py": "wrk"}
# Parts a script runs only where their input or tool is here (it prints that it skipped them otherwise).
EXTRA = {
    "fragmentation.py": ((SHARED / "data/traces/alibaba-gpu-v2023").is_dir(), rf"fgd +: {N} pods in {N} s"),
    "dashboards.py": (shutil.which("chromedriver") is not None, rf"^Overview +{N} +{N}$"),
}


def test_every_benchmark_has_a_tiny_run():
    scripts = {p.name for p in BENCH.glob("*.py") if not p.name.startswith("_")}
    assert scripts == set(FIGURES)


@pytest.mark.parametrize("script", sorted(FIGURES))
def test_benchmark_runs_tiny(script):
    tool = TOOLS.get(script)
    if tool and shutil.which(tool) is None:
        pytest.skip(f"{script} needs {tool} on PATH (Debian package {tool})")
    figures = FIGURES[script]
    here, extra = EXTRA.get(script, (False, ""))
    if here:
        figures = (*figures, extra)
    # TMPDIR: the lakes and files a script makes in temp dirs land in a folder removed after it, even when it fails
    # midway. A short one, not tmp_path: Chromium puts its singleton socket there, and a Unix socket's path has at
    # most 107 bytes (under pytest-xdist tmp_path is long enough that Chromium exits at start).
    scratch = tempfile.mkdtemp(prefix="gl-bench-")
    try:
        done = subprocess.run(
            [sys.executable, str(BENCH / script), "--tiny"],
            cwd=REPO,
            env={**os.environ, "TMPDIR": scratch},
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert done.returncode == 0, (
        f"{script} --tiny exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    )
    missing = [f for f in figures if not re.search(f, done.stdout, re.M)]
    assert not missing, f"{script} --tiny did not print {missing}:\n{done.stdout}"
