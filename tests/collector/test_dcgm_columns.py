"""The one-pass reader (collector/dcgm/columns.py) against the reference path (prometheus_client's parser, then
RowBuilder): the same rows and events for every captured page and for pages that take its odd branches; a page
it does not read is declined (None) with nothing added and no state changed."""

from pathlib import Path

import pytest

from gpuledger.collector.dcgm.columns import FieldColumns, PageReader
from gpuledger.collector.dcgm.exposition import parse_reference
from gpuledger.collector.dcgm.rows import RowBuilder

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"
CAPTURES = sorted(FIX.glob("*.prom"))
TS = 1_800_000_000_000_000
L = 'gpu="0",UUID="GPU-a",Hostname="n1",modelName="NVIDIA H100"'
L1 = 'gpu="1",UUID="GPU-b",Hostname="n1",modelName="NVIDIA H100",pod="p",namespace="ns",container="c"'

# Lines that reach every kind of field: columns with a unit factor, int columns, FB_FREE, blanks (int32 and fp64
# sentinels, NaN, +Inf), Xid and the exporter's Xid counter, the driver-version label field, a `_total` name, a
# field nobody listed, and a GPU whose pod labels come only on its second label set.
ODD = f"""# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{{{L}}} 87
DCGM_FI_DEV_FB_USED{{{L}}} 1024
DCGM_FI_DEV_FB_FREE{{{L}}} 80000
DCGM_FI_DEV_FB_RESERVED{{{L}}} 512
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{L}}} 123456789012
DCGM_FI_DEV_SM_CLOCK{{{L}}} 1980.4
DCGM_FI_DEV_MEM_CLOCK{{{L}}} 2147483632
DCGM_FI_DEV_POWER_USAGE{{{L}}} NaN
DCGM_FI_DEV_GPU_TEMP{{{L}}} +Inf
DCGM_FI_PROF_PCIE_TX_BYTES{{{L}}} 140737488355328
DCGM_FI_PROF_DRAM_ACTIVE{{{L}}} -0.0
DCGM_FI_DEV_XID_ERRORS{{{L},err_msg="Graphics Engine Exception"}} 13
DCGM_EXP_XID_ERRORS_COUNT{{{L},xid="79",window_size_in_ms="300000"}} 2
DCGM_FI_DRIVER_VERSION{{{L}}} 1
DCGM_FI_PROF_EXTRA_total{{{L}}} 1e-3
DCGM_FI_DEV_GPU_UTIL{{gpu="1",UUID="GPU-b",Hostname="n1",modelName="NVIDIA H100"}} 5
DCGM_FI_DEV_SM_CLOCK{{{L1}}} 1410
"""
# The same GPUs a scrape later: the Xid is the same (no new event), the counter grew, a pod went away.
ODD_LATER = ODD.replace("} 2\n", "} 5\n").replace(',pod="p",namespace="ns",container="c"', "")

# Lines off the fast path: escapes, blanks around names, a timestamp, no labels, a line with a "}" in a value.
SLOW = f"""DCGM_FI_DEV_GPU_UTIL{{{L}}} 3
DCGM_FI_DEV_GPU_TEMP{{ gpu = "0" , UUID="GPU-a",Hostname="n1",modelName="NVIDIA H100" }} 40
DCGM_FI_DEV_POWER_USAGE{{{L},note="a \\"quoted\\" }} brace"}} 300 1800000000000
DCGM_FI_PROF_EXTRA_1 7
"""


def reference(text: str, builder: RowBuilder):
    return builder.rows(parse_reference(text), TS, default_node="fallback")


def fast(text: str, reader: PageReader):
    fields, events = FieldColumns(), []
    samples = reader.read(text, TS, fields, events)
    cols = fields.columns(TS, "c", "dcgm")
    return samples, [dict(zip(cols, v, strict=True)) for v in zip(*cols.values(), strict=True)], events


def same(pages: list[str]) -> None:
    """Each page in turn (one target's scrapes) through both paths; rows equal, in order."""
    ref_builder, reader = RowBuilder("c"), PageReader(RowBuilder("c"), "fallback")
    for text in pages:
        want = reference(text, ref_builder)
        samples, fields, events = fast(text, reader)
        assert samples is not None
        assert samples == want.samples
        assert fields == want.fields
        assert events == want.events


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_every_capture_gives_the_reference_rows(path):
    text = path.read_text()
    same([text, text])  # twice: the second scrape reads its label sets from the reader's cache


def test_odd_fields_give_the_reference_rows_over_two_scrapes():
    same([ODD, ODD_LATER, ODD])
    _, _, events = fast(ODD, PageReader(RowBuilder("c"), None))
    assert [e["detail"] for e in events] == [
        "Xid 13: Graphics Engine Exception",
        "2 Xid 79 error(s) in the exporter's window",
    ]


