"""Config keys declared once: a dataclass field per key, its rules in the field's metadata, one walker reading them.

`key(default, doc, gt=0, unit="s", ...)` makes a dataclass field whose metadata is a `Key`: its bounds, choices,
item check, unit, one-line doc. The type is the field's annotation: str, int, float (an int is taken and made a
float), `int | float` (either, kept as given), Path, dt.datetime (a TOML date or offset date-time, made UTC), a
tuple of one of them (a TOML list) or a dict of one or of such tuples (a TOML table), each optionally `| None`.
`Walker.values(table, path, cls)` checks and converts every key a class declares, recording `path: problem` for
each mistake instead of stopping; gpuledger/config.py declares gpuledger's keys with it and gpuledger/config_doc.py
renders the README's table from the same declarations.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from gpuledger.store import is_url


@dataclass(frozen=True)
class Check:
    """An item check: `problem(v)` says what is wrong with a (well-typed) value, None when nothing is; `kind` names
    what it accepts in the README's type column."""

    kind: str
    problem: Callable[[Any], str | None]


def must(ok: Callable[[Any], bool], why: str) -> Callable[[Any], str | None]:
    return lambda v: None if ok(v) else f"{why}, got {v!r}"


@dataclass(frozen=True)
class Key:
    """What a field's metadata says about its TOML key (the type is the field's annotation)."""

    doc: str
    unit: str = ""
    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    choices: tuple[str, ...] = ()
    check: Check | None = None  # applied to the value, or to each item of a list or table
    why: str = ""  # replaces the bounds' generic "must be ..." where a name says it better ("must be a TCP port")
    toml: str = ""  # its TOML key when it differs from the field's name ("budget.usd_per_month"; one level only)
    shown: str = ""  # the default as the README shows it, when the value does not say it ("host name")
    required: bool = False
    relative_to_file: bool = False  # a path relative to the config file's folder (and ~ expanded)
    env: str = ""  # an environment variable that, when set, replaces the file's value (string keys; config.load)


_NO_DEFAULT: Any = dataclasses.MISSING


def key(default: Any = _NO_DEFAULT, doc: str = "", *, factory: Any = _NO_DEFAULT, **meta: Any) -> Any:
    """A config key: a dataclass field with `default` (or `factory`) and its declaration `Key(doc, **meta)`."""
    k = Key(doc, required=default is _NO_DEFAULT and factory is _NO_DEFAULT, **meta)
    return field(default=default, default_factory=factory, metadata={"key": k})


def section(cls: type, doc: str) -> Any:
    """A config table ([collector]): a field holding a `cls` whose keys are declared with `key`."""
    return field(default=cls(), metadata={"section": doc})


def declared(cls: type) -> list[tuple[dataclasses.Field, Key, Any]]:
    """(field, declaration, resolved type) of each config key of a dataclass, in declaration order."""
    return _declared(cls)


@cache
def _declared(cls: type) -> list[tuple[dataclasses.Field, Key, Any]]:
    hints = typing.get_type_hints(cls)
    return [(f, f.metadata["key"], hints[f.name]) for f in dataclasses.fields(cls) if "key" in f.metadata]


def toml_key(f: dataclasses.Field, k: Key) -> str:
    return k.toml or f.name


# --- the walker ----------------------------------------------------------------------------------------------


def _shape(tp: Any) -> tuple[str, Any]:
    """("scalar" | "list" | "table", the item type), with an optional (X | None) reduced to X."""
    if isinstance(tp, types.UnionType) and type(None) in tp.__args__:
        (tp,) = (a for a in tp.__args__ if a is not type(None))
    origin = typing.get_origin(tp)
    if origin is tuple:
        return "list", typing.get_args(tp)[0]
    if origin is dict:
        return "table", typing.get_args(tp)[1]
    return "scalar", tp


# TOML value types each item type accepts, and how a message names it. float takes an int (and makes it a float);
# `int | float` takes either as given (a quota of 40 GPUs stays 40).
_KINDS: dict[Any, tuple[tuple[type, ...], str]] = {
    str: ((str,), "a string"),
    bool: ((bool,), "true or false"),
    int: ((int,), "an integer"),
    float: ((int, float), "a number"),
    int | float: ((int, float), "a number"),
    Path: ((str,), "a path (string)"),
    dt.datetime: ((dt.date,), "a date or offset date-time"),  # a datetime is a date too
}


def kind_name(tp: Any) -> str:
    return _KINDS[tp][1]


