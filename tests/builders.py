"""What the tests build their cases from, so that each case is written once and reads the same everywhere.

- Times: `at(day, h, m, s, us)`, a UTC time in November 2026 (every hand-built case lives there), and `epoch_us`.
- Jobs: `job_state(...)`, one row of the raw `jobs` table.
- Allocations: `allocation(...)` and `allocations(...)`, intervals of GPU held as the analytics read them.
- Lakes: `make_lake(...)`, a simulated lake at a fixed seed ending at `END`, and `write_rows(...)` for a
  hand-built one; `differences(a, b, table)` and `assert_same_lake(a, b)` compare two lakes' rows (EXCEPT ALL).
- Lakes on each kind of Store (the `store` fixture): `put_lake(local, store)`, `all_keys(store)`, `on_disk(store,
  dest)` for a local copy, and `canonical(frame)`, a query's rows in one order.
- Kubernetes objects: real fixture objects, deserialized by the real kubernetes client. `pod("name")` loads
  tests/fixtures/k8s/<name>.yaml and turns it into a V1Pod through ApiClient.deserialize, the same code path a
  watch event takes. `derived(...)` edits a copy of a real pod's dict first; each helper says what it changes, so
  a derived object is never mistaken for a captured one.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path

import duckdb
import polars as pl
import yaml

from gpuledger import schema
from gpuledger.config import defaults
from gpuledger.lake import LakeWriter, frame_from_rows, table_files
from gpuledger.store import Store

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
H100 = "NVIDIA H100 80GB HBM3"
END = dt.datetime(2026, 11, 2, tzinfo=UTC).timestamp()  # a Monday, 00:00 UTC: where every simulated lake ends
K8S = Path(__file__).parent / "fixtures" / "k8s"


# -- times ---------------------------------------------------------------------------------------------------------
def at(day: int, h: int = 0, m: int = 0, s: int = 0, us: int = 0, *, month: int = 11) -> dt.datetime:
    """A UTC time in 2026: `at(2, 10, 30)` is Nov 2 10:30. The hand-built cases live in November 2026 (Nov 2 is
    END's Monday), so `month` is given only by a case that is elsewhere (the March traces of the importers)."""
    return dt.datetime(2026, month, day, h, m, s, us, tzinfo=UTC)


def epoch_us(t: dt.datetime) -> int:
    """`t` as the lake's raw time columns hold it: integer microseconds since the epoch (exact, no float)."""
    return (t - EPOCH) // dt.timedelta(microseconds=1)


# -- jobs ----------------------------------------------------------------------------------------------------------
def job_state(job_id: str, status: str, updated_at: dt.datetime, **columns) -> dict:
    """One row of the raw `jobs` table: `job_id` seen `status` at `updated_at`, in cluster "c", from source "test".
    `columns` set any other column of the table; datetimes become its integer microseconds."""
    row = {"updated_at": updated_at, "cluster": "c", "job_id": job_id, "status": status, "source": "test", **columns}
    return {k: epoch_us(v) if isinstance(v, dt.datetime) else v for k, v in row.items()}


def finished_job(
    job_id: str, tenant: str, gpu: str | None, start: dt.datetime, end: dt.datetime, namespace: str | None = None
) -> dict:
    """A one-H100 job of `tenant` in cluster "default" on node n1 that ran on `gpu` (None: no GPU named) from `start`
    to `end` and succeeded: its final state, as the k8s source writes it."""
    return job_state(
        job_id,
        "succeeded",
        end,
        cluster="default",
        tenant=tenant,
        namespace=namespace or tenant,
        pod=f"pod-{job_id}",
        gpu_model=H100,
        gpus=1.0,
        gpu_sharing="none",
        submitted_at=start,
        scheduled_at=start,
        started_at=start,
        finished_at=end,
        node="n1",
        gpu_uuids=[gpu] if gpu else [],
    )


# -- allocations ---------------------------------------------------------------------------------------------------
def allocation(
    job_id: str, tenant: str, gpu_uuid: str | None, share: float, start: dt.datetime, end: dt.datetime, **columns
) -> dict:
    """One interval of `gpu_allocations` as the analytics read it: `job_id` of `tenant` held `share` of `gpu_uuid`
    (1.0 whole, 1/7 a 1g MIG slice) from `start` to `end`. In cluster "c" on node "n1", an H100, namespace the
    tenant's name, pod "pod-<job_id>", unless `columns` say otherwise."""
    row = dict(
        cluster="c",
        job_id=job_id,
        tenant=tenant,
        namespace=tenant,
        pod=f"pod-{job_id}",
        node="n1",
        gpu_model=H100,
        gpu_uuid=gpu_uuid,
        share=share,
        start=start,
        end=end,
    )
    return row | columns


def allocations(*rows: dict, **columns) -> pl.LazyFrame:
    """The `allocation(...)` rows as the frame the analytics take; `columns` are set on every row."""
    return pl.LazyFrame([r | columns for r in rows], schema_overrides={"start": schema.UTC_US, "end": schema.UTC_US})


# -- lakes ---------------------------------------------------------------------------------------------------------
def make_lake(
    path: Path, *, nodes=3, gpus=4, days=1.0, step_s=60, seed=7, models=("H100", "A100", "L40S"), end_s=END, workers=1
):
    """A lake the real simulator writes at a fixed seed, `days` up to `end_s`: reproducible to the value."""
    from gpuledger.collector.sim.backfill import backfill

    return backfill(
        defaults(),
        path,
        end_s - days * 86400,
        end_s,
        step_s,
        nodes=nodes,
        gpus_per_node=gpus,
        models=models,
        seed=seed,
        workers=workers,
    )


def write_rows(lake: Path, table: str, rows: list[dict], name: str = "test") -> list[Path]:
    """Hand-built rows into `table` of `lake` as a writer puts them (typed by the schema, a file per date, named
    part-<name>): the same name again replaces that file, another name adds one."""
    return LakeWriter(lake).write(table, frame_from_rows(table, rows), name)


# -- lakes on each kind of Store (conftest's `store` fixture), through the Store's interface only -------------------
def put_lake(local: Path, store: Store) -> Store:
    """Every file of the local lake `local` (its spool aside) under `store`, at the same keys. Returns the store."""
    files = [f for f in sorted(local.rglob("*")) if f.is_file() and f.relative_to(local).parts[0] != "_spool"]
    store.put_many([(f.relative_to(local).as_posix(), f.read_bytes()) for f in files])
    return store


def all_keys(store: Store) -> set[str]:
    """Every key under the store's root, relative to it (a compaction's records and the analytics' state too)."""
    if store.folder is not None:
        return {p.relative_to(store.folder).as_posix() for p in store.folder.rglob("*") if p.is_file()}
    import obstore

    prefix = f"{store.loc.key}/" if store.loc.key else ""
    return {m["path"][len(prefix) :] for batch in obstore.list(store.client(), prefix=prefix or None) for m in batch}


def on_disk(store: Store, dest: Path, keep=lambda rel: True) -> list[str]:
    """The store's files whose key `keep` accepts, copied to the same relative paths under `dest`; their keys,
    sorted."""
    keys = sorted(k for k in all_keys(store) if keep(k))
    for key in keys:
        (dest / key).parent.mkdir(parents=True, exist_ok=True)
        (dest / key).write_bytes(store.get(key))
    return keys


def canonical(df):
    """The rows in one order whatever order a query gave them: sorted by each row's text, floats to 9 digits (a
    parallel sum may differ in its last bits from run to run)."""
    import math

    def key(row):
        return tuple(repr(round(v, 9 - int(math.log10(abs(v) or 1)))) if isinstance(v, float) else repr(v) for v in row)

    order = sorted(range(df.height), key=lambda i: key(df.row(i)))
    return df[order] if df.height else df


# -- Kubernetes objects --------------------------------------------------------------------------------------------


def lake_files(lake: Path, table: str) -> list[str]:
    """The paths of a local lake's files of `table` (lake.table_files gives their keys), for DuckDB or polars."""
    return [str(Path(lake, k)) for k in table_files(lake, table)]


def differences(a: Path, b: Path, table: str) -> tuple[int, int]:
    """(rows of a not in b, rows of b not in a) of one table of two local lakes, as multisets (DuckDB EXCEPT ALL)."""
    fa, fb = (lake_files(x, table) for x in (a, b))
    con = duckdb.connect()
    if not fa or not fb:
        count = "SELECT count(*) FROM read_parquet(?)"
        return (
            con.execute(count, [fa]).fetchone()[0] if fa else 0,
            con.execute(count, [fb]).fetchone()[0] if fb else 0,
        )
    q = "SELECT count(*) FROM (SELECT * FROM read_parquet(?, hive_partitioning=true) EXCEPT ALL "
    q += "SELECT * FROM read_parquet(?, hive_partitioning=true))"
    return con.execute(q, [fa, fb]).fetchone()[0], con.execute(q, [fb, fa]).fetchone()[0]


def assert_same_lake(a: Path, b: Path) -> int:
    """Two local lakes hold the same tables, under the same file names, with the same rows (EXCEPT ALL both ways,
    every column). Returns the rows compared, for the caller to check that the comparison was not of empty tables."""
    tables = [t for t in schema.TABLES if table_files(a, t)]
    assert tables == [t for t in schema.TABLES if table_files(b, t)]
    rows = 0
    for t in tables:
        assert table_files(a, t) == table_files(b, t), t
        extra, missing = differences(a, b, t)
        assert (extra, missing) == (0, 0), f"{t}: {extra} row(s) only in {a}, {missing} only in {b}"
        rows += duckdb.connect().execute("SELECT count(*) FROM read_parquet(?)", [lake_files(a, t)]).fetchone()[0]
    return rows


def _jsonable(o):
    if isinstance(o, dt.datetime):
        return (o if o.tzinfo else o.replace(tzinfo=dt.timezone.utc)).isoformat().replace("+00:00", "Z")
    raise TypeError(type(o))


def raw(name: str) -> dict:
    """The fixture as a plain dict, JSON-clean (unquoted YAML timestamps become RFC 3339 strings)."""
    return json.loads(json.dumps(yaml.safe_load((K8S / f"{name}.yaml").read_text()), default=_jsonable))


def deserialize(obj: dict, kind: str = "V1Pod"):
    """Exactly what the client does with a watch event line (kubernetes.watch.Watch.unmarshal_event)."""
    from kubernetes.watch import Watch  # here, not at the top: it costs ~0.4 s, and most tests build no pods

    return Watch().unmarshal_event(json.dumps({"type": "ADDED", "object": obj}), kind)["object"]


def pod(name: str):
    return deserialize(raw(name))


RESERVATION = "pod_runai_reservation_nvidia-gpu-1_running"


def derived_pending_unschedulable() -> dict:
    """Derived: the reservation pod before binding: Pending, PodScheduled=False/Unschedulable, no node."""
    d = copy.deepcopy(raw(RESERVATION))
    d["metadata"]["name"] = "trainer-pending"
    d["metadata"]["uid"] = "11111111-0000-4000-8000-000000000001"
    d["spec"].pop("nodeName", None)
    d["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": "2024-03-31T09:03:25Z",
                "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
            }
        ],
    }
    return d


