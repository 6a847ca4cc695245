"""The `gpuledger` command. Each subcommand parses, calls one library function and prints.

Stages are imported inside the commands that need them (the core imports no stage at module level), which
also keeps `gpuledger --help` fast.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import signal
import sys
import threading
import time
from pathlib import Path

import click

from gpuledger import __version__, lake_url
from gpuledger import config as config_mod
from gpuledger.errors import GpuledgerError, LakeError, SourceError, UsageError

DEFAULT_LAKE = "gpuledger-data"


class _Group(click.Group):
    """Renders every gpuledger error as one line and exit 1: they describe input or environment, not bugs."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except GpuledgerError as e:
            raise click.ClickException(f"{e.title}: {e}") from None
        except KeyboardInterrupt:
            # Every file already written is complete (atomic writes); re-running the command is safe.
            click.echo("\ninterrupted; files written so far are complete, and re-running is safe", err=True)
            ctx.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="gpuledger")
def main() -> None:
    """gpuledger: who uses which GPUs, how well, what it costs, why jobs wait.

    Start with `gpuledger up` (the whole stack on a simulated fleet when there is no GPU), then query the lake
    with `gpuledger sql "SELECT ..."`.
    """


class Ctx:
    def __init__(self, cfg: config_mod.Config, lake: Path | lake_url.S3Location):
        self.cfg = cfg
        self.lake = lake


class _LakeParam(click.ParamType):
    """--lake: a local directory (a Path, as before) or s3://bucket/prefix; any other scheme is one line."""

    name = "path|s3://bucket/prefix"

    def convert(self, value, param, ctx):
        if isinstance(value, (Path, lake_url.S3Location)):
            return value
        if lake_url.is_url(value):
            bad = lake_url.problem(value)
            return self.fail(bad, param, ctx) if bad else lake_url.parse(value)
        return click.Path(file_okay=False, path_type=Path).convert(value, param, ctx)


