"""The `gpuledger` command. Each subcommand parses, calls one library function and prints.

Stages are imported inside the commands that need them (the core imports no stage at module level), which
also keeps `gpuledger --help` fast.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import re
import signal
import sys
import threading
import time
from pathlib import Path

import click

from gpuledger import __version__
from gpuledger import config as config_mod
from gpuledger.errors import GpuledgerError, LakeError, SourceError, UsageError
from gpuledger.store import Store, open_store

DEFAULT_LAKE = "gpuledger-data"
# Compaction (`compact`'s default, `up`'s passes) leaves partitions younger than this many days alone: a spool may
# still flush into them.
COMPACT_GRACE_DAYS = 2


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
    def __init__(self, cfg: config_mod.Config, lake: Store):
        self.cfg = cfg
        self.lake = lake


class _LakeParam(click.ParamType):
    """--lake: a local directory or s3://bucket/prefix (gpuledger.store.open_store); anything else is one line."""

    name = "path|s3://bucket/prefix"

    def convert(self, value, param, ctx):
        try:
            return open_store(value)
        except LakeError as e:
            return self.fail(str(e).removeprefix("lake "), param, ctx)  # click names the option already


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
        store = open_store(lake)  # every command works on either kind of lake (gpuledger.store)
        cfg = config_mod.with_overrides(cfg, store)
        with store.errors():  # the store failing mid-command: one line, as at the start
            return f(Ctx(cfg, store), **kw)

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


class _CommaList(click.ParamType):
    """A comma-separated list for a config key that is a list, each item checked by the key's own item check."""

    name = "a,b,..."

    def __init__(self, check) -> None:
        self.check = check

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        items = tuple(v.strip() for v in value.split(","))
        problems = [p for v in items if (p := self._problem(v))]
        if problems:
            self.fail("; ".join(problems), param, ctx)
        return items

    def _problem(self, item: str) -> str | None:
        if not item:
            return "an empty item in the list"
        return self.check.problem(item) if self.check else None


