"""Parse dcgm-exporter /metrics pages (Prometheus text exposition format 0.0.4) into samples.

Two parsers return the same samples and raise the same errors for every page:

* `parse_reference` is prometheus_client's parser plus the rules below, checked on its output. It is the oracle
  the tests compare against; at 15-30k samples/s on a 2-core machine it is too slow to run on every scrape.
* `parse_fast`, exported as `parse` for collectors, is hand-written. dcgm-exporter repeats one label set per GPU
  across every metric family, so each distinct label string is parsed once per page and every other line costs
  a few string slices, a dict lookup and a `float()`. Lines off that path go through `_parse_line`, which
  applies every rule; the reference also uses it to word its error reasons, so both say the same thing.

The language is what prometheus_client 0.26 accepts, narrowed where it is lax in ways that would hide a bad page:

* lines split on "\\n" only and are stripped; blank lines and lines starting with "#" are skipped. HELP and TYPE
  lines are not checked: samples carry no type, many real captures have none, and prometheus_client renames the
  samples of a counter family (`foo` becomes `foo_total`), so the reference never shows them to it;
* a sample line is `name[{labels}] value [timestamp]`. The name is a legacy metric name and comes first (no
  quoted UTF-8 name, no `__name__` label). Label names, quoted or not, are `[a-zA-Z_][a-zA-Z0-9_]*` and not
  `__`-prefixed. Values are double-quoted with the escapes \\\\ \\" \\n; any other backslash is kept. Blanks may
  surround names, `=` and commas; a trailing comma is allowed. `name=` with no value is an error
  (prometheus_client silently drops that label);
* one value, as prometheus_client reads it (`float()` without `_`: NaN, +Inf, -Inf, exponents), then at most
  one timestamp in integer ms (prometheus_client takes the first and the last of any number of fields, and
  float timestamps);
* the same name and label set twice in one page is an error at the second line ("duplicate series"), whatever
  the order or spacing of the labels;
* a last line without a newline that does not parse is reported as a truncated page.

Known difference: for "-0" the fast parser returns -0.0 and the reference 0.0 (prometheus_client reads it as
the integer 0); they compare equal.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import NamedTuple

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample as PcSample


class Sample(NamedTuple):
    """One sample line. The fast parser shares one `labels` dict between the lines of a label set: read-only."""

    name: str
    labels: Mapping[str, str]
    value: float
    timestamp: float | None  # seconds since the epoch (the page gives integer ms); None when absent


class ExpositionError(ValueError):
    """A malformed page. `line` is 1-based; `reason` is short and human, e.g. "duplicate series"."""

    def __init__(self, line: int, reason: str):
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason

    def __reduce__(self):
        # ValueError pickles self.args, the formatted message, which __init__ cannot take back.
        return (type(self), (self.line, self.reason))


class _LineError(Exception):
    """One line does not parse; the caller knows the line number."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# What dcgm-exporter writes: name="value" pairs without blanks or escapes, names not reserved (`__`).
# Everything else goes the long way.
_PLAIN_PAIR_TEXT = r'(?!__)[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"'
_PLAIN_LABELS = re.compile(rf"(?:{_PLAIN_PAIR_TEXT},)*(?:{_PLAIN_PAIR_TEXT})?")
_ESCAPE = re.compile(r'\\[\\n"]')
_UNESCAPE = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
_SPECIAL = re.compile(r'["=,}]')


def _reason(reason: str, cut: bool) -> str:
    return f"truncated page, last line has no newline: {reason}" if cut else reason


def _escaped(s: str, i: int) -> bool:
    """Whether s[i] follows an odd run of backslashes: prometheus_client's rule, inside quotes or out."""
    n = 0
    while i > n and s[i - 1 - n] == "\\":
        n += 1
    return n % 2 == 1


def _find_unquoted(s: str, chars: str) -> tuple[int, bool]:
    """The index of the first of `chars` outside double quotes (-1 if none), and whether s ends inside quotes."""
    in_quotes = False
    for m in _SPECIAL.finditer(s):
        i = m.start()
        if s[i] == '"':
            if not _escaped(s, i):
                in_quotes = not in_quotes
        elif not in_quotes and s[i] in chars:
            return i, False
    return -1, in_quotes