def common(f):
    """--lake and --config on every subcommand; resolves them into one validated Ctx."""

    @click.option(
        "--lake",
        type=_LakeParam(),
        envvar="GPULEDGER_LAKE",
        help=f"Lake directory or s3://bucket/prefix [env GPULEDGER_LAKE; else [lake] path in the config; else "
        f"./{DEFAULT_LAKE}]",
    )
    @click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar="GPULEDGER_CONFIG",
        help="Config file (TOML) [env GPULEDGER_CONFIG; else built-in defaults]",
    )
    @click.option(
        "--log-level",
        type=click.Choice(["debug", "info", "warning", "error"]),
        default="info",
        show_default=True,
        help="Logging detail on stderr.",
    )
    @functools.wraps(f)
    def wrapper(lake, config_path, log_level, **kw):
        logging.basicConfig(
            level=log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        # apscheduler logs every job run at INFO; a line per scrape would drown what matters.
        logging.getLogger("apscheduler").setLevel(max(logging.WARNING, logging.getLogger().level))
        cfg = config_mod.load(config_path)
        if lake is None:
            lake = cfg.lake.path if config_path is not None else Path(DEFAULT_LAKE)
        cfg = config_mod.with_overrides(cfg, lake)
        lake = lake_url.parse(lake)  # every command works on an s3:// lake too (docs/design/16-object-store.md)
        with lake_url.store_errors(lake):  # the store failing mid-command: one line, as at the start
            return f(Ctx(cfg, lake), **kw)

    return wrapper


def _utc(value: str | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{name} {value!r} is not an ISO-8601 time (e.g. 2026-11-01T00:00:00Z)") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.timestamp()


def _config_option(key: str, *flags: str, help: str, **kw):
    """An option that overrides the config key `key` (section.name). Its type and bounds are the key's declaration
    in gpuledger/config.py, and its help names the key and its built-in default, so neither is written twice."""
    from gpuledger.config_keys import declared

    section, name = key.split(".")
    values = getattr(config_mod.defaults(), section)
    f, k, tp = next(d for d in declared(type(values)) if d[0].name == name)
    lo, hi = (k.ge if k.gt is None else k.gt), (k.le if k.lt is None else k.lt)
    opts = {"min": lo, "max": hi, "min_open": k.gt is not None, "max_open": k.lt is not None}
    if k.choices:
        kind = click.Choice(k.choices)
    elif tp is int:
        kind = click.IntRange(lo if k.gt is None else lo + 1, hi if k.lt is None else hi - 1)
    elif tp in (float, int | float):
        kind = click.FloatRange(**opts)
    else:
        kind = None
    shown = k.shown or getattr(values, name)
    return click.option(*flags, type=kind, default=None, help=f"{help} [config {key}: {shown}]", **kw)


_interval_option = _config_option("collector.interval_s", "--interval-s", help="Seconds between scrapes.")


def _progress(label: str, length: int):
    return click.progressbar(length=length, label=label, file=sys.stderr, show_eta=True, show_pos=True)


# -- simulate -------------------------------------------------------------------------------------------
@main.command()
@_config_option("simulator.nodes", "--nodes", help="Nodes.")
@_config_option("simulator.gpus_per_node", "--gpus-per-node", help="GPUs per node.")
@click.option(
    "--days",
    type=click.FloatRange(min=0, min_open=True),
    default=7.0,
    show_default=True,
    help="Length of the window to backfill.",
)
@click.option("--step-s", type=click.IntRange(1, 86400), default=10, show_default=True, help="Seconds between samples.")
@_config_option("simulator.seed", "--seed", help="Random seed.")
@click.option("--models", default=None, help=f"Comma-separated GPU models, from: {', '.join(config_mod.SIM_MODELS)}")
@click.option("--end", default=None, help="End of the window, ISO-8601 UTC [now].")
@click.option("--workers", type=click.IntRange(1, 64), default=None, help="Worker processes [CPU count].")
@click.option(
    "--compact/--no-compact",
    default=True,
    show_default=True,
    help="Merge each closed day's files into one afterwards (as `gpuledger compact` does).",
)
@common
def simulate(ctx: Ctx, nodes, gpus_per_node, days, step_s, seed, models, end, workers, compact) -> None:
    """Backfill a historical window of a simulated fleet into the lake, as fast as possible."""
    from gpuledger.collector.sim.backfill import backfill
    from gpuledger.compaction import compact as compact_lake

    sim = ctx.cfg.simulator
    model_list = tuple(m.strip() for m in models.split(",")) if models else sim.models
    bad = [m for m in model_list if m not in config_mod.SIM_MODELS]
    if bad or not model_list:
        raise UsageError(
            f"--models: unknown model(s) {', '.join(bad) or '(none)'}; known: {', '.join(config_mod.SIM_MODELS)}"
        )
    end_s = _utc(end, "--end") or time.time()
    nodes = nodes or sim.nodes
    t0 = time.perf_counter()
    with _progress("simulating", nodes) as bar:
        report = backfill(
            ctx.cfg,
            ctx.lake,
            end_s - days * 86400,
            end_s,
            step_s,
            nodes=nodes,
            gpus_per_node=gpus_per_node or sim.gpus_per_node,
            models=model_list,
            seed=sim.seed if seed is None else seed,
            workers=workers,
            progress=bar.update,
        )
    secs = time.perf_counter() - t0
    click.echo(
        f"wrote {report.samples:,} GPU samples, {report.processes:,} process rows, {report.jobs:,} jobs, "
        f"{report.health_events:,} health events for {report.gpus:,} GPUs on {report.nodes:,} nodes "
        f"into {ctx.lake} in {secs:.1f} s ({report.samples / max(secs, 1e-9):,.0f} samples/s)"
    )
    if compact:
        # The simulator writes a file per node and day; a year of a fleet is tens of thousands of files, which
        # every query would open. The days before the window's last are closed: merge them now.
        t0 = time.perf_counter()
        end_date = dt.datetime.fromtimestamp(end_s, dt.timezone.utc).date()
        r = compact_lake(ctx.lake, today=end_date, grace_days=1)
        click.echo(
            f"merged {r.files_in:,} files of {r.partitions:,} closed day partitions into {r.files_out:,} "
            f"in {time.perf_counter() - t0:.1f} s"
        )


# -- collect --------------------------------------------------------------------------------------------
def _claim_spool(ctx: Ctx):
    """This node's spool, locked before anything else is read or written: a second `collect` or `up` on the same
    lake and node stops here with one line naming the process that holds it (SpoolError)."""
    from gpuledger.spool import Spool

    writer_id = ctx.cfg.collector.writer
    spool = Spool(ctx.cfg.collector.spool_dir or lake_url.default_spool_dir(ctx.lake, writer_id), writer_id)
    spool.lock()
    return spool


def _build_collector(
    ctx: Ctx, source_names: tuple[str, ...], on_ack=None, urls: tuple[str, ...] = (), built=(), spool=None
):
    """A Collector over the named sources (plus any already built, e.g. the NVML source `up` opened)."""
    from gpuledger.collector import sources
    from gpuledger.collector.runner import Collector
    from gpuledger.lake import LakeWriter

    spool = spool or _claim_spool(ctx)
    now = time.time()
    srcs = [*built, *(sources.make(n, ctx.cfg, ctx.lake, now, urls) for n in source_names)]
    return Collector(srcs, spool, LakeWriter(ctx.lake), ctx.cfg.cluster, spool.writer, on_ack=on_ack)


def _stop_event() -> threading.Event:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return stop


class _RegisteredSources(click.Choice):
    """The registered source names (gpuledger.config.source_names), read when --source is parsed or shown: reading
    them takes ~50 ms, which every other command would pay if they were read when this module is imported."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self):
        return config_mod.source_names()

    @choices.setter
    def choices(self, _) -> None:  # click.Choice.__init__ assigns it; the names are always read afresh
        pass


@main.command()
@click.option(
    "--source",
    "source_names",
    multiple=True,
    type=_RegisteredSources(),
    help="Source to collect from (repeatable) [config collector.sources].",
)
@click.option("--once", is_flag=True, help="Scrape once, flush to the lake and exit.")
@_interval_option
@_config_option("collector.flush_interval_s", "--flush-interval-s", help="Seconds between spool flushes.")
@click.option(
    "--url",
    "urls",
    multiple=True,
    help="dcgm-exporter page(s) for --source dcgm (repeatable), or the Prometheus server for --source prometheus.",
)
@_config_option(
    "collector.metrics_port", "--metrics-port", help="Serve the collector's own /metrics on this port (0 = off)."
)
@click.option(
    "--print-acks",
    is_flag=True,
    help="Print `ack <table> <rows> <first ts us>` on stdout once each batch is durable (for tests).",
)
@common
def collect(ctx: Ctx, source_names, once, interval_s, flush_interval_s, urls, metrics_port, print_acks) -> None:
    """Collect from the node's sources into the spool and the lake."""
    from gpuledger.collector.runner import run_until_stopped

    def ack(batch) -> None:
        first = next(iter(batch.columns.values()))[0] if batch.columns else None
        ts_col = batch.columns.get("ts") or batch.columns.get("updated_at") or batch.columns.get("last_seen")
        print(f"ack {batch.table} {batch.rows} {ts_col[0] if ts_col else first}", flush=True)

    col = _build_collector(ctx, source_names or ctx.cfg.collector.sources, ack if print_acks else None, urls)
    col.start(wait_for_lake=not once)  # a running collector outlasts a store that does not answer yet
    _serve_metrics(col, ctx.cfg.collector.metrics_port if metrics_port is None else metrics_port)
    if once:
        report = col.scrape()
        col.close()
        if report.failures and not report.rows:
            lines = "".join(f"\n  {f}" for f in report.failures)
            raise SourceError(f"collect --once: nothing collected, every source or target failed:{lines}")
        click.echo(f"scraped once into {ctx.lake}", err=True)
        return
    stop = _stop_event()
    iv = interval_s or ctx.cfg.collector.interval_s
    fiv = flush_interval_s or ctx.cfg.collector.flush_interval_s
    click.echo(
        f"collecting from {', '.join(s.name for s in col.sources)} every {iv:g} s into {ctx.lake}; Ctrl-C to stop",
        err=True,
    )
    try:
        run_until_stopped(lambda sch: col.schedule(sch, iv, fiv), stop)
    finally:
        col.close()
    click.echo(f"stopped after {col.scrapes} scrape(s); everything flushed to {ctx.lake}", err=True)


def _serve_metrics(col, port: int) -> None:
    """The collector's own /metrics over HTTP (a daemon thread of prometheus-client), when a port is given."""
    if not port:
        return
    from prometheus_client import start_http_server

    try:
        start_http_server(port, registry=col.metrics.registry)
    except OSError as e:
        raise UsageError(f"--metrics-port {port}: cannot listen ({e.strerror})") from e
    click.echo(f"collector metrics on http://0.0.0.0:{port}/metrics", err=True)


def _prepare_sim_history(ctx: Ctx, interval_s: float, backfill_days: float | None) -> None:
    """An empty lake gets a backfilled history; a lake whose fleet stopped a while ago gets the gap filled."""
    from gpuledger.collector.sim import state as sim_state
    from gpuledger.collector.sim.backfill import backfill, backfill_history
    from gpuledger.lake import has_data

    cfg, sim = ctx.cfg, ctx.cfg.simulator
    st = sim_state.load(ctx.lake, cfg.cluster)
    now = time.time()
    days = sim.backfill_days if backfill_days is None else backfill_days
    if st is None and not has_data(ctx.lake, "gpu_samples") and days > 0:
        click.echo(
            f"empty lake: backfilling {days:g} days every {sim.backfill_step_s:g} s, and {sim.history_days:g} days "
            f"before them every {sim.history_step_s:g} s, of a {sim.nodes}-node simulated fleet",
            err=True,
        )
        t0 = time.perf_counter()
        with _progress("backfill", sim.nodes) as bar:
            r = backfill_history(cfg, ctx.lake, now, days, progress=bar.update)
        click.echo(
            f"backfilled {r.samples:,} GPU samples and {r.jobs:,} jobs in {time.perf_counter() - t0:.1f} s", err=True
        )
        return
    elif st is not None and now - st.written_until_s > 3 * interval_s:
        click.echo(f"filling the {(now - st.written_until_s) / 3600:.2f} h since the fleet last ran", err=True)
        start, kw = (
            st.written_until_s,
            dict(
                nodes=st.nodes,
                gpus_per_node=st.gpus_per_node,
                models=st.models,
                seed=st.seed,
                load=st.load,
                epoch_s=st.epoch_s,
            ),
        )
    else:
        return
    t0 = time.perf_counter()
    with _progress("backfill", kw["nodes"]) as bar:
        r = backfill(cfg, ctx.lake, start, now, int(sim.backfill_step_s), progress=bar.update, **kw)
    click.echo(
        f"backfilled {r.samples:,} GPU samples and {r.jobs:,} jobs in {time.perf_counter() - t0:.1f} s", err=True
    )


# -- up -------------------------------------------------------------------------------------------------
@main.command()
@_interval_option
@_config_option("simulator.backfill_days", "--backfill-days", help="Recent days to simulate on an empty lake.")
@common
def up(ctx: Ctx, interval_s, backfill_days) -> None:
    """Run the whole stack in one process: collector, periodic analytics and compaction."""
    from gpuledger.collector import sources
    from gpuledger.collector.runner import run_until_stopped
    from gpuledger.compaction import compact

    _checked_models(ctx)  # a quota key naming no GPU model: one line now, not a failed analysis later
    spool = _claim_spool(ctx)  # before anything touches the lake: a second `up` on it stops here
    nvml_source, why = sources.open_nvml(ctx.cfg)  # NVML is initialised here, once for the whole process
    source = "nvml" if nvml_source else "sim"
    click.echo(
        f"collector: NVML ({why})" if nvml_source else f"collector: the simulated fleet, because {why}", err=True
    )

    cfg = ctx.cfg
    if source == "sim":
        _prepare_sim_history(ctx, interval_s or cfg.collector.interval_s, backfill_days)
    # Before anything reads the lake: merges the backfilled days, and moves a lake of the earlier layout.
    compact(ctx.lake, grace_days=2)

    col = _build_collector(
        ctx, () if nvml_source else ("sim",), built=(nvml_source,) if nvml_source else (), spool=spool
    )
    col.start()
    _serve_metrics(col, cfg.collector.metrics_port)
    iv = interval_s or cfg.collector.interval_s

    def jobs(sch) -> None:
        col.schedule(sch, iv, cfg.collector.flush_interval_s)
        sch.add_job(
            lambda: compact(ctx.lake, grace_days=2),
            "interval",
            hours=1,
            id="compact",
            coalesce=True,
            max_instances=1,
        )
        from gpuledger.analytics.runner import schedule as analytics_schedule

        analytics_schedule(sch, cfg, ctx.lake)

    stop = _stop_event()
    db = cfg.dashboard
    server = _dashboard_server(ctx, db.host, db.port)
    threading.Thread(target=server.serve_forever, daemon=True, name="dashboards").start()
    click.echo(
        f"gpuledger is up: lake {ctx.lake.resolve()}, scraping every {iv:g} s, dashboards on "
        f"http://{db.host}:{db.port}/. "
        f'Try: gpuledger sql --lake {ctx.lake} "SELECT * FROM nodes". Ctrl-C to stop.',
        err=True,
    )
    try:
        run_until_stopped(jobs, stop)
    finally:
        col.close()
    click.echo(f"stopped cleanly after {col.scrapes} scrape(s); everything flushed to {ctx.lake}", err=True)


# -- sql ------------------------------------------------------------------------------------------------
@main.command()
@click.argument("query", required=False)
@click.option(
    "--file",
    "sql_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the query from this .sql file instead of the command line.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "csv", "json", "parquet"]), default="table", show_default=True
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),  # a str: an empty --out stays '' for the message (a Path would make it '.')
    default=None,
    help="Write the result to this file instead of stdout (required for parquet).",
)
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="NAME[:TYPE]=VALUE",
    help="A query parameter, used in the query as $NAME (repeatable); never pasted into the SQL. TYPE: str, int, "
    "float, bool, date or timestamp (UTC unless the value says); without one a number is a number, else a string.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="At most this many rows [table format: 50; other formats: all].",
)
@click.option("--timeout-s", type=click.FloatRange(min=0, min_open=True), default=300, show_default=True)
@common
def sql(ctx: Ctx, query, sql_file, fmt, out, params, limit, timeout_s) -> None:
    """Run a read-only DuckDB query over the lake, with every view from sql/ loaded."""
    from gpuledger.focus_export import finops_variables
    from gpuledger.query import Lake, parse_param, require_lake

    if (query is None) == (sql_file is None):
        raise UsageError("give a query, or --file FILE.sql (not both)")
    if sql_file is not None:
        try:
            query = sql_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--file {str(sql_file)!r}: cannot read it: {e}") from None

    if fmt == "parquet" and out is None:
        raise UsageError("--format parquet writes binary data: give a file with --out")
    out = _out_path(out)
    named = dict(parse_param(p) for p in params)
    if fmt == "table" and limit is None:
        limit = 50
    require_lake(ctx.lake)
    with Lake(ctx.lake, variables=finops_variables(ctx.cfg)) as lake:
        res = lake.execute(query, named or None, limit=limit, timeout_s=timeout_s)
    _print_result(res, fmt, out)