def _config_option(key: str, *flags: str, help: str, **kw):
    """An option that overrides the config key `key` (section.name). Its type, bounds and item check are the key's
    declaration in gpuledger/config.py, and its help names the key and its built-in default, so none of them is
    written twice."""
    import typing

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
    elif typing.get_origin(tp) is tuple:
        kind = _CommaList(k.check)
    else:
        kind = None
    shown = k.shown or getattr(values, name)
    shown = ", ".join(shown) if isinstance(shown, tuple) else shown
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
@_config_option(
    "simulator.models", "--models", help=f"Comma-separated GPU models, from: {', '.join(config_mod.SIM_MODELS)}."
)
@click.option(
    "--partition",
    "partitions",
    multiple=True,
    metavar="MODEL=LAYOUT",
    help="Partition a share of MODEL's nodes in LAYOUT (H100=all-balanced, MI300X=cpx, Ascend910B=vnpu-5c*4); "
    "repeat per model; replaces the config's simulator.partitions.",
)
@_config_option(
    "simulator.partitioned_node_share", "--partitioned-node-share", help="Share of each such model's nodes."
)
@click.option("--end", default=None, help="End of the window, ISO-8601 UTC [now].")
@click.option("--workers", type=click.IntRange(1, 64), default=None, help="Worker processes [CPU count].")
@click.option(
    "--compact/--no-compact",
    default=True,
    show_default=True,
    help="Merge each closed day's files into one afterwards (as `gpuledger compact` does).",
)
@common
def simulate(
    ctx: Ctx,
    nodes,
    gpus_per_node,
    days,
    step_s,
    seed,
    models,
    partitions,
    partitioned_node_share,
    end,
    workers,
    compact,
) -> None:
    """Backfill a historical window of a simulated fleet into the lake, as fast as possible."""
    from gpuledger.collector.sim.backfill import backfill, plan_window
    from gpuledger.compaction import compact as compact_lake

    sim = ctx.cfg.simulator
    end_s = _utc(end, "--end") or time.time()
    fleet = dict(
        nodes=nodes or sim.nodes,
        gpus_per_node=gpus_per_node or sim.gpus_per_node,
        models=tuple(models or sim.models),
        seed=sim.seed if seed is None else seed,
        partitions=_partitions(partitions) if partitions else dict(sim.partitions),
        partitioned_node_share=partitioned_node_share or sim.partitioned_node_share,
    )
    unused = sorted(set(fleet["partitions"]) - set(fleet["models"]))
    if unused:
        click.echo(f"note: the fleet has no {', '.join(unused)} nodes to partition", err=True)
    window = plan_window(ctx.cfg, ctx.lake, end_s - days * 86400, end_s, **fleet)
    if window.note:
        click.echo(window.note, err=True)
    if window.end_s <= window.start_s:
        return
    t0 = time.perf_counter()
    with _progress("simulating", fleet["nodes"]) as bar:
        report = backfill(
            ctx.cfg,
            ctx.lake,
            window.start_s,
            window.end_s,
            step_s,
            **fleet,
            workers=workers,
            epoch_s=window.epoch_s,
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


def _partitions(given: tuple[str, ...]) -> dict[str, str]:
    """--partition MODEL=LAYOUT options, each checked as the config's simulator.partitions is."""
    out: dict[str, str] = {}
    for item in given:
        model, eq, layout = item.partition("=")
        model, layout = model.strip(), layout.strip()
        if not eq or not model or not layout:
            raise UsageError(f"--partition {item!r}: expected MODEL=LAYOUT (H100=all-balanced)")
        if model in out:
            raise UsageError(f"--partition {item!r}: {model} is partitioned twice")
        problem = config_mod.sim_partition_problem(model, layout)
        if problem is not None:
            raise UsageError(f"--partition {item!r}: {problem}")
        out[model] = layout
    return out


# -- collect --------------------------------------------------------------------------------------------
def _claim_spool(ctx: Ctx):
    """This node's spool, locked before anything else is read or written: a second `collect` or `up` on the same
    lake and node stops here with one line naming the process that holds it (SpoolError)."""
    from gpuledger.spool import Spool, default_dir, legacy_dir

    writer_id, lake = ctx.cfg.collector.writer, ctx.lake
    spool_dir = ctx.cfg.collector.spool_dir or default_dir(lake, writer_id)
    spool = Spool(spool_dir, writer_id, legacy=legacy_dir(lake, writer_id))
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
    help="exporter page(s) for --source dcgm, amd or ascend (repeatable), or the Prometheus server for "
    "--source prometheus.",
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
        run_until_stopped(lambda sch: col.schedule(sch, iv, fiv), stop, col.metrics)
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


def _catch_up_sim(ctx: Ctx, interval_s: float, backfill_days: float | None) -> None:
    """The simulated fleet's history before it runs live (collector/sim/backfill.py plan_catch_up)."""
    from gpuledger.collector.sim.backfill import catch_up, plan_catch_up

    plan = plan_catch_up(ctx.cfg, ctx.lake, time.time(), interval_s, backfill_days)
    if plan is None:
        return
    click.echo(plan.summary, err=True)
    t0 = time.perf_counter()
    with _progress("backfill", plan.nodes) as bar:
        r = catch_up(ctx.cfg, ctx.lake, plan, progress=bar.update)
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
    from gpuledger.analytics.models import read_checked_models
    from gpuledger.collector import sources
    from gpuledger.collector.runner import run_until_stopped
    from gpuledger.compaction import compact

    read_checked_models(ctx.lake, ctx.cfg)  # a quota key naming no GPU model: one line now, not a failed analysis later
    spool = _claim_spool(ctx)  # before anything touches the lake: a second `up` on it stops here
    nvml_source, why = sources.open_nvml(ctx.cfg)  # NVML is initialised here, once for the whole process
    source = "nvml" if nvml_source else "sim"
    click.echo(
        f"collector: NVML ({why})" if nvml_source else f"collector: the simulated fleet, because {why}", err=True
    )

    cfg = ctx.cfg
    if source == "sim":
        _catch_up_sim(ctx, interval_s or cfg.collector.interval_s, backfill_days)

    def compact_closed_days() -> None:
        compact(ctx.lake, grace_days=COMPACT_GRACE_DAYS, cluster=cfg.cluster)

    # Before anything reads the lake: merges the backfilled days, and moves files of the node-in-path layout
    # (gpuledger/schema.py) into the one the views read.
    compact_closed_days()

    col = _build_collector(
        ctx, () if nvml_source else ("sim",), built=(nvml_source,) if nvml_source else (), spool=spool
    )
    col.start()
    _serve_metrics(col, cfg.collector.metrics_port)
    iv = interval_s or cfg.collector.interval_s

    def jobs(sch) -> None:
        col.schedule(sch, iv, cfg.collector.flush_interval_s)
        sch.add_job(
            compact_closed_days,
            "interval",
            hours=1,
            id="compact",
            coalesce=True,
            max_instances=1,
        )
        from gpuledger.analytics.runner import schedule as analytics_schedule

        analytics_schedule(sch, cfg, ctx.lake)
        _schedule_reclaim(sch, ctx)

    stop = _stop_event()
    db, ex = cfg.dashboard, cfg.exporter
    server = _dashboard_server(ctx, db.host, db.port)
    exporter = _exporter(ctx, ex.host, ex.port)
    threading.Thread(target=server.serve_forever, daemon=True, name="dashboards").start()
    click.echo(
        f"gpuledger is up: lake {ctx.lake}, scraping every {iv:g} s, dashboards on "
        f"http://{db.host}:{db.port}/, derived figures on http://{ex.host}:{ex.port}/metrics. "
        f'Try: gpuledger sql --lake {ctx.lake} "SELECT * FROM nodes". Ctrl-C to stop.',
        err=True,
    )
    try:
        run_until_stopped(jobs, stop, col.metrics)
    finally:
        # Nothing left running in a daemon thread inside DuckDB or polars when the interpreter finalizes (it can
        # abort then): stop serving, wait for the snapshots being rebuilt, then flush.
        server.shutdown()
        exporter.stop()
        server.app.config["GPULEDGER_CONTEXT"].data.close(wait_s=60.0)
        col.close()
    click.echo(f"stopped cleanly after {col.scrapes} scrape(s); everything flushed to {ctx.lake}", err=True)


# -- sql ------------------------------------------------------------------------------------------------
def _utc_timestamp(text: str) -> dt.datetime:
    t = dt.datetime.fromisoformat(text)
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)  # the lake's times are UTC, so is a bare one