def derived_terminated(reason: str, exit_code: int, phase: str = "Failed", pod_reason: str | None = None) -> dict:
    """Derived: the reservation pod after its container ended with `reason` (OOMKilled, Completed, ...)."""
    d = copy.deepcopy(raw(RESERVATION))
    d["status"]["phase"] = phase
    if pod_reason:
        d["status"]["reason"] = pod_reason
    cs = d["status"]["containerStatuses"][0]
    started = cs["state"]["running"]["startedAt"]
    cs["state"] = {
        "terminated": {
            "exitCode": exit_code,
            "reason": reason,
            "startedAt": started,
            "finishedAt": "2024-03-31T10:03:27Z",
        }
    }
    return d


def derived_with_limits(limits: dict, annotations: dict | None = None) -> dict:
    """Derived: the reservation pod with other GPU limits (MIG or time-sliced) instead of nvidia.com/gpu."""
    d = copy.deepcopy(raw(RESERVATION))
    c = d["spec"]["containers"][0]
    c["resources"] = {"limits": dict(limits), "requests": dict(limits)}
    d["metadata"]["annotations"] = annotations or {}
    return d


# -- the webhook as a process ---------------------------------------------------------------------------------------
def serve_enforcer(tmp_path: Path, lake, replica: str, env: dict | None = None, start_s: float = 30):
    """`gpuledger enforcer serve` as a process, with certificates made once under tmp_path/tls; returns it and an
    HTTPS client once /healthz answers (within `start_s`: an object-store lake's start lists the bucket)."""
    import os
    import socket
    import subprocess
    import sys
    import time

    import httpx

    tls = tmp_path / "tls"
    if not tls.exists():
        subprocess.run([sys.executable, "-m", "gpuledger.cli", "enforcer", "certs", "--out", str(tls)], check=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    if env is None:
        env = os.environ | {"GPULEDGER_CONFIG": "", "KUBECONFIG": str(tmp_path / "no-kubeconfig")}
    env = dict(env)
    env.pop("KUBERNETES_SERVICE_HOST", None)  # not in a pod, whatever runs the tests
    p = subprocess.Popen(
        [sys.executable, "-m", "gpuledger.cli", "enforcer", "serve", "--cert", str(tls / "tls.crt")]
        + ["--key", str(tls / "tls.key"), "--port", str(port), "--host", "127.0.0.1", "--lake", str(lake)]
        + ["--replica", replica],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    # verify=False: the certificate names the Service, not 127.0.0.1 (test_server_tls checks it against the CA).
    client = httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=False, timeout=10)
    deadline = time.time() + start_s
    while True:
        try:
            if client.get("/healthz").status_code == 200:
                return p, client
        except httpx.HTTPError:
            if time.time() > deadline or p.poll() is not None:
                p.kill()
                raise AssertionError("enforcer serve did not start: " + p.communicate()[1]) from None
            time.sleep(0.2)


def stop_enforcer(p, sig: int | None = None, wait_s: float = 30) -> str:
    """Signal the served webhook (SIGINT, Ctrl-C, unless told) and return its stderr, which has no traceback."""
    import signal
    import subprocess

    p.send_signal(signal.SIGINT if sig is None else sig)
    try:
        err = p.communicate(timeout=wait_s)[1]
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError("enforcer serve did not stop: " + p.communicate()[1]) from None
    assert "Traceback" not in err, err
    return err


# -- dashboards ----------------------------------------------------------------------------------------------------
def page_request(path: str, search: str = "") -> dict:
    """The body a browser POSTs to /_dash-update-component to draw page `path` (the router's callback: the page, the
    nav and the freshness line from the URL), for tests that render a page without a browser."""
    return {
        "output": "..page.children...nav.children...freshness.children..",
        "outputs": [
            {"id": "page", "property": "children"},
            {"id": "nav", "property": "children"},
            {"id": "freshness", "property": "children"},
        ],
        "inputs": [
            {"id": "url", "property": "pathname", "value": path},
            {"id": "url", "property": "search", "value": search},
            {"id": "refresh", "property": "n_intervals", "value": None},
        ],
        "changedPropIds": ["url.pathname"],
        "state": [],
    }


# -- a closed and an open day of scrapes (compaction) ---------------------------------------------------------------
SCRAPES_T0 = 1_793_491_200.0  # 2026-11-01T00:00:00Z: three scrapes before it (a closed day), three after


def fill_scrapes(store, tmp_path: Path) -> int:
    """Six scrapes of a 2-node simulated fleet, each flushed as its own file: three on the closed day (Oct 31),
    three on the open one (Nov 1). Returns the gpu_samples rows."""
    from dataclasses import replace

    from gpuledger.collector import sources
    from gpuledger.config import SimConfig, defaults
    from gpuledger.spool import records_to_frames

    t0 = SCRAPES_T0
    cfg = replace(defaults(), simulator=SimConfig(nodes=2, gpus_per_node=4, models=("H100",)))
    src = sources.make("sim", cfg, tmp_path / "simstate", t0 - 40)
    writer = LakeWriter(store)
    rows = 0
    for k, t in enumerate((t0 - 30, t0 - 20, t0 - 10, t0 + 10, t0 + 20, t0 + 30)):
        frames = records_to_frames([(b.table, b.columns) for b in src.collect(t) if b.rows])
        for table, df in frames.items():
            writer.write(table, df, f"n1-{k:03d}")
        rows += frames["gpu_samples"].height
    return rows


def day_files(store, date: dt.date) -> list[str]:
    """The names of gpu_samples' files of `date` a reader reads now."""
    return [key.rsplit("/", 1)[-1] for key in table_files(store, "gpu_samples") if f"date={date}" in key]


# -- screenshots for docs/screenshots (GPULEDGER_SCREENSHOTS=docs/screenshots pytest tests/dashboards) -----------------
def save_screenshot(dash_duo, name: str) -> None:
    """The whole page as the browser drew it, 1400 px wide (tests/conftest.py's window), into the folder
    GPULEDGER_SCREENSHOTS names; nothing when it is unset. The window grows to the page's height for the shot (up to
    8,000 px) and goes back, so a long page is one picture, not its first screen."""
    import os
    import time

    folder = os.environ.get("GPULEDGER_SCREENSHOTS")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    driver = dash_duo.driver
    width, height = driver.get_window_size()["width"], driver.get_window_size()["height"]
    page = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(max(page, height), 8000))
    time.sleep(1.0)  # plotly redraws to the new size
    try:
        driver.save_screenshot(str(Path(folder) / name))
    finally:
        driver.set_window_size(width, height)
