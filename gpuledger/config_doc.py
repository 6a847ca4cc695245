"""The README's config table, generated from the keys declared in gpuledger/config.py, so a key is written once.

`python -m gpuledger.config_doc --write` rewrites the table between the two marker lines of README.md's
"Configuration" section; `python -m gpuledger.config_doc` prints it. tests/core/test_readme.py fails when the README's
table differs from `table()`: a key missing from it, or documented but no longer declared.
"""

import dataclasses
import json
import sys
import typing
from pathlib import Path
from typing import Any

from gpuledger.config import Config
from gpuledger.config_keys import Key, bounds_text, declared, kind_name, sections, toml_key

README = Path(__file__).resolve().parent.parent / "README.md"
COMMAND = "python -m gpuledger.config_doc --write"
BEGIN = f"<!-- config table: generated from gpuledger/config.py by `{COMMAND}` -->"
END = "<!-- end of the config table -->"


def _type(k: Key, tp: Any) -> str:
    container, item = _shape(tp)
    inner, item = _shape(item) if container == "table" else ("", item)  # a table of lists
    base = kind_name(item).removeprefix("an ").removeprefix("a ").removesuffix(" (string)")
    if inner:
        base = f"{inner} of {base}s"
    if k.choices:
        base = "one of " + ", ".join(f"`{c}`" for c in k.choices)
    elif container:
        base = f"{container} of {base}s"
    bounds = bounds_text(k)
    text = f"{base} {bounds}" if bounds else base
    if k.check is not None:
        text += f", {'each ' if container else ''}{k.check.kind}"
    return text


def _shape(tp: Any) -> tuple[str, Any]:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) is tuple:
        return "list", args[0]
    if typing.get_origin(tp) is dict:
        return "table", args[1]
    if type(None) in typing.get_args(tp):  # X | None
        return "", args[0]
    return "", tp


def _default(f: dataclasses.Field, k: Key) -> str:
    if k.shown:
        return k.shown
    if k.required:
        return "required"
    v = f.default_factory() if f.default is dataclasses.MISSING else f.default
    if v is None:
        return "none"
    if isinstance(v, float):
        return f"`{v:g}`"
    if isinstance(v, Path):
        v = str(v)
    return f"`{json.dumps(list(v) if isinstance(v, tuple) else v)}`"


def _rows(cls: type, prefix: str) -> list[str]:
    out = []
    for f, k, tp in declared(cls):
        doc = f"{k.doc}; env `{k.env}` overrides it" if k.env else k.doc
        out.append(_row(f"`{prefix}{toml_key(f, k)}`", _type(k, tp), k.unit, _default(f, k), doc))
    return out


def _row(*cells: str) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def table() -> str:
    """The Markdown table: every key of every table and array of tables, in declaration order."""
    lines = [_row("key", "type", "unit", "default", "meaning"), "|---|---|---|---|---|"]
    lines += _rows(Config, "")
    by_name = {name: cls for name, cls, _ in sections(Config)}
    hints = typing.get_type_hints(Config)
    for f in dataclasses.fields(Config):
        if f.name in by_name:
            lines += _rows(by_name[f.name], f"{f.name}.")
        elif "rows" in f.metadata:
            lines.append(_row(f"`[[{f.name}]]`", "array of tables", "", f.metadata["shown"], f.metadata["rows"]))
            lines += _rows(typing.get_args(hints[f.name])[0], f"{f.name}[].")
        elif "tables" in f.metadata:  # one table per name: [class_policy.notebook]
            lines.append(_row(f"`[{f.name}.<name>]`", "table per name", "", f.metadata["shown"], f.metadata["tables"]))
            lines += _rows(typing.get_args(hints[f.name])[1], f"{f.name}.<name>.")
    return "\n".join(lines) + "\n"


def documented(readme: str) -> str | None:
    """The table as README.md has it (between the markers), or None without them."""
    if BEGIN not in readme or END not in readme:
        return None
    return readme.split(BEGIN, 1)[1].split(END, 1)[0].removeprefix("\n")


def main(argv: list[str]) -> int:
    if argv == []:
        sys.stdout.write(table())
        return 0
    if argv != ["--write"]:
        print(f"usage: {COMMAND}", file=sys.stderr)
        return 2
    text = README.read_text(encoding="utf-8")
    if documented(text) is None:
        print(f"{README}: no config table markers ({BEGIN} ... {END})", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    README.write_text(f"{head}{BEGIN}\n{table()}{END}{rest.split(END, 1)[1]}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