def _label_name(raw: str) -> str:
    name = raw.strip()
    if name[:1] == '"':
        if len(name) == 1 or name[-1] != '"':
            raise _LineError("unterminated quoted label name")
        name = name[1:-1]
    # No escape is undone: each yields a backslash, a quote or a newline, none of which a valid name holds.
    if not _LABEL_NAME.fullmatch(name):
        raise _LineError(f"invalid label name {name[:40]!r}")
    if name.startswith("__"):
        raise _LineError(f"reserved label name {name!r}")
    return name


def _label_value(term: str) -> str:
    if term[0] != '"':
        raise _LineError("label value not quoted")
    i = 1
    while True:
        i = term.find('"', i)
        if i < 0:
            raise _LineError("unterminated label value")
        if not _escaped(term, i):
            break
        i += 1
    if i != len(term) - 1:
        raise _LineError("unexpected text after label value")
    value = term[1:-1]
    return _ESCAPE.sub(lambda m: _UNESCAPE[m.group()], value) if "\\" in value else value


def _parse_labels(s: str) -> dict[str, str]:
    """The text between the braces, read term by term the way prometheus_client reads it, plus our rules."""
    if _PLAIN_LABELS.fullmatch(s):
        if not s:
            return {}
        # No '"' inside a plain value, so splitting on quotes alternates `name=` (after a comma from the second
        # on) and value, the last piece being "" or ",". 1.4 us (30%) faster per label set than a findall of the pairs.
        parts = s.split('"')
        values = parts[1::2]
        labels = dict(zip("".join(parts[0:-1:2])[:-1].split("=,"), values, strict=True))
        if len(labels) == len(values):
            return labels
    labels = {}
    rest = s.strip()
    while rest:
        if rest[0] == ",":
            rest = rest[1:]
            if not rest:
                break
            if rest[0] == ",":
                raise _LineError("empty label between commas")
        i, _ = _find_unquoted(rest, "=,}")
        if i >= 0 and rest[i] == "=":
            raw_name, rest = rest[:i], rest[i + 1 :]
            j, _ = _find_unquoted(rest, ",}")
        else:
            raw_name, j = None, i
        if j >= 0 and rest[j] == "}":
            raise _LineError("unexpected '}' in labels")
        if j < 0:
            j = len(rest)
        term, rest = rest[:j].strip(), rest[j:].strip()
        if raw_name is None:
            if term:
                raise _LineError("missing '=' in labels")
            continue  # prometheus_client skips a blank term, as in `a="1", ,b="2"`
        if not term:
            raise _LineError("missing label value")
        name = _label_name(raw_name)
        if name in labels:
            raise _LineError(f"duplicate label name {name!r}")
        labels[name] = _label_value(term)
    return labels


def _number(tok: str) -> float | None:
    if "_" in tok:  # float() reads 1_000; prometheus_client refuses it
        return None
    try:
        return float(tok)
    except ValueError:
        return None


def _parse_tail(rest: str) -> tuple[float, float | None]:
    s = rest.lstrip()
    # prometheus_client splits on spaces when there is one, else on tabs.
    fields = [f for f in (p.strip() for p in s.split(" " if " " in s else "\t")) if f]
    if not fields:
        raise _LineError("missing value")
    value = _number(fields[0])
    if value is None:
        raise _LineError(f"invalid value {fields[0][:40]!r}")
    if len(fields) == 1:
        return value, None
    if len(fields) > 2:
        raise _LineError("unexpected text after the timestamp")
    tok = fields[1]
    try:
        if "_" not in tok:
            return value, int(tok) / 1000
    except (ValueError, OverflowError):
        pass
    raise _LineError(f"invalid timestamp {tok[:40]!r}, want integer ms")


