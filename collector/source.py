"""The collector's one plug-in point: a Source yields typed record batches for lake tables.

A source is registered by name in the entry-point group `gpuledger.sources`, naming its SourceFactory; the
built-ins are registered in gpuledger's pyproject.toml exactly as a third-party package registers its own:

    [project.entry-points."gpuledger.sources"]
    acme = "acme_gpu.source:from_config"
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import polars as pl

from gpuledger.config import Config
from gpuledger.store import LakeRef


@dataclass(frozen=True)
class Batch:
    """Rows for one lake table as columns of plain Python values (timestamps: integer microseconds UTC)."""

    table: str
    columns: dict[str, list]

    @property
    def rows(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    @classmethod
    def from_frame(cls, table: str, df: pl.DataFrame) -> "Batch":
        temporal = [c for c, t in df.schema.items() if isinstance(t, pl.Datetime)]
        df = df.with_columns(pl.col(temporal).dt.epoch("us")) if temporal else df
        return cls(table, df.to_dict(as_series=False))

    @classmethod
    def from_rows(cls, table: str, rows: list[dict]) -> "Batch":
        """Columns from row dicts; a key missing from some rows is None there (the union of keys is kept)."""
        keys = dict.fromkeys(k for r in rows for k in r)
        return cls(table, {k: [r.get(k) for r in rows] for k in keys})


class Source(Protocol):
    """A source of telemetry or job lifecycle rows.

    `name` is the value written to each row's `source` column. `collect(now_s)` takes one scrape at UTC time
    `now_s` (seconds since the epoch) and returns the batches it read; it raises gpuledger.errors.SourceError
    naming the source and the reason when the scrape fails as a whole (a failure of one GPU is a
    health_events row, not an exception). `close()` releases what the source holds.
    """

    name: str

    def collect(self, now_s: float) -> Iterable[Batch]: ...

    def close(self) -> None: ...


class SourceFactory(Protocol):
    """What an entry point in `gpuledger.sources` names: builds the source from the validated config, the lake's
    root, the start time `now_s` (UTC seconds) and the `--url` values given to `gpuledger collect` (empty when
    none; a source that takes no URL ignores them). It raises gpuledger.errors.SourceError naming the source and
    the reason when it cannot start.
    """

    def __call__(self, cfg: Config, lake: LakeRef, now_s: float, urls: tuple[str, ...]) -> Source: ...