def _out_path(out: str | None) -> Path | None:
    """--out checked before the query runs: a file name, in a folder that exists."""
    if out is None:
        return None
    path = Path(out)
    if out == "" or path.is_dir():
        raise UsageError(f"--out {out!r}: not a file name")
    if not path.parent.is_dir():
        raise UsageError(f"--out {out!r}: the folder {str(path.parent)!r} does not exist")
    return path


def _write_out(out: Path, data: bytes) -> None:
    """One line naming the file and the problem if it cannot be written, and no partial file left."""
    from gpuledger.atomic import write_bytes_atomic

    try:
        if out.exists() and not out.is_file():
            out.write_bytes(data)  # /dev/stdout, a pipe: written in place (a temp file beside it cannot replace it)
        else:
            write_bytes_atomic(out, data)  # temp file and rename: a failure leaves the old file or none
    except LakeError as e:  # the write's OSError, translated ("disk full while writing ...")
        raise click.ClickException(f"--out {str(out)!r}: {e}") from None
    except OSError as e:
        raise click.ClickException(f"--out {str(out)!r}: cannot write it: {e.strerror or e}") from None


def _print_result(res, fmt: str, out: Path | None) -> None:
    import io

    import polars as pl

    df = res.frame
    if fmt == "parquet":
        buf = io.BytesIO()
        df.write_parquet(buf)
        _write_out(out, buf.getvalue())
    elif fmt == "csv":
        text = df.write_csv()
    elif fmt == "json":
        text = json.dumps(df.to_dicts(), default=str, indent=1)
    else:
        with pl.Config(
            tbl_rows=-1, tbl_cols=-1, tbl_width_chars=200, fmt_str_lengths=60, tbl_hide_dataframe_shape=True
        ):
            text = str(df)
        if res.truncated:
            text += f"\n(first {df.height} rows; use --limit or --format csv for more)"
    if fmt != "parquet":
        if out:
            _write_out(out, (text + ("" if text.endswith("\n") else "\n")).encode())
        else:
            click.echo(text.rstrip("\n"))
    if out:
        click.echo(f"wrote {df.height} row(s) to {out}", err=True)


