"""No test module imports another: shared cases live in builders.py or in a helper module not named test_*.

A test module imported by another is collected twice under two names, runs its module-level code twice, and ties
the two files' cases together so that editing one breaks the other (issue 14, item 6).
"""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def imports_of_test_modules(source: str) -> list[str]:
    """The modules named test_* that `source` imports, as written (`import a.test_b`, `from a.test_b import c`,
    `from a import test_b`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names = [base] + [f"{base}.{a.name}".lstrip(".") if node.module else a.name for a in node.names]
        else:
            continue
        found += [n for n in names if n.rsplit(".", 1)[-1].startswith("test_")]
    return found


def test_the_check_sees_each_way_of_importing_a_test_module():
    source = "import finops.test_a\nfrom finops.test_b import x\nfrom finops import test_c\nfrom . import test_d\n"
    assert imports_of_test_modules(source) == ["finops.test_a", "finops.test_b", "finops.test_c", "test_d"]
    helpers = "import builders\nfrom finops.split_case import ALLOCS\nfrom conftest import END\n"
    assert imports_of_test_modules(helpers) == []


def test_no_imports_of_test_modules_another():
    offenders = {
        str(p.relative_to(TESTS)): found
        for p in sorted(TESTS.rglob("*.py"))
        if (found := imports_of_test_modules(p.read_text()))
    }
    assert offenders == {}


def test_one_conftest():
    """Tests import `from conftest import ...` by name (tests/ is on the path): a second conftest.py is imported as
    the same module name and shadows the first for whichever test imports after it."""
    assert sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("conftest.py")) == ["conftest.py"]
