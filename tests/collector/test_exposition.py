"""The two dcgm-exporter page parsers: real captures, generated pages, fuzzed junk and hand-written bad pages.

The reference (prometheus_client plus our rules) is the oracle: the fast parser must give the same samples and
the same errors, line and reason, on every input.
"""

from __future__ import annotations

import math
import pickle
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuledger.collector.dcgm.exposition import ExpositionError, Sample, parse, parse_fast, parse_reference

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "dcgm"
PAGES = sorted(FIXTURES.glob("*.prom"))
PARSERS = [parse_fast, parse_reference]


def outcome(parser, text):
    """What a parser made of a page, comparable with ==; NaN stands for itself. Any other exception fails."""
    try:
        samples = parser(text)
    except ExpositionError as e:
        return ("error", e.line, e.reason)
    return ("ok", [(s.name, dict(s.labels), "NaN" if math.isnan(s.value) else s.value, s.timestamp) for s in samples])


def page(name: str) -> str:
    return (FIXTURES / name).read_text()


def by_line(samples, text):
    """Sample of each sample line, keyed by 1-based line number."""
    numbers = [i for i, line in enumerate(text.split("\n"), 1) if line.strip() and not line.lstrip().startswith("#")]
    assert len(numbers) == len(samples)
    return dict(zip(numbers, samples, strict=True))


# --- real captures ---------------------------------------------------------------------------------------------


def test_every_shared_file_is_copied():
    if not SHARED.is_dir():
        pytest.skip("../shared/data/dcgm is absent")
    for src in SHARED.iterdir():
        if src.suffix in (".prom", ".csv", ".json"):
            assert (FIXTURES / src.name).read_bytes() == src.read_bytes(), src.name
    assert len(PAGES) == 11


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_fixture_parses_the_same_with_both(path):
    text = path.read_text()
    fast, ref = outcome(parse_fast, text), outcome(parse_reference, text)
    assert fast == ref
    assert fast[0] == "ok"
    sample_lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(fast[1]) == len(sample_lines)
    assert [s[0] for s in fast[1]] == [ln.split("{")[0] for ln in sample_lines]


@pytest.mark.parametrize("parser", PARSERS)
def test_h100_power_of_the_gpu_that_runs_a_pod(parser):
    text = page("h100x8-eks-gpu-operator-1pod-a.prom")
    s = by_line(parser(text), text)[11]
    assert s.name == "DCGM_FI_DEV_POWER_USAGE" and s.value == 110.786 and s.timestamp is None
    assert dict(s.labels) == {
        "gpu": "2",
        "UUID": "GPU-8d76cfcf-a144-5e43-876b-a4b71f2aecd1",
        "pci_bus_id": "00000000:75:00.0",
        "device": "nvidia2",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "ip-100-64-147-149.ec2.internal",
        "DCGM_FI_DRIVER_VERSION": "580.105.08",
        "container": "main",
        "namespace": "dynamo-workload",
        "pod": "vllm-agg-0-vllmdecodeworker-dkb9q",
        "pod_uid": "",
    }
    idle = by_line(parser(text), text)[9]
    assert (idle.labels["gpu"], idle.value) == ("0", 67.433) and "pod" not in idle.labels


@pytest.mark.parametrize("parser", PARSERS)
def test_mig_instance_lines_carry_the_instance_labels(parser):
    text = page("a100-mig-1g.5gb-docs-2.x.prom")
    lines = by_line(parser(text), text)
    assert len(lines) == 21
    whole, mig = [lines[n] for n in range(1, 18)], [lines[n] for n in range(18, 22)]
    assert all("GPU_I_ID" not in s.labels and "GPU_I_PROFILE" not in s.labels for s in whole)
    assert all(s.labels["GPU_I_PROFILE"] == "1g.5gb" and s.labels["GPU_I_ID"] == "13" for s in mig)
    assert (mig[1].name, mig[1].value) == ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.995687)
    # XID_ERRORS for the GPU and for its instance: two series, not a duplicate.
    assert [s.name for s in (lines[8], lines[18])] == ["DCGM_FI_DEV_XID_ERRORS"] * 2
    assert "modelName" not in lines[1].labels and "pci_bus_id" not in lines[1].labels  # 2.x labels