@main.command()
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write it here [stdout].")
@common
def views(ctx: Ctx, out) -> None:
    """Print one SQL script defining every view over the lake, for a plain DuckDB session.

    In the duckdb CLI: `.read gpuledger.sql`; in Python: `duckdb.connect().execute(open("gpuledger.sql").read())`.
    """
    from gpuledger.atomic import write_bytes_atomic
    from gpuledger.query import require_lake, views_script

    text = views_script(require_lake(ctx.lake))
    if out is None:
        click.echo(text, nl=False)
    else:
        write_bytes_atomic(out, text.encode())
        click.echo(f"wrote the views over {ctx.lake} to {out}", err=True)


# -- dashboard -----------------------------------------------------------------------------------------
def _dashboard_app(ctx: Ctx):
    import os

    from gpuledger.analytics.whatif import for_dashboard
    from gpuledger.dashboards.app import create_app

    db = ctx.cfg.dashboard
    auth = None
    if db.auth_user:
        password = os.environ.get(db.auth_password_env)
        if not password:
            raise UsageError(
                f"dashboard.auth_password_env names {db.auth_password_env!r}, which is not set in the environment"
            )
        auth = (db.auth_user, password)
    from gpuledger.focus_export import finops_variables

    return create_app(ctx.lake, whatif=for_dashboard, auth=auth, variables=finops_variables(ctx.cfg))