class Walker:
    """Walks a parsed TOML document, recording `key.path: problem` for every mistake instead of stopping."""

    def __init__(self, base_dir: Path | None = None) -> None:
        self.problems: list[str] = []
        self.base_dir = base_dir

    def bad(self, key: str, problem: str) -> None:
        self.problems.append(f"{key}: {problem}")

    def table(self, doc: Any, key: str, allowed: Iterable[str]) -> dict:
        allowed = set(allowed)
        if not isinstance(doc, dict):
            self.bad(key, f"expected a table, got {type(doc).__name__}")
            return {}
        for k in doc:
            if k not in allowed:
                self.bad(f"{key}.{k}" if key else k, f"unknown key (allowed: {', '.join(sorted(allowed))})")
        return doc

    def values(self, doc: dict, where: str, cls: type, only: Iterable[str] | None = None) -> dict[str, Any]:
        """The keys `cls` declares (those named in `only`, default all) that `doc` holds, each checked and
        converted, by field name; a missing required key, a bad value, an unknown key in a nested table are
        recorded. A key absent or bad is left out, so the dataclass's default fills it."""
        out: dict[str, Any] = {}
        keys = [(f, k, tp) for f, k, tp in declared(cls) if only is None or f.name in only]
        nested: dict[str, set[str]] = {}
        for f, k, _ in keys:
            head, _, rest = toml_key(f, k).partition(".")
            if rest:
                nested.setdefault(head, set()).add(rest)
        subs = {h: self.table(doc[h], _join(where, h), names) for h, names in nested.items() if h in doc}
        for f, k, tp in keys:
            head, _, rest = toml_key(f, k).partition(".")
            table, name = (subs.get(head, {}), rest) if rest else (doc, head)
            path = _join(where, toml_key(f, k))
            if name not in table:
                if k.required:
                    self.bad(path, "missing")
                continue
            v = self.value(path, table[name], k, tp)
            if v is not _BAD:
                out[f.name] = v
        return out

    def value(self, path: str, v: Any, k: Key, tp: Any) -> Any:
        shape, item = _shape(tp)
        if shape == "scalar":
            return self._item(path, v, k, item)
        if shape == "list":
            if not isinstance(v, list):
                return self._wrong(path, f"a list of {kind_name(item).removeprefix('a ').removeprefix('an ')}s", v)
            got = [self._item(f"{path}[{i}]", x, k, item) for i, x in enumerate(v)]
            return _BAD if _BAD in got else tuple(got)
        if not isinstance(v, dict):
            return self._wrong(path, "a table", v)
        # A table's values are items, or lists of items ([dashboard.tenant_groups] team = ["vision", "speech"]).
        got = {name: self.value(f"{path}.{name}", x, k, item) for name, x in v.items()}
        return _BAD if _BAD in got.values() else got

    def _wrong(self, path: str, expected: str, v: Any) -> Any:
        self.bad(path, f"expected {expected}, got {type(v).__name__} {v!r}")
        return _BAD

    def _item(self, path: str, v: Any, k: Key, tp: Any) -> Any:
        accepts, name = _KINDS[tp]
        if (isinstance(v, bool) and tp is not bool) or not isinstance(v, accepts):  # TOML true is no number
            return self._wrong(path, name, v)
        if isinstance(v, float) and not math.isfinite(v):  # TOML has nan and inf: no number of ours means either
            self.bad(path, f"must be a finite number, got {v!r}")
            return _BAD
        problem = _out_of_bounds(v, k)
        if problem is None and k.choices and v not in k.choices:
            problem = f"must be one of {', '.join(k.choices)}, got {v!r}"
        if problem is None and k.check is not None:
            problem = k.check.problem(v)
        if problem is None and tp is dt.datetime:
            if isinstance(v, dt.datetime):
                if v.tzinfo is None:
                    problem = f"{v.isoformat()} has no UTC offset: write 2026-07-01T12:00:00Z"
                else:
                    v = v.astimezone(dt.timezone.utc)
            else:  # a date: its midnight, UTC
                v = dt.datetime.combine(v, dt.time(), dt.timezone.utc)
        if problem is not None:
            self.bad(path, problem)
            return _BAD
        if tp is float:
            return float(v)
        if tp is Path:
            if not v:  # an empty optional path is its default (spool_dir = "": <lake>/_spool/<node>)
                return None
            if k.relative_to_file and is_url(v):  # lake.path = "s3://bucket/prefix": no file's folder
                return v
            p = Path(v).expanduser() if k.relative_to_file else Path(v)
            return p if p.is_absolute() or not k.relative_to_file or self.base_dir is None else self.base_dir / p
        return v


_BAD: Any = object()


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _num(v: float) -> str:
    """A bound as written: 4294967295, not 4.29497e+09; 0.5 as 0.5."""
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def bounds_text(k: Key) -> str:
    """The bounds in words: "> 0", "between 1 and 16", "in (0, 2]"; "" when there are none."""
    lo = (f"({_num(k.gt)}", k.gt) if k.gt is not None else (f"[{_num(k.ge)}", k.ge) if k.ge is not None else None
    hi = (f"{_num(k.lt)})", k.lt) if k.lt is not None else (f"{_num(k.le)}]", k.le) if k.le is not None else None
    if lo and hi:
        if k.ge is not None and k.le is not None:
            return f"between {_num(k.ge)} and {_num(k.le)}"
        return f"in {lo[0]}, {hi[0]}"
    if lo:
        return f"> {_num(k.gt)}" if k.gt is not None else f">= {_num(k.ge)}"
    if hi:
        return f"< {_num(k.lt)}" if k.lt is not None else f"<= {_num(k.le)}"
    return ""


def _out_of_bounds(v: Any, k: Key) -> str | None:
    if not isinstance(v, (int, float)):
        return None
    ok = (
        (k.gt is None or v > k.gt)
        and (k.ge is None or v >= k.ge)
        and (k.lt is None or v < k.lt)
        and (k.le is None or v <= k.le)
    )
    return None if ok else f"{k.why or 'must be ' + bounds_text(k)}, got {v!r}"


def sections(cls: type) -> list[tuple[str, type, str]]:
    """(TOML table, its dataclass, its doc) of each [table] field of `cls`."""
    hints = typing.get_type_hints(cls)
    return [(f.name, hints[f.name], f.metadata["section"]) for f in dataclasses.fields(cls) if "section" in f.metadata]


def allowed(cls: type) -> set[str]:
    """The keys a table of `cls` may hold (a nested table counts once, by its name)."""
    top = {toml_key(f, k).partition(".")[0] for f, k, _ in declared(cls)}
    return top | {f.name for f in dataclasses.fields(cls) if {"section", "rows", "tables"} & set(f.metadata)}
