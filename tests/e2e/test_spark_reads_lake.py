"""Spark reads the lake (issue 15 item 4): pyspark in local mode over a simulated, analysed lake.

The README says anything that speaks hive partitioning reads the lake's Parquet, Spark named. This holds Spark to
it: each table is read as a Spark user would (`spark.read.parquet("<lake>/<table>")`, partitions discovered from
the `date=` folders), with the types schema.py declares (UTC instants, exact decimals, lists), and it gives the
same rows and totals as DuckDB through gpuledger.query.Lake. Needs pyspark (the test extra) and a JVM (Java 17+;
.ci/run installs Debian's default-jre-headless); skips, saying which, when either is missing.
"""

from __future__ import annotations

import datetime as dt
import math
import shutil

import polars as pl
import pytest

from gpuledger import schema
from gpuledger.query import Lake

from conftest import END, make_lake

pytestmark = [
    pytest.mark.slow,  # one JVM start and ~20 small Spark jobs: tens of seconds on 2 cores
    # pyspark warns at import that it does not support pandas 3 yet; nothing here goes through pandas.
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

# The three tables, and the two that hold lists (jobs.gpu_uuids: strings; nodes.labels: key/value structs).
TABLES = ("gpu_hourly", "job_stats", "cost_allocation", "jobs", "nodes")
START = END - 2 * 86400  # the lake's first instant: 2026-10-31 00:00 UTC
# The jobs and nodes views keep the latest state of each job and node; Spark reads every file's rows, so DuckDB reads
# those two tables' files as they are (the other three views are plain reads of their files).
RAW_IN_DUCKDB = {"jobs", "nodes"}
# +05:30 all year (no DST): a half-hour offset cannot pass for UTC by accident, and it moves 23:00 UTC to the next day.
ZONE = "Asia/Kolkata"


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """2 days at 5-minute steps, analysed: each table compared here has two or three date partitions."""
    from gpuledger.analytics.runner import run

    path = tmp_path_factory.mktemp("spark") / "lake"
    make_lake(path, days=2, step_s=300)
    run(path, until_s=END)
    return path


@pytest.fixture(scope="module")
def duck(lake):
    with Lake(lake) as con:
        yield con


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    """One local Spark session (one JVM) for the module, in UTC; the JVM is ended with it."""
    pytest.importorskip(
        "pyspark", reason="pyspark is not installed (it is in the test extra: pip install -e '.[test]')"
    )
    if shutil.which("java") is None:
        pytest.skip("no `java` on PATH: Spark needs a JVM, Java 17 or later (Debian: default-jre-headless)")
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    tmp = tmp_path_factory.mktemp("spark-home")
    conf = (
        SparkConf()
        .setMaster("local[1]")
        .setAppName("gpuledger-lake-test")
        .set("spark.driver.memory", "512m")
        # The C1 compiler only, and the serial collector: half the JVM's CPU time for this short run (42 -> 23
        # CPU-seconds for the queries here), which is mostly spent compiling Spark itself.
        .set("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .set("spark.driver.host", "127.0.0.1")  # no lookup of the container's host name
        .set("spark.driver.bindAddress", "127.0.0.1")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.sql.shuffle.partitions", "1")  # default 200 tasks per aggregation, for a few hundred rows
        .set("spark.sql.session.timeZone", "UTC")
        .set("spark.sql.warehouse.dir", str(tmp / "warehouse"))  # else spark-warehouse/ in the working directory
        .set("spark.local.dir", str(tmp / "local"))
    )
    # Our own gateway, so the JVM can be ended at teardown (closing its stdin ends it): pyspark keeps the JVM of a
    # stopped session alive until Python exits, and its memory would be held through the rest of the test run.
    gateway = launch_gateway(conf)
    sc = SparkContext(conf=conf, gateway=gateway)
    sc.setLogLevel("ERROR")
    session = SparkSession(sc)
    try:
        yield session
    finally:
        session.stop()
        gateway.shutdown()
        gateway.proc.stdin.close()
        gateway.proc.wait(timeout=60)


def _read(spark, lake):
    """Every table as a temp view, read from its folder with its partitions; mergeSchema because DuckDB's views
    read the files with union_by_name (a file written before a column was added lacks it)."""
    for name in TABLES:
        spark.read.option("mergeSchema", "true").parquet(str(lake / name)).createOrReplaceTempView(name)
    return spark


@pytest.fixture(scope="module")
def utc(spark, lake):
    return _read(spark, lake)


@pytest.fixture(scope="module")
def zoned(spark, lake):
    """A second session on the same JVM with its own SQL settings: the session time zone is not UTC."""
    session = spark.newSession()
    session.conf.set("spark.sql.session.timeZone", ZONE)
    return _read(session, lake)


def spark_type(dtype: pl.DataType):
    """The Spark type a column of schema.py should read as."""
    from pyspark.sql import types as T

    if isinstance(dtype, pl.Datetime):
        # A Parquet timestamp adjusted to UTC is an instant: Spark's TIMESTAMP (WITH LOCAL TIME ZONE), not _NTZ.
        return T.TimestampType() if dtype.time_zone else T.TimestampNTZType()
    if isinstance(dtype, pl.Decimal):
        return T.DecimalType(dtype.precision, dtype.scale)
    if isinstance(dtype, pl.List):
        return T.ArrayType(spark_type(dtype.inner), containsNull=True)
    if isinstance(dtype, pl.Struct):
        return T.StructType([T.StructField(f.name, spark_type(f.dtype), nullable=True) for f in dtype.fields])
    plain = {
        pl.String: T.StringType(),
        pl.Int32: T.IntegerType(),
        pl.Int64: T.LongType(),
        pl.Float32: T.FloatType(),
        pl.Float64: T.DoubleType(),
        pl.Boolean: T.BooleanType(),
        pl.Date: T.DateType(),  # the partition column, from the folder name
    }
    return plain[dtype]


def _from(name: str, engine: str) -> str:
    if engine == "duckdb" and name in RAW_IN_DUCKDB:
        return (
            f"read_parquet(getvariable('gpuledger_lake') || '/{name}/date=*/*.parquet', hive_partitioning = true, "
            "union_by_name = true, hive_types = {'date': DATE})"
        )
    return name


def _micros(engine: str, expr: str) -> str:
    """An instant as microseconds since the epoch: the same integer whatever the session's time zone."""
    return f"unix_micros({expr})" if engine == "spark" else f"epoch_us({expr})"


def _totals_sql(name: str, engine: str) -> tuple[str, list[str]]:
    """One row of totals for a table, the same SQL for both engines but for the epoch function; and which of its
    columns are floating-point sums (compared within 1e-9 relative; everything else exactly)."""
    exprs, floats = ["count(*) AS n_rows"], []
    for c in schema.table(name).columns:
        q, dtype = f'"{c.name}"' if engine == "duckdb" else f"`{c.name}`", c.dtype
        exprs.append(f"count({q}) AS n_{c.name}")  # non-null values: a null read as a value (or lost) shows here
        if dtype == pl.Float64:
            exprs.append(f"sum({q}) AS sum_{c.name}")
            floats.append(f"sum_{c.name}")
        elif dtype in (pl.Int32, pl.Int64) or isinstance(dtype, pl.Decimal):
            exprs.append(f"sum({q}) AS sum_{c.name}")  # Decimal sums compared as Decimals: exact to the last digit
        elif isinstance(dtype, pl.Datetime):
            exprs.append(f"{_micros(engine, f'min({q})')} AS min_{c.name}")
            exprs.append(f"{_micros(engine, f'max({q})')} AS max_{c.name}")
        elif dtype in (pl.String, pl.Date):
            exprs.append(f"count(DISTINCT {q}) AS distinct_{c.name}")  # distinct jobs, tenants, GPUs, dates
    return f"SELECT {', '.join(exprs)} FROM {_from(name, engine)}", floats


def _rows_sql(name: str, engine: str) -> str:
    """Every row of a table, instants as epoch microseconds (pyspark would hand back local wall-clock times)."""
    cols = []
    for c in schema.table(name).columns:
        q = f'"{c.name}"' if engine == "duckdb" else f"`{c.name}`"
        cols.append(_micros(engine, q) if isinstance(c.dtype, pl.Datetime) else q)
    return f"SELECT {', '.join(cols)} FROM {_from(name, engine)}"


def _plain(value):
    """A value from either engine in one comparable form: Spark Rows and DuckDB struct dicts as tuples, lists as
    tuples, NaN as a marker (NaN != NaN)."""
    from pyspark.sql import Row

    if isinstance(value, Row):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return tuple(_plain(v) for v in value.values())
    if isinstance(value, list | tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def _sorted_rows(rows) -> list[tuple]:
    return sorted((_plain(r) for r in rows), key=repr)


def test_every_table_of_the_lake_reads_with_its_declared_types(utc, lake):
    """Every table the simulator and the analytics write, not only the five compared below."""
    wrong, checked = {}, []
    for name, table in schema.TABLES.items():
        if not any((lake / name).glob("date=*/*.parquet")):
            continue  # admission_decisions (the webhook's), gpu_fields, health_events, pod_shapes: none simulated
        read = {f.name: f.dataType for f in utc.read.option("mergeSchema", "true").parquet(str(lake / name)).schema}
        want = {c.name: spark_type(c.dtype) for c in table.columns}
        if read != want:
            wrong[name] = {
                k: (read.get(k), want.get(k)) for k in read.keys() | want.keys() if read.get(k) != want.get(k)
            }
        checked.append(name)
    assert wrong == {}
    assert set(TABLES) <= set(checked) and len(checked) >= 15


def test_the_types_spark_sees_are_instants_decimals_lists_and_a_date(utc):
    """The same, spelled out for the types the issue names (the mapping above could be wrong in the same way)."""
    from pyspark.sql import types as T

    def types(name):
        return {f.name: f.dataType for f in utc.table(name).schema.fields}

    assert types("gpu_hourly")["hour"] == T.TimestampType()
    assert types("job_stats")["finished_at"] == T.TimestampType()
    assert types("cost_allocation")["charge_gpu_hours"] == T.DecimalType(18, 9)
    assert types("cost_allocation")["origin_charge_gpu_hours"] == T.DecimalType(18, 9)
    assert types("jobs")["gpu_uuids"] == T.ArrayType(T.StringType())
    label = T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.StringType())])
    assert types("nodes")["labels"] == T.ArrayType(label)
    # The partition column is parsed from the folder name as a DATE (Spark's partition type inference), not a string.
    for name in TABLES:
        assert types(name)["date"] == T.DateType()


