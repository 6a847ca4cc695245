"""The object-store lake's clients against a real S3-protocol server (moto, its own process): Parquet written and
read back with hive partitions and exact types, DuckDB reading through an fsspec filesystem over pyarrow's S3 client,
and the failures (unreachable endpoint, bad credentials, missing bucket) each giving one clear error, fast."""

from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal

import duckdb
import polars as pl
import pyarrow.fs as pafs
import pytest
from fsspec.implementations.arrow import ArrowFSWrapper

from s3_server import KEY_ID, REGION, SECRET, MotoServer, free_port

UTC = dt.timezone.utc
FRAME = pl.DataFrame(
    {
        "ts": [dt.datetime(2026, 11, 1, 0, 0, tzinfo=UTC), dt.datetime(2026, 11, 1, 0, 1, tzinfo=UTC)],
        "cost_usd": [Decimal("1.2345"), Decimal("0.0001")],
        "gpus": [["GPU-a", "GPU-b"], []],
    },
    schema={"ts": pl.Datetime("us", "UTC"), "cost_usd": pl.Decimal(18, 4), "gpus": pl.List(pl.String)},
)


class S3Wrapper(ArrowFSWrapper):
    protocol = ("s3",)  # DuckDB hands a path to a registered fsspec filesystem by its protocol

    @classmethod
    def _strip_protocol(cls, path):
        return super()._strip_protocol(path.removeprefix("s3://")) if isinstance(path, str) else path


def opts(url: str, key: str = KEY_ID, secret: str = SECRET) -> dict[str, str]:
    return {
        "aws_endpoint_url": url,
        "aws_access_key_id": key,
        "aws_secret_access_key": secret,
        "aws_region": REGION,
        "aws_allow_http": "true",
    }


def test_polars_writes_and_reads_back_hive_partitioned_parquet_with_exact_types(s3):
    for date in ("2026-11-01", "2026-11-02"):
        FRAME.write_parquet(
            f"s3://{s3.bucket}/p/t/date={date}/part-n1-0-60.parquet", storage_options=opts(s3.endpoint_url)
        )
    got = pl.scan_parquet(
        f"s3://{s3.bucket}/p/t/**/*.parquet", storage_options=opts(s3.endpoint_url), hive_partitioning=True
    ).collect()
    assert got.schema["ts"] == pl.Datetime("us", "UTC")
    assert got.schema["cost_usd"] == pl.Decimal(18, 4)
    assert got.schema["gpus"] == pl.List(pl.String)
    assert sorted(got["date"].cast(pl.String).to_list()) == ["2026-11-01"] * 2 + ["2026-11-02"] * 2
    assert got.drop("date").sort("ts", "cost_usd").equals(pl.concat([FRAME, FRAME]).sort("ts", "cost_usd"))


def test_duckdb_reads_a_view_over_the_bucket_through_fsspec_on_pyarrow(s3):
    fs = s3.server.filesystem()
    FRAME.write_parquet(
        f"s3://{s3.bucket}/p/t/date=2026-11-01/part-n1-0-60.parquet", storage_options=opts(s3.endpoint_url)
    )
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register_filesystem(S3Wrapper(fs))
    con.execute(
        f"CREATE VIEW t AS SELECT * FROM read_parquet('s3://{s3.bucket}/p/t/date=*/*.parquet', hive_partitioning=true)"
    )
    rows = con.execute("SELECT ts, cost_usd, gpus, CAST(date AS VARCHAR) FROM t ORDER BY ts").fetchall()
    assert rows == [
        (dt.datetime(2026, 11, 1, 0, 0, tzinfo=UTC), Decimal("1.2345"), ["GPU-a", "GPU-b"], "2026-11-01"),
        (dt.datetime(2026, 11, 1, 0, 1, tzinfo=UTC), Decimal("0.0001"), [], "2026-11-01"),
    ]


def test_an_unreachable_endpoint_fails_fast_with_the_endpoint_named():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    fs = pafs.S3FileSystem(
        endpoint_override=url,
        scheme="http",
        access_key=KEY_ID,
        secret_key=SECRET,
        region=REGION,
        connect_timeout=1,
        request_timeout=2,
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1),
    )
    t = time.monotonic()
    with pytest.raises(OSError, match="(?i)connect|network"):
        fs.get_file_info(pafs.FileSelector("lake", recursive=True))
    assert time.monotonic() - t < 30  # a bound on a hang (retries default to minutes), not a timing figure


def test_bad_credentials_and_a_missing_bucket_are_named(moto_server):  # its own server: auth stays on
    with MotoServer(moto_server.python) as srv:
        srv.create_bucket("lake-auth")
        key, secret = srv.enforce_auth()
        with pytest.raises(OSError, match="SIGNATURE_DOES_NOT_MATCH"):
            srv.filesystem(access_key=key, secret_key="wrong").get_file_info(pafs.FileSelector("lake-auth"))
        with pytest.raises(OSError, match="INVALID_ACCESS_KEY_ID"):
            srv.filesystem(access_key="AKIANOBODY", secret_key="x").get_file_info(pafs.FileSelector("lake-auth"))
        good = srv.filesystem(access_key=key, secret_key=secret)
        with pytest.raises(OSError, match="(?i)bucket"):
            good.get_file_info(pafs.FileSelector("no-such-bucket"))


def test_duckdbs_lockdown_allows_the_lakes_prefix_and_nothing_else(s3):
    """gpuledger/query.py's guard (external access off, only the lake allowed) holds for an fsspec S3 lake too."""
    for key in ("p/t/a.parquet", "other/t/a.parquet"):
        FRAME.write_parquet(f"s3://{s3.bucket}/{key}", storage_options=opts(s3.endpoint_url))
    con = duckdb.connect()
    con.register_filesystem(S3Wrapper(s3.server.filesystem()))
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET allowed_directories = $d", {"d": [f"s3://{s3.bucket}/p/"]})
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    assert con.execute(f"SELECT count(*) FROM read_parquet('s3://{s3.bucket}/p/t/*.parquet')").fetchall() == [(2,)]
    for outside in (f"s3://{s3.bucket}/other/t/*.parquet", "/etc/hostname"):
        with pytest.raises(duckdb.PermissionException, match="disabled by configuration"):
            con.execute(f"SELECT count(*) FROM read_parquet('{outside}')")