@pytest.mark.parametrize("parser", PARSERS)
def test_readme_sample_sentinel_and_spaced_label_set(parser):
    text = page("readme-k8s-quickstart-doc-sample.prom")
    sm, mem, memtemp = parser(text)
    assert memtemp.name == "DCGM_FI_DEV_MEMORY_TEMP"
    assert memtemp.value == 9223372036854775794.0 == float(2**63 - 14)  # DCGM_INT64_NOT_SUPPORTED, not decoded
    assert dict(sm.labels) == {
        "gpu": "0",
        "UUID": "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",
        "container": "",
        "namespace": "",
        "pod": "",
    }
    assert (sm.value, mem.value) == (139.0, 405.0)


@pytest.mark.parametrize("parser", PARSERS)
def test_captures_without_help_and_type_and_from_a_vgpu_guest(parser):
    t4 = page("t4-baremetal-gpu-operator-590.48.01.prom")
    assert "#" not in t4
    samples = parser(t4)
    assert len(samples) == 20 and samples[5].name == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
    assert samples[5].value == 15152422938.0
    for name, model, licensed in (("40c", "GRID A100-40C", 1.0), ("10c", "GRID A100-10C", 0.0)):
        vgpu = parser(page(f"vgpu-grid-a100-{name}-vks-580.126.09.prom"))
        assert {s.labels["modelName"] for s in vgpu} == {model}
        assert not {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP"} & {s.name for s in vgpu}
        assert [s.value for s in vgpu if s.name == "DCGM_FI_DEV_VGPU_LICENSE_STATUS"] == [licensed]


def test_counter_families_keep_their_page_name():
    # prometheus_client alone would call these DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total (TYPE counter).
    text = page("l4-aws-kops-gpu-operator-580.105.08.prom")
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter" in text
    for parser in PARSERS:
        (energy,) = [s for s in parser(text) if "ENERGY" in s.name]
        assert (energy.name, energy.value) == ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 4742776.0)


TRICKY_VALUES = [",", "=", '="', ",b=", "}", "{", "a,b=c", "", " ", "\\", '"', "\n", "ünï", "x}y", "GPU-0,gpu=1"]


@pytest.mark.parametrize("parser", PARSERS)
def test_label_values_that_look_like_syntax(parser):
    labels = {f"l{i}": v for i, v in enumerate(TRICKY_VALUES)}
    body = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
    text = f"m{{{body}}} 1\nm{{{body},}} 2\n"
    with pytest.raises(ExpositionError, match="line 2: duplicate series"):
        parser(text)
    (sample,) = parser(text.split("\n")[0])
    assert dict(sample.labels) == labels
    for k, v in labels.items():  # one label at a time: each takes the plain path unless it needs an escape
        (alone,) = parser(f'm{{{k}="{escape(v)}"}} 1')
        assert dict(alone.labels) == {k: v}


def test_fast_parser_shares_one_labels_dict_per_label_set():
    samples = parse(page("h100x8-eks-gpu-operator-1pod-a.prom"))
    assert parse is parse_fast
    gpu0 = [s.labels for s in samples if s.labels["gpu"] == "0"]
    assert len(gpu0) == 4 and all(labels is gpu0[0] for labels in gpu0)
    assert all(type(s) is Sample for s in samples)


# --- hand-written bad pages -------------------------------------------------------------------------------------