_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}

# --param NAME:TYPE=VALUE: what each TYPE makes of the value (DuckDB binds a date as DATE, an aware time as
# TIMESTAMP WITH TIME ZONE).
PARAM_TYPES = {
    "str": str,
    "int": int,
    "float": float,
    "bool": lambda text: _BOOLS[text.lower()],
    "date": dt.date.fromisoformat,
    "timestamp": _utc_timestamp,
}
# What the untyped guess takes for a number: plain decimal digits only. Python's int() and float() also take
# "1_000", "nan", "inf" and other scripts' digits, so a job id such as 2023_01 would have matched 202301.
_INT = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?[0-9]+\.[0-9]+(?:[eE][-+]?[0-9]+)?")


def parse_param(text: str) -> tuple[str, object]:
    """`NAME=VALUE` (a whole number or a decimal becomes one, anything else a string) or `NAME:TYPE=VALUE` with a
    TYPE of PARAM_TYPES; UsageError naming the parameter and the problem."""
    spec, sep, value = text.partition("=")
    name, colon, kind = spec.partition(":")
    if not sep or not name.isidentifier():
        raise UsageError(f"--param {text!r}: expected NAME=VALUE or NAME:TYPE=VALUE")
    if not colon:
        return name, int(value) if _INT.fullmatch(value) else float(value) if _DECIMAL.fullmatch(value) else value
    if kind not in PARAM_TYPES:
        raise UsageError(f"--param {text!r}: unknown type {kind!r}; one of {', '.join(PARAM_TYPES)}")
    try:
        return name, PARAM_TYPES[kind](value)
    except (ValueError, KeyError):
        hint = {"bool": f" (one of {', '.join(_BOOLS)})", "date": " (YYYY-MM-DD)", "timestamp": " (ISO-8601)"}
        raise UsageError(f"--param {text!r}: {value!r} is not a valid {kind}{hint.get(kind, '')}") from None


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
    """Run a read-only DuckDB query over the lake, with every view from sql/ loaded. The result streams out as it
    is computed; list and struct columns are JSON text in csv."""
    from gpuledger import query_output
    from gpuledger.focus_export import finops_variables
    from gpuledger.query import Lake, require_lake

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

        def emit(sink):
            rows = query_output.batch_rows(fmt, limit)
            with lake.stream(query, named or None, timeout_s, rows, query_output.projection(fmt)) as result:
                return query_output.write(result, fmt, sink, limit)

        if out is None:
            stdout = sys.stdout.buffer
            try:
                with query_output.quiet_broken_pipe(stdout):
                    emit(stdout)
                    stdout.flush()
            except OSError as e:
                raise click.ClickException(f"cannot write the result to stdout: {e.strerror or e}") from None
            return
        try:
            written = query_output.to_file(out, emit)
        except LakeError as e:  # the write's OSError, translated ("disk full while writing ...")
            raise click.ClickException(f"--out {str(out)!r}: {e}") from None
        except OSError as e:
            raise click.ClickException(f"--out {str(out)!r}: cannot write it: {e.strerror or e}") from None
    click.echo(f"wrote {written.rows} row(s) to {out}", err=True)


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
    from gpuledger.analytics.placement_whatif import placement_whatif
    from gpuledger.analytics.whatif import for_dashboard, idle_rule_freed
    from gpuledger.dashboards.access import Access
    from gpuledger.dashboards.app import create_app
    from gpuledger.focus_export import finops_variables

    db = ctx.cfg.dashboard
    rules = Access(
        basic=config_mod.dashboard_auth(ctx.cfg),
        trusted_proxies=db.trusted_proxies,
        user_header=db.user_header,
        groups_header=db.groups_header,
        groups_separator=db.groups_separator,
        admin_groups=db.admin_groups,
        tenant_groups=db.tenant_groups,
    )
    return create_app(
        ctx.lake,
        whatif=for_dashboard,
        access_cfg=rules,
        placement=functools.partial(placement_whatif, ctx.lake, ctx.cfg.rates),
        idle_rule=idle_rule_freed,
        variables=finops_variables(ctx.cfg),
        refresh_s=ctx.cfg.dashboard.refresh_s,
    )


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
    click.echo(f"dashboards on http://{host}:{port}/ over {ctx.lake}; Ctrl-C to stop", err=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


# -- exporter ------------------------------------------------------------------------------------------
def _exporter(ctx: Ctx, host: str, port: int):
    """The exporter of derived figures, serving /metrics on host:port and keeping its snapshot fresh (daemon
    threads). A port in use is one line."""
    from gpuledger.analytics.exporter import Exporter, serve

    exp = Exporter(ctx.lake, ctx.cfg.enforcer.idle_min_h, check_every_s=ctx.cfg.exporter.refresh_s)
    try:
        serve(exp, host, port)
    except OSError as e:
        raise UsageError(
            f"cannot serve the exporter on {host}:{port}: {e.strerror} (set [exporter] port, or --port)"
        ) from None
    return exp.start()


@main.command()
@_config_option("exporter.port", "--port", help="TCP port.")
@_config_option("exporter.host", "--host", help="Address to listen on.")
@common
def exporter(ctx: Ctx, port, host) -> None:
    """Serve the analytics' derived figures to Prometheus (/metrics), rebuilt when the analytics commit."""
    host, port = host or ctx.cfg.exporter.host, port or ctx.cfg.exporter.port
    exp = _exporter(ctx, host, port)
    click.echo(f"derived figures on http://{host}:{port}/metrics over {ctx.lake}; Ctrl-C to stop", err=True)
    stop = _stop_event()
    try:
        while not stop.wait(1.0):  # a timed wait, so Ctrl-C is seen at once
            pass
    finally:
        exp.stop()


# -- quota ---------------------------------------------------------------------------------------------
@main.group()
def quota() -> None:
    """Quota requests and their approvals, and the Kueue objects of the tenants' quotas (docs/governance.md)."""


# Not click's `required`, ranges or types: a value missing or wrong is one line and exit 1 (QuotaError), as every
# other bad input, not click's usage text and exit 2: an approval bot reads one outcome per exit status.
@quota.command(name="request")
@click.option("--tenant", default=None, help="The tenant whose quota to raise.")
@click.option(
    "--model",
    default=None,
    help="The GPU model, named as a quota key names it (H100: each model with that word).",
)
@click.option("--gpus", default=None, metavar="N", help="GPUs more, on top of the tenant's quota for that model (> 0).")
@click.option("--from", "from_", default=None, metavar="DAY|TIME", help="From this UTC day (its start) or time.")
@click.option("--until", default=None, metavar="DAY|TIME", help="Until this UTC day (its end, included) or time.")
@click.option("--reason", default=None, help="Why the tenant needs them (kept with the request).")
@common
def quota_request(ctx: Ctx, tenant, model, gpus, from_, until, reason) -> None:
    """Ask for GPUs more of one model for a while; prints the request's id. The requester is $GPULEDGER_USER, else
    the login name. It takes effect once someone else approves it (`gpuledger quota approve ID --by NAME`)."""
    from gpuledger import quota_requests as qr
    from gpuledger.analytics.decisions import known_models

    with ctx.lake.reading():
        models = known_models(ctx.lake, read_only=True)
    who = qr.requester()
    request_id = qr.request(ctx.lake, ctx.cfg, models, tenant, model, gpus, from_, until, reason, who)
    click.echo(request_id)
    click.echo(f"requested by {who}; `gpuledger quota approve {request_id} --by NAME` grants it", err=True)


def _decide(ctx: Ctx, request_id: str, action: str, by, note) -> None:
    from gpuledger import quota_requests as qr

    ctx.lake.require()  # a mistyped --lake: "no lake at ...", not "no quota request"
    row = qr.decide(ctx.lake, request_id, action, by, note)
    word = {"approve": "approved", "reject": "rejected"}[action]
    click.echo(f"{word} {request_id} ({qr.describe(row)}), now {row['state']}")
    if row["state"] in ("active", "approved"):
        click.echo("the webhook applies it from the next analytics run (`gpuledger analyze`, or `up`'s)", err=True)


@quota.command(name="approve")
@click.argument("request_id", metavar="ID")
@click.option("--by", default=None, help="Who approves (not the requester).")
@click.option("--note", default=None, help="Why (kept with the approval).")
@common
def quota_approve(ctx: Ctx, request_id, by, note) -> None:
    """Approve request ID: the tenant's quota for its model rises by its GPUs between its dates. Exit 1 with one
    line when it is unknown, expired, decided already (by whom, when) or BY's own request."""
    _decide(ctx, request_id, "approve", by, note)


@quota.command(name="reject")
@click.argument("request_id", metavar="ID")
@click.option("--by", default=None, help="Who rejects (the requester may: it withdraws the request).")
@click.option("--note", default=None, help="Why (kept with the rejection).")
@common
def quota_reject(ctx: Ctx, request_id, by, note) -> None:
    """Reject request ID. Exit 1 with one line when it is unknown, expired or decided already (by whom, when)."""
    _decide(ctx, request_id, "reject", by, note)


@quota.command(name="list")
@click.option("--pending", is_flag=True, help="Only the requests waiting for a decision.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@common
def quota_list(ctx: Ctx, pending, fmt) -> None:
    """Every quota request and its state now: pending, approved (from a later day), active, rejected or expired,
    with who asked, who decided, when and why (the quota_requests view)."""
    import polars as pl

    from gpuledger import quota_requests as qr

    ctx.lake.require()  # a mistyped --lake is one line, not an empty list
    rows = qr.states(ctx.lake)
    if pending:
        rows = rows.filter(pl.col("state") == "pending")
    _print_frame(rows, fmt)


@quota.command(name="kueue")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write here [stdout].")
@click.option("--at", default=None, help="Count the quota grants active at this UTC time (ISO-8601) [now].")
@click.option("--tenant", "tenants", multiple=True, help="Only this tenant's queues (repeatable) [every tenant].")
@click.option(
    "--model", "extra_models", multiple=True, help="A GPU model to make a flavor of besides the lake's (repeatable)."
)
@click.option("--api-version", type=click.Choice(["v1beta2", "v1beta1"]), default="v1beta2", show_default=True)
@click.option("--queue-prefix", default="gpuledger-", show_default=True, help="ClusterQueue name: PREFIX<tenant>.")
@click.option("--cohort", default="gpuledger", show_default=True, help="Cohort of every ClusterQueue; '' = none.")
@click.option(
    "--borrow/--no-borrow",
    default=None,
    help="Let tenants borrow past their quota within the cohort [only when [enforcer] quota_mode is not enforce].",
)
@click.option(
    "--local-queue", default="gpuledger", show_default=True, help="LocalQueue name in each tenant namespace; '' = none."
)
@click.option(
    "--node-label-key",
    default=None,
    help="Node label key of every flavor [each vendor's: nvidia.com/gpu.product, amd.com/gpu.product-name, "
    "node.kubernetes.io/npu.chip.name].",
)
@click.option(
    "--node-label",
    "node_labels",
    multiple=True,
    metavar="MODEL=VALUE",
    help="The node label value of a GPU model's nodes (repeatable) [its vendor's node labeller's].",
)
@click.option(
    "--partition-resource",
    "partition_resources",
    multiple=True,
    metavar="RESOURCE",
    help="A partition resource the nodes advertise, quota'd in its vendor's flavors by its share (repeatable): "
    "nvidia.com/mig-1g.10gb, amd.com/cpx_nps4, huawei.com/Ascend910-4c [none].",
)
@common
def quota_kueue(
    ctx: Ctx,
    out,
    at,
    tenants,
    extra_models,
    api_version,
    queue_prefix,
    cohort,
    borrow,
    local_queue,
    node_label_key,
    node_labels,
    partition_resources,
) -> None:
    """Print Kueue ResourceFlavors (one per GPU model of this cluster), ClusterQueues (one per tenant, its quota per
    model, active grants included) and LocalQueues as YAML for `kubectl apply -f` (docs/kueue.md)."""
    from gpuledger.analytics.models import read_models_by_cluster
    from gpuledger.atomic import write_bytes_atomic
    from gpuledger.kueue_export import KueueOptions, dump, kueue_objects
    from gpuledger.quota_requests import active_grants

    values = {}
    for item in node_labels:
        model, sep, value = item.rpartition("=")
        if not sep or not model:
            raise UsageError(f"--node-label {item!r}: expected MODEL=VALUE")
        values[model] = value
    at_s = _utc(at, "--at")
    now = dt.datetime.now(dt.timezone.utc) if at_s is None else dt.datetime.fromtimestamp(at_s, dt.timezone.utc)
    by_cluster = read_models_by_cluster(ctx.lake, ctx.cfg)
    cluster = ctx.cfg.cluster
    if not by_cluster.get(cluster) and by_cluster and not extra_models:
        raise UsageError(
            f"the lake has no GPU model of cluster {cluster!r} (its clusters: {', '.join(sorted(by_cluster))}): set "
            "`cluster` in the config, or name the models with --model"
        )
    models = sorted({*by_cluster.get(cluster, ()), *extra_models})
    options = KueueOptions(
        api_version=api_version,
        queue_prefix=queue_prefix,
        cohort=cohort or None,
        borrow=borrow,
        local_queue=local_queue or None,
        label_key=node_label_key,
        label_values=values,
        tenants=tenants,
        partition_resources=partition_resources,
    )
    objs = kueue_objects(ctx.cfg, models, active_grants(ctx.lake, now, cluster), now, options)
    header = f"gpuledger quota kueue: cluster {ctx.cfg.cluster}, grants as of {now:%Y-%m-%dT%H:%M:%SZ}"
    text = dump(objs, header)
    if out is None:
        click.echo(text, nl=False)
        return
    write_bytes_atomic(out, text.encode())
    kinds = [o["kind"] for o in objs]
    click.echo(
        f"wrote {kinds.count('ResourceFlavor')} ResourceFlavor(s), {kinds.count('ClusterQueue')} ClusterQueue(s) and "
        f"{kinds.count('LocalQueue')} LocalQueue(s) to {out}",
        err=True,
    )


# -- enforcer ------------------------------------------------------------------------------------------
@main.command()
@click.option("--apply", "apply_", is_flag=True, help="Make the API calls and record them [a dry run: neither].")
@click.option("--at", default=None, help="A dry run as of this UTC time (ISO-8601) [now].")
@common
def reclaim(ctx: Ctx, apply_, at) -> None:
    """Give back GPUs idle past their class's limit (docs/reclaim.md): warn (an Event and a deadline annotation on
    the pod), then after [reclaim] grace_s deactivate the Kueue Workload, suspend the Job or delete the notebook's
    pod. A dry run by default: prints what it would do, makes no API call, writes nothing."""
    from gpuledger.enforcer.reclaim.run import render, run_once

    at_s = _utc(at, "--at")
    if apply_ and at_s is not None:
        raise UsageError("--at is for a dry run: an applied pass acts now")
    now = None if at_s is None else dt.datetime.fromtimestamp(at_s, dt.timezone.utc)
    kube = None
    if apply_:
        from gpuledger.enforcer.reclaim.kube import Kube
        from gpuledger.kube_watch import load_api

        kube = Kube(load_api())
    for line in render(run_once(ctx.lake, ctx.cfg, now, kube)):
        click.echo(line)


def _schedule_reclaim(sch, ctx: Ctx) -> None:
    """`up`'s periodic reclaim pass: applied with [reclaim] mode = "apply", else a dry run that only logs. Never
    stops `up`: a failed pass (no cluster, a lake error) is a warning, and the next interval tries again."""
    from gpuledger.enforcer.reclaim.run import render, run_once

    rc = ctx.cfg.reclaim
    log = logging.getLogger("gpuledger.reclaim")

    def one_pass() -> None:
        try:
            kube = None
            if rc.mode == "apply":
                from gpuledger.enforcer.reclaim.kube import Kube
                from gpuledger.kube_watch import load_api

                kube = Kube(load_api())
            lines = render(run_once(ctx.lake, ctx.cfg, None, kube))
            log.info("%s", "\n".join(lines) if len(lines) > 2 or kube is not None else lines[-1])
        except Exception as e:  # noqa: BLE001 - up must outlive any failure of a pass
            log.warning("reclaim pass failed (%s: %s); next in %g s", type(e).__name__, e, rc.interval_s)

    sch.add_job(one_pass, "interval", seconds=rc.interval_s, id="reclaim", coalesce=True, max_instances=1)


@main.group()
def enforcer() -> None:
    """The admission webhook: quota, budget, idle-hog and fair-share decisions from the analytics."""


@enforcer.command(name="serve")
@click.option("--cert", required=True, type=click.Path(exists=True, dir_okay=False), help="Serving certificate (PEM).")
@click.option("--key", required=True, type=click.Path(exists=True, dir_okay=False), help="Its private key (PEM).")
@click.option("--port", type=click.IntRange(1, 65535), default=8443, show_default=True)
@click.option("--host", default="0.0.0.0", show_default=True)
@click.option("--replica", default=None, help="This replica's name in the audit [the host name].")
@common
def enforcer_serve(ctx: Ctx, cert, key, port, host, replica) -> None:
    """Serve POST /validate and /mutate over TLS (AdmissionReview v1), with /healthz, /readyz and /metrics."""
    from gpuledger.analytics.models import read_checked_models
    from gpuledger.enforcer.serve import serve

    read_checked_models(ctx.lake, ctx.cfg)  # a quota key that names no GPU model of the lake would cap nothing
    serve(ctx.cfg, ctx.lake, cert, key, host, port, replica, say=lambda line: click.echo(line, err=True))


@enforcer.command(name="check")
@click.argument("file", type=click.File("r"))
@click.option("--namespace", "-n", default=None, help="Namespace to check them in [each object's own, else default].")
@click.option("--at", default=None, help="Decide as of this UTC time (ISO-8601) [now]; the table's age is from it.")
@common
def enforcer_check(ctx: Ctx, file, namespace, at) -> None:
    """What the webhook would answer for the workloads in FILE (YAML or JSON; - for stdin), against the lake's
    decision table: admitted or denied and why, warnings, the priority class it would set. Exit status 3 if
    any is denied. Nothing is counted or audited."""
    from gpuledger.analytics.models import read_checked_models
    from gpuledger.enforcer.check import check, objects, render
    from gpuledger.enforcer.decide import Settings
    from gpuledger.enforcer.store import load_table

    read_checked_models(ctx.lake, ctx.cfg)  # as `enforcer serve` does
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


# -- report --------------------------------------------------------------------------------------------
@main.command()
@click.option("--month", required=True, metavar="YYYY-MM", help="The calendar month (UTC) to report on.")
@click.option("--out", required=True, metavar="FILE.html", help="The HTML file to write (atomically).")
@click.option("--cluster", default=None, help="Only this cluster [every cluster in the lake].")
@common
def report(ctx: Ctx, month, out, cluster) -> None:
    """One month of the fleet as a single self-contained HTML file for managers and finance: totals against budget
    and last month, chargeback per tenant, active against allocated GPU-hours, idle holders, queue, fragmentation,
    the capacity forecast and a reconciliation (docs/report.md)."""
    from gpuledger.report import write_report

    path = _out_path(out)
    r = write_report(ctx.lake, ctx.cfg, month, path, cluster)
    state = "partial month" if r.partial else "complete month"
    click.echo(f"wrote the {month} report ({state}, {r.tenants} tenant(s), {r.total_usd or 0:,.2f} USD) to {path}")
    if not r.reconciles:
        raise click.ClickException(
            f"the report's reconciliation does not hold: its parts sum to {r.parts_usd:,.2f} USD, the month's "
            f"BilledCost is {r.total_usd or 0:,.2f} USD (run `gpuledger analyze`, then the report again)"
        )


# -- whatif --------------------------------------------------------------------------------------------
@main.group()
def whatif() -> None:
    """What-ifs replayed on the lake's real jobs and inventory."""


def _day(value: str | None, name: str) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise UsageError(f"{name} {value!r} is not a date (YYYY-MM-DD)") from None


WHATIF_DAYS = 7  # the default period: the last week of measured fragmentation


def _print_frame(frame, fmt: str) -> None:
    """A result frame as the `sql` command prints one: a table (floats to 2 places), csv or json (one object a row)."""
    import polars as pl

    if fmt == "csv":
        click.echo(frame.write_csv(), nl=False)
    elif fmt == "json":
        click.echo(frame.write_json())
    else:
        with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=200, tbl_hide_dataframe_shape=True, float_precision=2):
            click.echo(str(frame))


@whatif.command(name="placement")
@click.option(
    "--policy",
    "policies",
    multiple=True,
    metavar="NAME",
    help="A placement policy to replay (repeatable): fgd, bestfit [all of them].",
)
@click.option("--from", "from_", default=None, metavar="YYYY-MM-DD", help="First UTC day [a week before --to].")
@click.option(
    "--to", default=None, metavar="YYYY-MM-DD", help="Last UTC day, included [the last day of measured fragmentation]."
)
@click.option("--cluster", default=None, help="The cluster to replay [config cluster].")
@click.option("--model", default=None, help="Only this GPU model's nodes and jobs [every model].")
@click.option("--curves", is_flag=True, help="Print the curves (fragmentation and allocation against arrived demand).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@common
def whatif_placement(ctx: Ctx, policies, from_, to, cluster, model, curves, fmt) -> None:
    """What a fragmentation-aware scheduler would free: the period's jobs replayed in arrival order on its nodes
    under each policy, against the measured fragmentation, with the GPUs and USD freed (docs/fragmentation.md)."""
    from gpuledger.analytics import placement_whatif as pw
    from gpuledger.query import require_lake

    require_lake(ctx.lake)
    cluster = cluster or ctx.cfg.cluster
    first, last = _day(from_, "--from"), _day(to, "--to")
    if last is None:
        last = (
            pw.last_measured_day(ctx.lake, cluster)
            if first is None
            else max(first, pw.last_measured_day(ctx.lake, cluster))
        )
    if first is None:
        first = last - dt.timedelta(days=WHATIF_DAYS - 1)
    start, end = pw.period(first, last)
    t0 = time.perf_counter()
    result = pw.placement_whatif(ctx.lake, ctx.cfg.rates, cluster, start, end, policies or pw.POLICIES, model)
    _print_frame(result.curves if curves else result.summary, fmt)
    click.echo(
        f"replayed cluster {cluster!r} from {first} to {last} (UTC days) in {time.perf_counter() - t0:.1f} s; freed: "
        "measured fragmented GPUs less the policy's at the measured load, over the period at the rate card",
        err=True,
    )
    for m in result.unpriced:
        click.echo(f"no rate for {m}: its freed_usd is empty", err=True)


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
    default=COMPACT_GRACE_DAYS,
    show_default=True,
    help="Leave partitions younger than this many days alone (spools may still flush into them).",
)
@common
def compact_cmd(ctx: Ctx, grace_days) -> None:
    """Merge the small files of closed partitions (crash-safe, idempotent)."""
    from gpuledger.compaction import compact

    r = compact(ctx.lake, grace_days=grace_days, cluster=ctx.cfg.cluster)
    click.echo(
        f"compacted {r.partitions} partition(s): {r.files_in} files -> {r.files_out} ({r.rows:,} rows); "
        f"finished {r.recovered} interrupted compaction(s)"
        + (f"; deleted the merged objects of {r.retired} earlier merge(s)" if r.retired else "")
        + (f"; set aside {r.quarantined} damaged file(s) (see quarantined_files)" if r.quarantined else "")
    )


if __name__ == "__main__":  # pragma: no cover
    main()