def _dashboard_server(ctx: Ctx, host: str, port: int):
    """Bind first, so a port in use is one clear line, not a traceback from a server thread."""
    import socket

    from werkzeug.serving import make_server

    app = _dashboard_app(ctx)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request
    # werkzeug reports a busy port by printing and exiting; probe first to say it our way.
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as e:
            raise UsageError(
                f"cannot serve the dashboards on {host}:{port}: {e.strerror} (set [dashboard] port, or --port)"
            ) from None
    return make_server(host, port, app.server, threaded=True)


@main.command()
@_config_option("dashboard.port", "--port", help="TCP port.")
@_config_option("dashboard.host", "--host", help="Address to listen on.")
@common
def dashboard(ctx: Ctx, port, host) -> None:
    """Serve the management dashboards (read-only) over the lake's analytics."""
    host, port = host or ctx.cfg.dashboard.host, port or ctx.cfg.dashboard.port
    server = _dashboard_server(ctx, host, port)
    click.echo(f"dashboards on http://{host}:{port}/ over {ctx.lake.resolve()}; Ctrl-C to stop", err=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


# -- enforcer ------------------------------------------------------------------------------------------
@main.group()
def enforcer() -> None:
    """The admission webhook: quota, budget, idle-hog and fair-share decisions from the analytics."""


def _checked_models(ctx: Ctx) -> list[str]:
    """The lake's GPU models once every quota key names one (ConfigError otherwise), read under the lake's read
    lock: an analytics run or compaction may be replacing the files it reads (gpuledger.lake_lock). An object-store
    lake has no lock (its objects are never replaced; a compaction's merge records say what to skip) and is read
    without writing the analytics' day memos into it: the webhook only reads the lake."""
    from gpuledger.analytics.decisions import checked_models
    from gpuledger.lake_lock import reading

    if isinstance(ctx.lake, lake_url.S3Location):
        return checked_models(ctx.lake, ctx.cfg, read_only=True)
    with reading(ctx.lake):
        return checked_models(ctx.lake, ctx.cfg)


@enforcer.command(name="serve")
@click.option("--cert", required=True, type=click.Path(exists=True, dir_okay=False), help="Serving certificate (PEM).")
@click.option("--key", required=True, type=click.Path(exists=True, dir_okay=False), help="Its private key (PEM).")
@click.option("--port", type=click.IntRange(1, 65535), default=8443, show_default=True)
@click.option("--host", default="0.0.0.0", show_default=True)
@click.option("--replica", default=None, help="This replica's name in the audit [the host name].")
@common
def enforcer_serve(ctx: Ctx, cert, key, port, host, replica) -> None:
    """Serve POST /validate and /mutate over TLS (AdmissionReview v1), with /healthz, /readyz and /metrics."""
    import socket
    import ssl

    import uvicorn
    from apscheduler.schedulers.background import BackgroundScheduler

    from gpuledger.enforcer.connections import server_config
    from gpuledger.enforcer.decide import Settings
    from gpuledger.enforcer.server import Webhook, create_app
    from gpuledger.enforcer.store import AuditWriter, load_table

    _checked_models(ctx)  # a quota key that names no GPU model of the lake would cap nothing
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as e:
        raise UsageError(f"--cert {cert} / --key {key}: not a usable certificate and key: {e}") from None
    replica = replica or socket.gethostname().split(".")[0]
    from gpuledger.lake import check_name

    try:
        check_name("--replica", replica)  # it names the replica's spool folder and lake files
    except LakeError as e:
        raise UsageError(str(e)) from None
    namespaces = None
    if ctx.cfg.enforcer.tenant_label:
        try:
            from gpuledger.enforcer.namespaces import NamespaceTenants
            from gpuledger.kube_watch import load_api

            namespaces = NamespaceTenants(load_api(), ctx.cfg.enforcer.tenant_label)
        except ImportError:
            why = "the kubernetes client is not installed: pip install 'gpuledger[k8s]'"
        except GpuledgerError as e:  # no cluster to watch (a local run): the config's map still applies
            why = str(e)
        if namespaces is None:
            click.echo(
                f"enforcer: namespace labels are not watched ({why}); tenants come from the config only", err=True
            )
    audit = AuditWriter(ctx.lake, replica, ctx.cfg.cluster)
    table = load_table(ctx.lake, ctx.cfg.cluster)  # this cluster's rows only: one lake may hold several
    hook = Webhook(Settings.of(ctx.cfg), table, audit, cluster=ctx.cfg.cluster, namespaces=namespaces)
    sched = BackgroundScheduler(timezone="UTC")
    sched.add_job(
        lambda: hook.set_table(load_table(ctx.lake, ctx.cfg.cluster)),
        "interval",
        seconds=ctx.cfg.enforcer.refresh_s,
        id="decision-table",
        coalesce=True,
        max_instances=1,
    )
    audit.start()
    sched.start()
    if namespaces is not None:
        namespaces.start()
    click.echo(f"enforcer on https://{host}:{port} (validate, mutate) over {ctx.lake.resolve()}", err=True)

    def stop() -> None:
        sched.shutdown(wait=False)
        if namespaces is not None:
            namespaces.stop()
        audit.close()

    try:
        uvicorn.Server(server_config(create_app(hook, on_stop=stop), host, port, cert, key)).run()
    finally:
        if sched.running:
            stop()


@enforcer.command(name="check")
@click.argument("file", type=click.File("r"))
@click.option("--namespace", "-n", default=None, help="Namespace to check them in [each object's own, else default].")
@click.option("--at", default=None, help="Decide as of this UTC time (ISO-8601) [now]; the table's age is from it.")
@common
def enforcer_check(ctx: Ctx, file, namespace, at) -> None:
    """What the webhook would answer for the workloads in FILE (YAML or JSON; - for stdin), against the lake's
    decision table: admitted or denied and why, warnings, the priority class it would set. Exit status 3 if
    any is denied. Nothing is counted or audited."""
    from gpuledger.enforcer.check import check, objects, render
    from gpuledger.enforcer.decide import Settings
    from gpuledger.enforcer.store import load_table

    _checked_models(ctx)  # as `enforcer serve` does
    at_s = _utc(at, "--at")
    now = dt.datetime.now(dt.timezone.utc) if at_s is None else dt.datetime.fromtimestamp(at_s, dt.timezone.utc)
    table = load_table(ctx.lake, ctx.cfg.cluster)
    results = check(objects(file.read(), file.name), table, Settings.of(ctx.cfg), now, namespace)
    for r in results:
        click.echo("\n".join(render(r)))
    if any(not r.validate.response["response"]["allowed"] for r in results):
        sys.exit(3)


@enforcer.command(name="certs")
@click.option("--service", default="gpuledger-enforcer", show_default=True, help="The webhook's Service name.")
@click.option("--namespace", default="gpuledger", show_default=True, help="Its namespace.")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Folder to write into.")
@click.option("--days", type=click.IntRange(1, 3650), default=365, show_default=True)
def enforcer_certs(service, namespace, out, days) -> None:
    """Write a CA (ca.crt) and a serving certificate (tls.crt, tls.key) naming the Service's DNS names."""
    from gpuledger.enforcer import certs

    names = certs.service_names(service, namespace)
    paths = certs.write(certs.issue(names, days), out)
    click.echo(f"wrote {paths['ca']}, {paths['cert']} and {paths['key']} for {', '.join(names)}")


@enforcer.command(name="manifest")
@click.option("--namespace", default="gpuledger", show_default=True, help="Where the webhook runs (it is excluded).")
@click.option("--image", default="gpuledger:latest", show_default=True, help="The container image.")
@click.option("--replicas", type=click.IntRange(2, 50), default=2, show_default=True)
@click.option(
    "--tls-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="Folder from `gpuledger enforcer certs`: adds the TLS Secret and the webhooks' caBundle.",
)
@click.option("--lake-claim", default="gpuledger-lake", show_default=True, help="PersistentVolumeClaim of the lake.")
@click.option(
    "--config-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="The gpuledger.toml the webhook reads (validated, then put in its ConfigMap) [built-in defaults].",
)
def enforcer_manifest(namespace, image, replicas, tls_dir, lake_claim, config_file) -> None:
    """Print the Kubernetes objects that run the webhook (RBAC, Deployment, Service, webhook configurations)."""
    from gpuledger.enforcer.manifest import dump, objects

    toml_text = None
    if config_file is not None:
        config_mod.load(config_file)  # a bad config is refused here, not by a crash-looping webhook
        toml_text = config_file.read_text()
    pem = {}
    if tls_dir is not None:
        for key, name in (("ca_pem", "ca.crt"), ("cert_pem", "tls.crt"), ("key_pem", "tls.key")):
            f = tls_dir / name
            if not f.exists():
                raise UsageError(f"--tls-dir {tls_dir}: no {name} (write them with `gpuledger enforcer certs`)")
            pem[key] = f.read_bytes()
    click.echo(dump(objects(namespace, image, replicas, lake_claim=lake_claim, config_toml=toml_text, **pem)), nl=False)


# -- export --------------------------------------------------------------------------------------------
@main.group()
def export() -> None:
    """Export the lake in standard formats for other tools."""


@export.command(name="focus")
@click.option("--period", required=True, metavar="YYYY-MM", help="The billing period: a calendar month (UTC).")
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The dataset to write: FILE.parquet or FILE.csv (FILE.<ext>.metadata.json is written beside it).",
)
@click.option(
    "--allow-unpriced", is_flag=True, help="Leave out the charges of GPU models with no rate instead of failing."
)
@common
def export_focus_cmd(ctx: Ctx, period, out, allow_unpriced) -> None:
    """The GPU cost of one month as a FOCUS 1.3 Cost and Usage dataset, split per job (docs/finops.md)."""
    from gpuledger.focus_export import export_focus

    r = export_focus(ctx.lake, ctx.cfg, period, out, allow_unpriced)
    click.echo(
        f"wrote {r.rows:,} FOCUS 1.3 charge(s) for {period} to {r.path}: {r.gpu_hours:,.1f} GPU-hours, "
        f"BilledCost {r.billed_cost_usd:,.2f} USD"
        + ("" if r.rows else " (no GPU cost in that period: an empty, valid dataset)")
    )
    for model, hours in r.left_out.items():
        click.echo(f"left out: {model}: {hours:,.1f} GPU-hours with no rate", err=True)