GOOD = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1"} 7\n'
CUT = "truncated page, last line has no newline: "
BAD = [
    ("bad line", GOOD + "this is not a metric\n", 2, "invalid value 'is'"),
    ("bad name", GOOD + "9lives 1\n", 2, "invalid metric name"),
    ("no value", GOOD + 'DCGM_FI_DEV_FB_USED{gpu="0"}\n', 2, "missing value"),
    ("unterminated label value", GOOD + 'DCGM_FI_DEV_FB_USED{gpu="0} 12\n', 2, "unterminated label value"),
    ("no closing brace", GOOD + 'DCGM_FI_DEV_FB_USED{gpu="0" 12\n', 2, "missing '}' after labels"),
    ("invalid value", GOOD + 'DCGM_FI_DEV_FB_USED{gpu="0"} abc\n', 2, "invalid value 'abc'"),
    ("underscore value", GOOD + 'DCGM_FI_DEV_FB_USED{gpu="0"} 1_000\n', 2, "invalid value '1_000'"),
    ("float timestamp", GOOD + "up 1 1.5\n", 2, "invalid timestamp '1.5', want integer ms"),
    ("three fields", GOOD + "up 1 2 3\n", 2, "unexpected text after the timestamp"),
    ("duplicate series", GOOD + "# HELP x\n" + GOOD, 3, "duplicate series"),
    ("duplicate, other order", GOOD + 'DCGM_FI_DEV_GPU_UTIL{ UUID="GPU-1", gpu="0", } 8\n', 2, "duplicate series"),
    ("duplicate without labels", "up 1\nup{} 2\n", 2, "duplicate series"),
    ("truncated body", GOOD + 'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GP', 2, CUT + "unterminated label value"),
    ("truncated after brace", GOOD + 'DCGM_FI_DEV_FB_USED{gpu="0"}', 2, CUT + "missing value"),
    ("missing '=' in labels", GOOD + 'DCGM_FI_DEV_FB_USED{gpu"0"} 1\n', 2, "missing '=' in labels"),
    ("label without value", GOOD + "DCGM_FI_DEV_FB_USED{gpu=} 1\n", 2, "missing label value"),
    ("unquoted label value", GOOD + "DCGM_FI_DEV_FB_USED{gpu=0} 1\n", 2, "label value not quoted"),
    ("two commas", GOOD + 'DCGM_FI_DEV_FB_USED{gpu="0",,a="1"} 1\n', 2, "empty label between commas"),
    ("text after a label value", GOOD + 'DCGM_FI_DEV_FB_USED{gpu="0"x} 1\n', 2, "unexpected text after label value"),
    ("duplicate label name", GOOD + 'DCGM_FI_DEV_FB_USED{gpu="0",gpu="1"} 1\n', 2, "duplicate label name 'gpu'"),
    ("reserved label name", GOOD + 'DCGM_FI_DEV_FB_USED{__name__="x"} 1\n', 2, "reserved label name '__name__'"),
    ("label name with a dot", GOOD + 'DCGM_FI_DEV_FB_USED{"k8s.pod"="x"} 1\n', 2, "invalid label name 'k8s.pod'"),
    ("quoted metric name", GOOD + '{"DCGM_FI_DEV_FB_USED"} 1\n', 2, "invalid metric name"),
]


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize("text,line,reason", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_malformed_page(parser, text, line, reason):
    with pytest.raises(ExpositionError) as info:
        parser(text)
    assert (info.value.line, info.value.reason) == (line, reason)
    assert str(info.value) == f"line {line}: {reason}"


def test_error_pickles_with_its_line_and_reason():
    e = pickle.loads(pickle.dumps(ExpositionError(3, "duplicate series")))
    assert (e.line, e.reason, str(e)) == (3, "duplicate series", "line 3: duplicate series")
    assert isinstance(e, ValueError)


# --- generated pages --------------------------------------------------------------------------------------------

metric_names = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,24}", fullmatch=True)
label_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,12}", fullmatch=True).filter(lambda n: not n.startswith("__"))
# Any text, with the characters that matter to the format drawn often.
label_values = st.text(st.one_of(st.sampled_from('"\\\n{},= \t#'), st.characters(exclude_categories=("Cs",))))
label_sets = st.dictionaries(label_names, label_values, max_size=6)


@st.composite
def value_tokens(draw):
    """A value as some exporter might print it, and the float it stands for."""
    kind = draw(st.sampled_from(["int", "big", "repr", "fixed", "exp", "special"]))
    if kind == "int":
        token = str(draw(st.integers(-(2**63), 2**64)))
    elif kind == "big":
        token = str(draw(st.integers(10**300, 10**330)))
    elif kind == "special":
        token = draw(st.sampled_from(["NaN", "nan", "+Inf", "-Inf", "Inf", "inf", "+1e3", "-0", ".5", "5."]))
    else:
        f = draw(st.floats(allow_nan=True, allow_infinity=True))
        token = {"repr": repr, "fixed": lambda x: f"{x:f}", "exp": lambda x: f"{x:e}"}[kind](f)
    return token, float(token)


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


NAME_SPELLINGS = ("{}", '"{}"', " {} ")  # plain, quoted, blank-padded: all read as the same label name