def _parse_line(line: str) -> tuple[str, dict[str, str], float, float | None] | None:
    """One line with every rule applied; None for a blank or comment line. Raises _LineError."""
    text = line.strip()
    if not text or text[0] == "#":
        return None
    m = _METRIC_NAME.match(text)
    if m is None:
        raise _LineError("invalid metric name")
    name, j = m.group(), m.end()
    k = j
    while k < len(text) and text[k].isspace():
        k += 1
    if k < len(text) and text[k] == "{":
        end, in_quotes = _find_unquoted(text[k + 1 :], "}")
        if end < 0:
            raise _LineError("unterminated label value" if in_quotes else "missing '}' after labels")
        labels = _parse_labels(text[k + 1 : k + 1 + end])
        rest = text[k + 2 + end :]
    elif k == j:
        raise _LineError("missing value" if j == len(text) else "invalid metric name")
    elif " " in text[j:k] or "\t" in text[j:k]:
        labels, rest = {}, text[k:]
    else:  # prometheus_client ends a name without labels at the first space or tab, nothing else
        raise _LineError("invalid metric name")
    value, timestamp = _parse_tail(rest)
    return name, labels, value, timestamp


def _cache_labels(cache: dict, s: str) -> tuple[dict[str, str], frozenset] | None:
    try:
        labels = _parse_labels(s)
    except _LineError:
        return None  # the caller re-reads the whole line to word the error
    entry = cache[s] = (labels, frozenset(labels.items()))
    return entry


def _good_name(name: str, names: set[str]) -> bool:
    if _METRIC_NAME.fullmatch(name):
        names.add(name)
        return True
    return False


def parse_fast(text: str, known: dict | None = None) -> list[Sample]:
    """The samples of a page, in page order. Raises ExpositionError naming the first bad line.

    `known`, kept by the caller between one target's pages, holds the label strings of its last page already
    parsed: an exporter repeats them scrape after scrape (AMD's pages have ~25 a GPU, one per clock, link, XCC and
    HBM stack), so a later page parses only those that changed. On return it holds this page's, nothing older."""
    samples: list[Sample] = []
    append = samples.append
    new = tuple.__new__
    seen: set[tuple[str, frozenset]] = set()  # (name, label set): a label set is the same whatever its spelling
    names: set[str] = set()
    cache: dict[str, tuple[dict[str, str], frozenset]] = {}  # label string -> (labels, label set)
    no_labels: tuple[dict[str, str], frozenset] = ({}, frozenset())
    lines = text.split("\n")
    cut = len(lines) if lines[-1] else 0  # a last line without "\n": if it does not parse, the page was cut
    lineno = 0
    for line in lines:
        lineno += 1
        if not line or line[0] == "#":
            continue
        # The value and timestamp never hold "}", so the last one closes the labels; a "}" inside a quoted
        # label value before it is fine, one anywhere else makes _parse_labels refuse the string.
        b = line.rfind("}")
        if b > 0:
            a = line.find("{")
            entry = cache.get(line[a + 1 : b])
            tail = line[b + 1 :]
        else:
            a = line.find(" ")
            entry = no_labels
            tail = line[a + 1 :]
        name = line[:a]
        value = timestamp = None
        if a > 0 and "_" not in tail and (name in names or _good_name(name, names)):
            if entry is None:
                s = line[a + 1 : b]
                entry = known.get(s) if known is not None else None
                if entry is None:
                    entry = _cache_labels(cache, s)
                else:
                    cache[s] = entry
            if entry is not None:
                if tail.count(" ") == 2 and (p := tail.split(" "))[2].isdigit() and p[2].isascii() and not p[0]:
                    # " value ms": Ascend's npu-exporter stamps every chip sample. Exactly one blank each side,
                    # the timestamp ASCII digits, or the long way (which reads the same pair, and words errors)
                    try:
                        value, timestamp = float(p[1]), int(p[2]) / 1000
                    except (ValueError, OverflowError):
                        pass
                else:
                    try:
                        value = float(tail)  # reads the blanks around one number; a timestamp makes it fail
                    except ValueError:
                        pass
        if value is not None:
            labels, key = entry
        else:
            try:
                parsed = _parse_line(line)
            except _LineError as e:
                raise ExpositionError(lineno, _reason(e.reason, lineno == cut)) from None
            if parsed is None:
                continue
            name, labels, value, timestamp = parsed
            key = frozenset(labels.items())
        series = (name, key)
        if series in seen:
            raise ExpositionError(lineno, "duplicate series")
        seen.add(series)
        append(new(Sample, (name, labels, value, timestamp)))
    if known is not None:
        known.clear()
        known.update(cache)
    return samples