# -- analyze -------------------------------------------------------------------------------------------
@main.command()
@click.option("--from", "from_", default=None, help="Recompute from this UTC time (ISO-8601) [the watermark].")
@click.option("--to", default=None, help="Up to this UTC time (ISO-8601) [now].")
@click.option(
    "--scheduler",
    default=None,
    metavar="tcp://HOST:PORT",
    help="Run the pass over raw samples on this Dask scheduler's workers (they need the lake at the same path, or "
    "the same object store) [[analytics] scheduler, else in this process].",
)
@common
def analyze(ctx: Ctx, from_, to, scheduler) -> None:
    """Run the analytics jobs over the lake (incremental from each job's watermark; idempotent)."""
    from gpuledger.analytics.runner import run

    until_s, from_s = _utc(to, "--to"), _utc(from_, "--from")
    for r in run(ctx.lake, until_s=until_s, from_s=from_s, cfg=ctx.cfg, scheduler=scheduler):
        click.echo(f"{r.job}: {r.rows:,} rows over {r.days} day(s) in {r.seconds:.1f} s")
    _report_node_claims(ctx, until_s)


def _report_node_claims(ctx: Ctx, until_s: float | None) -> None:
    """A warning line on stderr for each node name of this cluster that two machines claimed in the last UTC day
    up to `until_s` (sql/node_claims.sql): the lake cannot tell their rows apart, so every figure of that node mixes
    the two. Reported, not refused: the rows are in the lake already, and an operator renames one collector."""
    from gpuledger.lake import has_data
    from gpuledger.query import Lake

    if not has_data(ctx.lake, "gpu_samples"):
        return
    end = dt.datetime.fromtimestamp(until_s if until_s is not None else time.time(), dt.timezone.utc)
    with Lake(ctx.lake) as q:
        claims = q.execute(
            "SELECT node, min(first_clash), max(last_clash), list_sort(list_distinct(flatten(list(gpu_uuids)))) "
            "FROM node_claims WHERE cluster = $cluster AND date BETWEEN $lo AND $hi GROUP BY node ORDER BY node",
            {"cluster": ctx.cfg.cluster, "lo": (end - dt.timedelta(days=1)).date(), "hi": end.date()},
        ).rows
    for node, first, last, gpus in claims:
        click.echo(
            f"warning: node {node!r} of cluster {ctx.cfg.cluster!r} is claimed by two machines: GPUs "
            f"{', '.join(gpus)} report at the same GPU index from {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} "
            "UTC; give each collector its own collector.node (its rows are merged into one node until then)",
            err=True,
        )