@st.composite
def sample_lines(draw, name: str, labels: dict, value: str, ts: int | None, plain: bool) -> str:
    """One sample line: as dcgm-exporter writes it when `plain`, else with every spelling the format allows."""
    items = list(labels.items())
    if plain:
        return name + "{" + ",".join(f'{k}="{escape(v)}"' for k, v in items) + "}" + f" {value}"
    if draw(st.booleans()):
        items.reverse()
    pairs = [f'{draw(st.sampled_from(NAME_SPELLINGS)).format(k)}="{escape(v)}"' for k, v in items]
    sep, gap = draw(st.sampled_from([",", ", ", " , "])), draw(st.sampled_from([" ", "\t", "  "]))
    body = sep.join(pairs) + (draw(st.sampled_from(["", ","])) if pairs else "")
    if pairs or draw(st.booleans()):
        head = name + draw(st.sampled_from(["", " "])) + "{" + body + "}"
    else:
        head = name
    return draw(st.sampled_from(["", " "])) + head + gap + value + ("" if ts is None else gap + str(ts))


@st.composite
def pages(draw):
    """A valid page and the samples it holds. A few label sets repeat across families, as GPUs do."""
    pool = draw(st.lists(label_sets, min_size=1, max_size=4, unique_by=lambda d: frozenset(d.items())))
    series = draw(
        st.lists(st.tuples(metric_names, st.integers(0, len(pool) - 1)), min_size=1, max_size=25, unique=True)
    )
    plain = draw(st.booleans())
    lines, expected, families = [], [], set()
    for name, which in series:
        if name not in families and draw(st.booleans()):
            lines.append(f"# HELP {name} {draw(st.text(st.characters(exclude_characters=chr(10))))}")
            lines.append(f"# TYPE {name} {draw(st.sampled_from(['gauge', 'counter', 'untyped', 'summary']))}")
        families.add(name)
        token, value = draw(value_tokens())
        ts = None if plain else draw(st.none() | st.integers(-(10**16), 10**16))
        lines.append(draw(sample_lines(name, pool[which], token, ts, plain)))
        if not plain and draw(st.integers(0, 9)) == 0:
            lines.append(draw(st.sampled_from(["", "#", "# some comment", "   "])))
        expected.append((name, pool[which], "NaN" if math.isnan(value) else value, None if ts is None else ts / 1000))
    end = "\r\n" if not plain and draw(st.booleans()) else "\n"
    return end.join(lines) + draw(st.sampled_from([end, ""])), expected


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pages())
def test_generated_pages_parse_to_what_was_written(generated):
    text, expected = generated
    assert outcome(parse_fast, text) == outcome(parse_reference, text) == ("ok", expected)


# --- fuzz: junk and damaged captures ----------------------------------------------------------------------------

exposition_text = st.text(st.one_of(st.sampled_from('ab_:{}"=, \t\\\n#019.e+-NaInf'), st.characters()), max_size=200)


@settings(max_examples=1000, deadline=None)
@given(exposition_text)
def test_junk_gets_the_same_answer_from_both(text):
    assert outcome(parse_fast, text) == outcome(parse_reference, text)


@st.composite
def damaged_captures(draw):
    text = page(draw(st.sampled_from([p.name for p in PAGES])))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["cut", "flip", "junk line", "repeat line", "drop char"]))
        i = draw(st.integers(0, max(0, len(text) - 1)))
        if op == "cut":
            text = text[:i]
        elif op == "flip":
            text = text[:i] + draw(st.sampled_from('{}",= \n\\#_xe.\t')) + text[i + 1 :]
        elif op == "drop char":
            text = text[:i] + text[i + 1 :]
        else:
            lines = text.split("\n")
            j = draw(st.integers(0, len(lines)))
            new = draw(exposition_text.map(lambda s: s.replace("\n", " "))) if op == "junk line" else lines[j - 1]
            text = "\n".join(lines[:j] + [new] + lines[j:])
    return text


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_captures())
def test_damaged_captures_get_the_same_answer_from_both(text):
    assert outcome(parse_fast, text) == outcome(parse_reference, text)


def test_damage_is_mostly_caught():
    """Damage of this kind is what the fuzz above compares: it must make both outcomes, errors and successes."""
    rng = random.Random(5)
    text = page("l4-aws-kops-gpu-operator-580.105.08.prom")
    errors = 0
    for _ in range(200):
        i = rng.randrange(len(text))
        damaged = text[:i] + rng.choice('{}"=') + text[i + 1 :]
        fast = outcome(parse_fast, damaged)
        assert fast == outcome(parse_reference, damaged)
        errors += fast[0] == "error"
    assert 60 <= errors <= 160