parse = parse_fast

# The reference's own reading of a label set, used only on lines prometheus_client accepted: quoted strings with
# backslash escapes, and no backslash outside them (there, only a name with no value could hold one).
_REF_LABEL_SET = re.compile(r'\{((?:[^"\\}]|"(?:[^"\\]|\\.)*+")*+)\}', re.DOTALL)
_REF_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*+"', re.DOTALL)


def _reference_rules(line: str, s: PcSample) -> str | None:
    """Which of the module's rules a line prometheus_client read as sample `s` breaks, or None."""
    name = s.name
    rest = line[len(name) :]
    if not (_METRIC_NAME.fullmatch(name) and line.startswith(name) and rest and (rest[0] == "{" or rest[0].isspace())):
        return "invalid metric name"
    after = rest.lstrip()
    if after[:1] == "{":
        m = _REF_LABEL_SET.match(after)
        if m is None:
            return "malformed label set"
        if _REF_QUOTED.sub("", m.group(1)).count("=") != len(s.labels):
            return "missing label value"
        tail = after[m.end() :]
    else:
        tail = rest
    if not all(_LABEL_NAME.fullmatch(k) for k in s.labels):
        return "invalid label name"
    fields = tail.split()
    if len(fields) != (1 if s.timestamp is None else 2):
        return "unexpected text after the timestamp"
    if s.timestamp is not None:
        try:
            int(fields[1])
        except ValueError:
            return "invalid timestamp, want integer ms"
    return None


def _reference_error(lineno: int, line: str, cut: bool, fallback: str) -> ExpositionError:
    # The reference decides that a line is bad; _parse_line words the reason, so both parsers say the same.
    # Should _parse_line accept the line, the parsers disagree and the fallback says why the reference refused.
    try:
        _parse_line(line)
    except _LineError as e:
        return ExpositionError(lineno, _reason(e.reason, cut))
    return ExpositionError(lineno, _reason(fallback, cut))


def _pc_samples(text: str) -> list[PcSample]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def _as_float(v: int | float) -> float:
    try:
        return float(v)
    except OverflowError:  # prometheus_client keeps integer literals as int, which may not fit a float
        return math.inf if v > 0 else -math.inf


def parse_reference(text: str) -> list[Sample]:
    """The samples of a page as prometheus_client reads them, with this module's rules checked on top."""
    lines = text.split("\n")
    cut = len(lines) if lines[-1] else 0
    stripped = [line.strip() for line in lines]
    keep = [bool(s) and s[0] != "#" for s in stripped]
    # Comment lines become blank lines, so line numbers hold and every sample is its own untyped family.
    blanked = "\n".join(line if k else "" for line, k in zip(lines, keep, strict=True))
    try:
        whole = _pc_samples(blanked)
    except (ValueError, OverflowError):
        whole = None  # some line is bad: read them one by one below to find which
    if whole is not None and len(whole) != sum(keep):
        whole = None  # each sample line should give one sample; if not, pair them up line by line instead
    pending = iter(whole) if whole is not None else None
    samples: list[Sample] = []
    seen: set[tuple[str, frozenset]] = set()
    for lineno, (line, k) in enumerate(zip(stripped, keep, strict=True), 1):
        if not k:
            continue
        if pending is not None:
            s = next(pending)
        else:
            try:
                one = _pc_samples(line)
            except (ValueError, OverflowError) as e:
                raise _reference_error(lineno, line, lineno == cut, f"prometheus_client refuses it ({e})") from e
            s = one[0]
        problem = _reference_rules(line, s)
        if problem is not None:
            raise _reference_error(lineno, line, lineno == cut, problem)
        series = (s.name, frozenset(s.labels.items()))
        if series in seen:
            raise ExpositionError(lineno, "duplicate series")
        seen.add(series)
        samples.append(Sample(s.name, s.labels, _as_float(s.value), s.timestamp))
    return samples