# -- import --------------------------------------------------------------------------------------------
@main.group(name="import", cls=_Group)
def import_group() -> None:
    """Import real job data: a jobs file (CSV/Parquet, docs/imports.md) or a public GPU-cluster trace."""


def _print_import(report) -> None:
    for line in report.summary():
        click.echo(line)
    if report.rows_rejected:
        raise click.exceptions.Exit(1)  # the good rows are in; the bad ones are listed above


@import_group.command(name="jobs")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@common
def import_jobs(ctx: Ctx, file) -> None:
    """Import jobs from a CSV or Parquet file (columns in docs/imports.md); bad rows are listed and skipped."""
    from gpuledger.analytics.imports.jobs_file import import_jobs_file

    _print_import(import_jobs_file(file, ctx.lake, ctx.cfg))


@import_group.command(name="trace")
@click.argument("kind", type=click.Choice(["alibaba-2023", "alibaba-2025"]))
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--workload", default="default", show_default=True, help="alibaba-2023: which pod list (openb_pod_list_<NAME>.csv)."
)
@click.option(
    "--origin", default=None, help="UTC time the trace's second 0 maps to (ISO-8601) [2023-01-01 / 2025-01-01]."
)
@common
def import_trace(ctx: Ctx, kind, directory, workload, origin) -> None:
    """Import a public GPU-cluster trace (../shared/data/traces): nodes, and jobs placed on them."""
    origin_s = _utc(origin, "--origin")
    kw = {} if origin_s is None else {"origin": dt.datetime.fromtimestamp(origin_s, dt.timezone.utc)}
    if kind == "alibaba-2023":
        from gpuledger.analytics.imports.alibaba2023 import import_alibaba_2023

        report = import_alibaba_2023(directory, ctx.lake, ctx.cfg, workload=workload, **kw)
    else:
        from gpuledger.analytics.imports.alibaba2025 import import_alibaba_2025

        report = import_alibaba_2025(directory, ctx.lake, ctx.cfg, **kw)
    _print_import(report)


# -- compact --------------------------------------------------------------------------------------------
@main.command(name="compact")
@click.option(
    "--grace-days",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Leave partitions younger than this many days alone (spools may still flush into them).",
)
@common
def compact_cmd(ctx: Ctx, grace_days) -> None:
    """Merge the small files of closed partitions (crash-safe, idempotent)."""
    from gpuledger.compaction import compact

    r = compact(ctx.lake, grace_days=grace_days)
    click.echo(
        f"compacted {r.partitions} partition(s): {r.files_in} files -> {r.files_out} ({r.rows:,} rows); "
        f"finished {r.recovered} interrupted compaction(s)"
        + (f"; deleted the merged objects of {r.retired} earlier merge(s)" if r.retired else "")
    )


if __name__ == "__main__":  # pragma: no cover
    main()
