"""deploy/prometheus/gpuledger-rules.yaml: `promtool check rules` and `promtool test rules` pass (Debian's prometheus
package ships promtool; skipped without it), the unit tests see every rule both fire and stay quiet, every rule
carries a severity, a summary and a description naming what it is about, and every gpuledger metric a rule reads is
one the exporter, the webhook or the collector serves."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpuledger.analytics.exporter.figures import METRICS

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "gpuledger-rules.yaml"
TESTS = REPO / "deploy" / "prometheus" / "gpuledger-rules.test.yaml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def promtool(*args: str, cwd: Path = RULES.parent) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


@needs_promtool
def test_promtool_check_rules():
    r = promtool("check", "rules", RULES.name)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(rules())} rules found" in r.stdout


@needs_promtool
def test_promtool_test_rules():
    r = promtool("test", "rules", TESTS.name)
    assert r.returncode == 0, r.stdout + r.stderr


@needs_promtool
def test_a_rule_file_broken_by_hand_fails_the_check(tmp_path):
    broken = RULES.read_text().replace(
        "gpuledger_tenant_budget_used_ratio >= 1", "gpuledger_tenant_budget_used_ratio >=", 1
    )
    (tmp_path / "rules.yaml").write_text(broken)
    r = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert r.returncode != 0 and "GpuledgerBudgetExhausted" in (r.stdout + r.stderr)


def test_every_rule_is_tested_firing_and_quiet():
    cases: dict[str, set[bool]] = {}
    for t in yaml.safe_load(TESTS.read_text())["tests"]:
        for case in t.get("alert_rule_test", []):
            cases.setdefault(case["alertname"], set()).add(bool(case.get("exp_alerts")))
    missing = {r["alert"]: cases.get(r["alert"], set()) for r in rules() if cases.get(r["alert"]) != {True, False}}
    assert missing == {}, "each rule needs a case where it fires and one where it does not"


def test_every_rule_has_severity_summary_and_a_description_naming_its_subject():
    for r in rules():
        assert r["labels"]["severity"] in ("critical", "warning", "info"), r["alert"]
        assert r["annotations"]["summary"] and r["annotations"]["description"], r["alert"]
        text = r["annotations"]["summary"] + r["annotations"]["description"]
        expr = r["expr"]
        if "gpuledger_tenant_" in expr:
            subjects = ["tenant"]
        elif re.search(r"gpuledger_(fleet|gpu|queue|fragmentation)_", expr):
            subjects = ["gpu_model"]
        else:  # the pipeline: a cluster's analytics, or a process (exporter, webhook replica, collector)
            subjects = ["cluster", "instance"]
        assert any(f"$labels.{s}" in text for s in subjects), (r["alert"], subjects)


def test_every_metric_a_rule_reads_is_served():
    exporter = set(METRICS) | {"gpuledger_exporter_up"}
    served_by = {
        "enforcer": (REPO / "enforcer" / "server.py").read_text(),
        "collector": (REPO / "collector" / "metrics.py").read_text(),
    }
    for r in rules():
        for name in set(re.findall(r"\bgpuledger_\w+", r["expr"])):
            base = name.removesuffix("_total")
            assert base in exporter or any(f'"{base}"' in src for src in served_by.values()), (r["alert"], name)


def test_alerts_doc_names_every_rule_and_its_routing_example_parses():
    doc = (REPO / "docs" / "alerts.md").read_text()
    names = {r["alert"] for r in rules()}
    assert [n for n in sorted(names) if f"`{n}`" not in doc] == []
    example = yaml.safe_load(doc.split("```yaml\n", 1)[1].split("```", 1)[0])
    receivers = {r["name"] for r in example["receivers"]}

    def walk(route):
        yield route
        for child in route.get("routes", []):
            yield from walk(child)

    routes = list(walk(example["route"]))
    assert {r["receiver"] for r in routes if "receiver" in r} <= receivers
    # every alert name a matcher's regex spells out is a rule of the file
    matchers = [m for r in routes for m in r.get("matchers", [])]
    matchers += [m for i in example["inhibit_rules"] for k in ("source_matchers", "target_matchers") for m in i[k]]
    for m in matchers:
        if m.startswith("alertname"):
            pattern = m.split("=", 1)[1].lstrip("~").strip('"')
            assert any(re.fullmatch(pattern, n) for n in names), m
            words = re.findall(r"Gpuledger[A-Za-z0-9]+", pattern)
            assert all(any(n.startswith(w) for n in names) for w in words), m  # no name misspelt
