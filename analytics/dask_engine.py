"""The pass over raw samples on a Dask cluster: `gpuledger analyze --scheduler tcp://HOST:8786`.

Each task is one UTC day, and runs the function the local path runs (runner.telemetry_day) on a worker that reads
the lake at the same path (a shared filesystem) or the same object-store lake. On a filesystem the worker writes its
day's files into a staging folder of the lake, `_state/staging/<run>/`, outside every table's glob, so no reader
sees them. The client publishes a chunk's files (a rename each: the Store's Staging) only once every task of
the chunk has succeeded: a worker killed mid-task leaves at most a file in staging, never a partial or duplicated
partition. On an object store the worker returns its day's Parquet objects to the client (a day of 1,000 GPUs'
rollups is a few MB), which puts a chunk's objects once every task of it succeeded: nothing is staged, so nothing is
left. Dask reruns a task whose worker died (up to `distributed.scheduler.allowed-failures` times); a task that still
fails fails the run with one line naming its days, and the next run redoes them (the watermark moves only after the
whole pass).

Only runner.run imports this module, and only when a scheduler is given: the local path never imports Dask.
"""

from __future__ import annotations

import datetime as dt
import re
import time
import uuid
from collections.abc import Iterator

import polars as pl

from gpuledger.analytics.runner import CLASHES, TELEMETRY, telemetry_day
from gpuledger.errors import ClusterError, LakeError
from gpuledger.lake import LakeWriter
from gpuledger.store import Staging, Store, open_store

CONNECT_TIMEOUT_S = 5.0  # a scheduler that does not answer within this fails the run before it touches the lake
# What Client() is given: tcp:// or tls://, a host (a name, IPv4 or [IPv6]) and a port. Checked before connecting,
# because a Client that failed to parse its address still prints a traceback when it is collected.
_ADDRESS = re.compile(r"^(tcp|tls)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):\d{1,5}$")


def stage_day(
    lake: str, staging: Staging, day: dt.date, lo: dt.datetime, hi: dt.datetime, allocs: pl.DataFrame
) -> dict[str, tuple[int, list] | pl.DataFrame]:
    """A task, run on a worker: telemetry_day's rows, staged. Returns per table its rows and the handles the client
    publishes, and under CLASHES the day's clash rows themselves.

    Raises ClusterError when this worker does not see the run's staging (Staging.stage): it does not see the
    client's lake, and would read no samples and publish empty days."""
    staging.check()
    writer = LakeWriter(lake)
    out = telemetry_day(lake, day, lo, hi, allocs)
    staged = {job: (out[job].height, writer.stage_partitions(staging, job, out[job], job)) for job in TELEMETRY}
    return {**staged, CLASHES: out[CLASHES]}  # a few rows: they travel with the result


def _read(lake: str, key: str) -> str | None:
    try:
        data = open_store(lake).get(key)
        return None if data is None else data.decode()
    except (OSError, LakeError):
        return None


