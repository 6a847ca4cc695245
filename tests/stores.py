"""For the tests that run on both kinds of Store (conftest's `store` fixture, local and s3), through the Store's own
interface only: a local lake put on a store, every key a store holds, and a copy of a store's files on local disk
(for DuckDB's EXCEPT ALL comparisons, builders.differences)."""

from __future__ import annotations

from pathlib import Path

from gpuledger.store import Store


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
