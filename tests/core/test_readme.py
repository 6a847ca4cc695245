"""The README is the contract with a new user: two quick-start lines, and CI runs the second verbatim."""

import re

from click.testing import CliRunner

from gpuledger.cli import main

from conftest import REPO

README = (REPO / "README.md").read_text()


def _quick_start_lines():
    section = README.split("## Quick start", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_quick_start_has_exactly_two_lines():
    lines = _quick_start_lines()
    assert len(lines) == 2
    assert lines[0].endswith("gpuledger up")
    assert "pytest" in lines[1]


def test_ci_runs_the_readme_test_line_verbatim():
    ci = (REPO / ".ci" / "run").read_text()
    test_line = _quick_start_lines()[1]
    assert test_line in ci.splitlines()


def test_every_command_is_documented():
    for name in main.commands:
        assert f"gpuledger {name}" in README, name


def test_the_config_table_is_the_one_generated_from_the_declarations():
    """Every key of every table, [enforcer], [dashboard], [[tenants]] and [[rates]] included, is in the README's
    table as declared, and the table names no key that is not declared: it is `config_doc.table()`, line for line."""
    from gpuledger import config_doc

    documented = config_doc.documented(README)
    assert documented is not None, f"README.md lacks the config table's markers: {config_doc.BEGIN}"
    assert documented.splitlines() == config_doc.table().splitlines(), f"stale: run {config_doc.COMMAND}"


def test_every_table_is_documented():
    from gpuledger import schema

    for name in schema.TABLES:
        assert f"`{name}`" in README, name


def test_help_text_of_the_group_mentions_the_two_entry_points():
    r = CliRunner().invoke(main, ["--help"])
    assert "gpuledger up" in r.output and "gpuledger sql" in r.output


def test_every_repository_file_the_docs_name_exists():
    """A file named in README.md, docs/ or a sql/ header (tests/core/test_layering.py, ...) is there: moved or renamed
    files left the README pointing at a test that no longer existed."""
    folders = "tests|benchmarks|collector|analytics|dashboards|enforcer|gpuledger|sql|deploy|docs"
    pattern = rf"\b(?:{folders})/[\w./-]+\.(?:py|sql|md|toml|yaml)\b"
    texts = [REPO / "README.md", *(REPO / "docs").rglob("*.md"), *(REPO / "sql").glob("*.sql")]
    named = {(p.relative_to(REPO), f) for p in texts for f in re.findall(pattern, p.read_text())}
    assert [(str(p), f) for p, f in sorted(named) if not (REPO / f).exists()] == []