@pytest.mark.parametrize("name", TABLES)
def test_spark_totals_equal_duckdb(utc, duck, name):
    spark_sql, floats = _totals_sql(name, "spark")
    (spark_row,) = utc.sql(spark_sql).collect()
    duck_sql, _ = _totals_sql(name, "duckdb")
    duck_res = duck.execute(duck_sql)
    got, want = spark_row.asDict(), dict(zip(duck_res.columns, duck_res.rows[0], strict=True))
    assert got.keys() == want.keys()
    assert want["n_rows"] > 0
    for key, value in want.items():
        if key in floats and value is not None and got[key] is not None:
            assert math.isclose(got[key], value, rel_tol=1e-9), (key, got[key], value)
        else:
            assert got[key] == value, (key, got[key], value)


def test_decimal_money_sums_are_exact_decimals(utc, duck):
    """charge_gpu_hours sums to the nano-GPU-hour in both engines: Decimals, equal digit for digit."""
    sql = "SELECT sum(charge_gpu_hours), sum(origin_charge_gpu_hours) FROM cost_allocation"
    (spark_row,) = utc.sql(sql).collect()
    (duck_row,) = duck.execute(sql).rows
    assert [type(v).__name__ for v in spark_row] == ["Decimal", "Decimal"]
    assert tuple(spark_row) == duck_row
    assert spark_row[0].as_tuple().exponent == -9