def test_label_sets_spelled_apart_are_one_series():
    # The same label set in another order is the same series: the fast path must see the duplicate too.
    page = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x"} 5\nDCGM_FI_DEV_GPU_UTIL{UUID="GPU-x",gpu="0"} 6\n'
    assert fast(page, PageReader(RowBuilder("c"), None))[0] is None


@pytest.mark.parametrize(
    "line",
    [
        SLOW,
        'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 5 1800000000000\n',  # a timestamp
        'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 1_000\n',
        'DCGM_FI_DEV_GPU_UTIL{gpu="9"} 5\nDCGM_FI_DEV_GPU_UTIL{gpu="9"} 6\n',  # duplicate series
        '9bad{gpu="0"} 1\n',
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",=""} 1\n',
    ],
    ids=["slow-lines", "timestamp", "underscore", "duplicate", "bad-name", "bad-labels"],
)
def test_pages_off_the_fast_path_are_declined_and_change_nothing(line):
    reader = PageReader(RowBuilder("c"), None)
    fast(ODD, reader)
    before = (dict(reader.builder.last_xid), dict(reader.builder.xid_counts), dict(reader._labels))
    fields, events = FieldColumns(), []
    # The page's Xid lines come first: had they been applied before the bad line, the state would have moved.
    page = ODD.replace("} 2\n", "} 9\n").replace("} 13\n", "} 31\n") + line
    assert reader.read(page, TS, fields, events) is None
    assert (len(fields), events) == (0, [])
    assert (dict(reader.builder.last_xid), dict(reader.builder.xid_counts), dict(reader._labels)) == before


@pytest.mark.parametrize("page", ['node_load1{cpu="0"} 0.25\n', "", "# HELP only\n"])
def test_a_page_without_dcgm_series_is_declined(page):
    assert fast(page, PageReader(RowBuilder("c"), None))[0] is None


def with_values(page: str, values: list[str]) -> str:
    """The page with its sample lines' values replaced in turn by `values` (cycled), every other byte the same."""
    out, n = [], 0
    for line in page.split("\n"):
        if line and line[0] != "#":
            head, _, _ = line.rpartition(" ")
            line = f"{head} {values[n % len(values)]}"
            n += 1
        out.append(line)
    return "\n".join(out)


# Values a later scrape of the same series may bring, and whether the reader reads them: each is read as the
# reference path reads it, or the page is declined (the source then takes the reference path): "1_0" (float()
# reads it, the parser does not), "}" (it moves the line's last brace), no value, a timestamp.
LATER_VALUES = [
    (["3", "0.25", "-0.0", "1e-3", "2147483647", "123456789012345"], True),
    (["NaN", "+Inf", "-Inf", "140737488355328", "2147483632", "7"], True),
    (["2147483631", "140737488355327", "0", "1", "5", "6"], True),
    (["nan", "inf", "1E5", "-3"], True),
    (["1_0"], False),
    (["}"], False),
    (["3}"], False),
    ([""], False),
    (["3 1800000000000"], False),
]


@pytest.mark.parametrize("values, read", LATER_VALUES, ids=lambda v: ",".join(v)[:24] if isinstance(v, list) else "")
@pytest.mark.parametrize("page", [ODD, *(p.read_text() for p in CAPTURES)], ids=["odd", *(p.stem for p in CAPTURES)])
def test_a_later_scrape_with_new_values_reads_as_the_reference(page, values, read):
    # The second scrape of a target differs only in its values: the reader replays the first page's plan.
    ref_builder, reader = RowBuilder("c"), PageReader(RowBuilder("c"), "fallback")
    for text in (page, with_values(page, values), with_values(page, values[::-1]), page):
        if text != page and not read:
            fields, events = FieldColumns(), []
            assert reader.read(text, TS, fields, events) is None
            assert (len(fields), events) == (0, [])
            continue
        want = reference(text, ref_builder)
        samples, fields, events = fast(text, reader)
        assert (samples, fields, events) == (want.samples, want.fields, want.events)


def test_a_later_scrape_with_other_lines_is_read_in_full():
    # Same values, other lines: a pod comes, a line goes, a comment changes, an empty line gets text.
    ref_builder, reader = RowBuilder("c"), PageReader(RowBuilder("c"), "fallback")
    pages = [
        ODD,
        ODD.replace('UUID="GPU-b",Hostname="n1",modelName="NVIDIA H100"}', 'UUID="GPU-b",Hostname="n1",pod="q"}'),
        ODD.replace("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_FREE_X"),
        ODD.replace("# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).", "# HELP other words"),
        ODD.replace("# TYPE", "\n# TYPE"),
        ODD + "\n",
        ODD,
    ]
    for text in pages:
        samples, fields, events = fast(text, reader)
        want = reference(text, ref_builder)
        assert (samples, fields, events) == (want.samples, want.fields, want.events)
    # The page's last line, empty, now has text without a space: it splits as the empty line did, yet is no sample
    fields, events = FieldColumns(), []
    assert reader.read(ODD + "garbage", TS, fields, events) is None