class DaskEngine:
    """A client of the Dask scheduler at `address`, for one run (a context manager: it closes the connection).

    Raises ClusterError naming the address when it is malformed, Dask is not installed, or the scheduler does not
    answer within `timeout_s`."""

    def __init__(self, address: str, timeout_s: float = CONNECT_TIMEOUT_S):
        self.address = address
        if not _ADDRESS.match(address):
            raise ClusterError(f"Dask scheduler address {address!r} is not tcp://HOST:PORT (or tls://HOST:PORT)")
        try:
            import distributed
        except ImportError as e:
            raise ClusterError(
                f"Dask scheduler {address} given, but Dask is not installed here: pip install 'gpuledger[dask]'"
            ) from e
        self._distributed = distributed
        try:
            self.client = distributed.Client(address, timeout=timeout_s, set_as_default=False)
        except (OSError, TimeoutError) as e:
            raise ClusterError(f"Dask scheduler {address} does not answer within {timeout_s:g} s") from e

    def __enter__(self) -> DaskEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.client.close()

    def _check_workers(self, lake: Store, staging: Staging) -> None:
        """Every worker reads a token the client wrote into the lake: the same lake, not one of the same name (a
        folder at the same path, or the same object store reached with the workers' own settings)."""
        token = uuid.uuid4().hex
        key = staging.probe(token)
        seen = self.client.run(_read, str(lake), key)
        if not seen:
            raise ClusterError(f"Dask scheduler {self.address} has no workers")
        blind = sorted(w for w, got in seen.items() if got != token)
        if blind:
            raise ClusterError(
                f"Dask worker(s) {', '.join(blind)} do not see the lake at {lake}: workers need the same lake "
                "(a folder at the same path, or the same object store with their own AWS settings)"
            )

    def telemetry_chunks(
        self,
        lake: Store,
        writer: LakeWriter,
        chunks: list[list[dt.date]],
        lo: dt.datetime,
        hi: dt.datetime,
        allocs: pl.DataFrame,
        found: list[pl.DataFrame],
    ) -> Iterator[dict[str, tuple[int, float]]]:
        """runner._telemetry_chunks on the cluster: every day is submitted at once (the cluster works ahead), and
        per chunk, in order, {table: (rows, seconds)} once the chunk's files are published. gpu_5min's seconds are
        the wait for the chunk's tasks, the others' their share of publishing. Each day's CLASHES go to `found`.

        Raises ClusterError naming the chunk's days that failed (after Dask's own retries); nothing of that chunk
        or any later one is published."""
        run_id = uuid.uuid4().hex[:12]
        lake = open_store(lake)
        staging = lake.staging(run_id)

        def publish(results):
            staging.publish([h for r in results for job in TELEMETRY for h in r[job][1]])

        futures = []
        try:
            self._check_workers(lake, staging)
            for chunk in chunks:
                futures.append([self._submit(lake, staging, run_id, d, lo, hi, allocs) for d in chunk])
            for chunk, fs in zip(chunks, futures, strict=True):
                mark = time.perf_counter()
                with self.client.as_current():  # wait() finds its client by context (ours is not the default)
                    self._distributed.wait(fs)
                failed = [(d, f) for d, f in zip(chunk, fs, strict=True) if f.status != "finished"]
                if failed:
                    raise ClusterError(self._failure(failed))
                results = [f.result() for f in fs]
                found.extend(r[CLASHES] for r in results)
                seconds = {"gpu_5min": time.perf_counter() - mark}
                mark = time.perf_counter()
                publish(results)
                share = (time.perf_counter() - mark) / len(TELEMETRY)
                yield {job: (sum(r[job][0] for r in results), seconds.get(job, 0.0) + share) for job in TELEMETRY}
        finally:
            self.client.cancel([f for fs in futures for f in fs])
            staging.clean()

    def _submit(self, lake: Store, staging: Staging, run_id: str, day: dt.date, lo, hi, allocs: pl.DataFrame):
        midnight = dt.datetime.combine(day, dt.time(), dt.timezone.utc)
        # Only the day's allocations travel with its task (telemetry_day clips them to the day).
        mine = allocs.filter((pl.col("end") > midnight) & (pl.col("start") < midnight + dt.timedelta(days=1)))
        key = f"telemetry-{day.isoformat()}-{run_id}"
        return self.client.submit(stage_day, str(lake), staging, day, lo, hi, mine, key=key)

    def _failure(self, failed: list) -> str:
        days = ", ".join(d.isoformat() for d, _ in failed)
        first = failed[0][1]
        why = "cancelled" if first.status == "cancelled" else f"{type(first.exception()).__name__}: {first.exception()}"
        why = why.splitlines()[0][:200] if why else "no reason given"
        return (
            f"Dask scheduler {self.address}: the telemetry pass failed for day(s) {days} ({why}); none of their files "
            "were published: run analyze again"
        )