@pytest.mark.parametrize("name", TABLES)
def test_spark_rows_equal_duckdb(utc, duck, name):
    """Row for row, every column (floats exactly: both engines read the same 8 bytes), lists element for element."""
    got = _sorted_rows(utc.sql(_rows_sql(name, "spark")).collect())
    want = _sorted_rows(duck.execute(_rows_sql(name, "duckdb")).rows)
    assert len(got) == len(want) > 0
    assert got == want


@pytest.mark.parametrize("name", TABLES)
def test_partitions_are_the_date_folders_with_the_same_row_counts(utc, zoned, duck, lake, name):
    sql = "SELECT date, count(*) FROM {} GROUP BY date ORDER BY date"
    folders = sorted(dt.date.fromisoformat(p.name.removeprefix("date=")) for p in (lake / name).glob("date=*"))
    want = duck.execute(sql.format(_from(name, "duckdb"))).rows
    sql = sql.format(name)
    assert [d for d, _ in want] == folders and len(folders) >= 2
    assert [tuple(r) for r in utc.sql(sql).collect()] == want
    # A DATE has no time zone: the partition a row is in does not move with the session's zone.
    assert [tuple(r) for r in zoned.sql(sql).collect()] == want


def test_timestamps_are_instants_whatever_the_session_zone(utc, zoned, duck):
    """The same instants in a UTC and a +05:30 session; only their wall-clock rendering moves."""
    first_us, last_us = START * 10**6, (END - 3600) * 10**6  # hours 2026-10-31 00:00 .. 2026-11-01 23:00 UTC
    sql = "SELECT unix_micros(min(hour)), unix_micros(max(hour)) FROM gpu_hourly"
    assert tuple(utc.sql(sql).collect()[0]) == tuple(zoned.sql(sql).collect()[0]) == (first_us, last_us)
    assert duck.execute("SELECT epoch_us(min(hour)), epoch_us(max(hour)) FROM gpu_hourly").rows == [(first_us, last_us)]

    show = "SELECT date_format(max(hour), 'yyyy-MM-dd HH:mm'), to_date(max(hour)), max(date) FROM gpu_hourly"
    assert tuple(utc.sql(show).collect()[0]) == ("2026-11-01 23:00", dt.date(2026, 11, 1), dt.date(2026, 11, 1))
    # 23:00 UTC is 04:30 the next day in Kolkata; the row stays in the UTC date's partition, as the README says.
    assert tuple(zoned.sql(show).collect()[0]) == ("2026-11-02 04:30", dt.date(2026, 11, 2), dt.date(2026, 11, 1))

    # Every instant column of every table: the same epoch microseconds in both sessions.
    for name in TABLES:
        cols = [c.name for c in schema.table(name).columns if isinstance(c.dtype, pl.Datetime)]
        sql = "SELECT " + ", ".join(f"unix_micros(min({c})), unix_micros(max({c}))" for c in cols) + f" FROM {name}"
        assert utc.sql(sql).collect() == zoned.sql(sql).collect()


def test_the_vendor_columns_read_alike(spark, lake, duck):
    """Issue 26's columns (gpu_samples.vendor and partition_share, the vendor of gpu_hourly, fleet_hourly and
    cost_allocation; late, so older files lack them) read the same in Spark as in DuckDB, value by value."""
    checks = {
        "gpu_samples": "vendor, count(partition_share) AS shares",
        "gpu_hourly": "vendor, count(*) AS n",
        "fleet_hourly": "vendor, sum(gpus) AS gpus",
        "cost_allocation": "vendor, count(*) AS n",
    }
    for name, select in checks.items():
        spark.read.option("mergeSchema", "true").parquet(str(lake / name)).createOrReplaceTempView(f"v_{name}")
        got = _sorted_rows(spark.sql(f"SELECT {select} FROM v_{name} GROUP BY vendor").collect())
        want = _sorted_rows(duck.execute(f"SELECT {select} FROM {name} GROUP BY vendor").rows)
        assert got == want, name
        if name != "gpu_samples":  # the samples' own vendor is the source's to write (the simulator's may not)
            # the simulated fleet is NVIDIA's: every derived row is named so, by its model where the samples say none
            assert ("nvidia",) == tuple(r[0] for r in want), name
