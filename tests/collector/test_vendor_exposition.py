"""The exposition parser on the AMD and Ascend pages: the fast path's timestamp lines (Ascend stamps every chip
sample) and the label strings a target's last page left (`known`) give what prometheus_client + our rules give,
on the REAL and GOLDEN fixtures, the SYNTHETIC full AMD page, and the same pages damaged."""

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuledger.collector.dcgm.exposition import ExpositionError, parse_fast, parse_reference

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "accelerators"
PAGES = sorted(p.name for p in FIX.glob("*.prom"))


def outcome(parser, text, **kw):
    try:
        samples = parser(text, **kw)
    except ExpositionError as e:
        return ("error", e.line, e.reason)
    return ("ok", [(s.name, dict(s.labels), "NaN" if math.isnan(s.value) else s.value, s.timestamp) for s in samples])


@pytest.mark.parametrize("name", PAGES)
def test_a_later_page_with_known_label_strings_reads_the_same(name):
    text = (FIX / name).read_text()
    known: dict = {}
    first = outcome(parse_fast, text, known=known)
    assert first == outcome(parse_reference, text) and first[0] == "ok"
    # `known` now holds this page's label strings only; a second read through them gives the same samples
    assert len(known) == len({line[line.find("{") + 1 : line.rfind("}")] for line in text.splitlines() if "{" in line})
    assert outcome(parse_fast, text, known=known) == first


def test_known_keeps_only_the_last_page():
    known: dict = {}
    parse_fast((FIX / "synthetic-amd-mi300x-x8-spx.prom").read_text(), known)
    parse_fast((FIX / "amd-dme-mi300x-spx-kaiwo-raw-line.prom").read_text(), known)
    assert len(known) == 1  # the one label string of the raw line; the 8-GPU page's 200 are gone


@st.composite
def damaged(draw):
    text = (FIX / draw(st.sampled_from(PAGES))).read_text()
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["cut", "flip", "junk", "drop"]))
        i = draw(st.integers(0, max(0, len(text) - 1)))
        if op == "cut":
            text = text[:i]
        elif op == "flip":
            text = text[:i] + draw(st.sampled_from(list(' {}"=,_\t1-.e'))) + text[i + 1 :]
        elif op == "junk":
            text = text[:i] + draw(st.sampled_from([" 1 ", " 2 3", "  ", " 1e", " ١٢"])) + text[i:]
        else:
            text = text[:i] + text[i + 1 :]
    return text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_damaged_vendor_pages_get_the_same_answer_from_both(text):
    assert outcome(parse_fast, text) == outcome(parse_reference, text)
