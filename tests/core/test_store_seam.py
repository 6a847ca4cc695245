"""One storage seam: only gpuledger/store/ knows which kind of lake it has (a folder or an object store). Outside it
the config's check of a lake's location is the one place allowed to tell the two apart; every other module asks the
Store, and none imports an object-store client."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGES = ["gpuledger", "collector", "analytics", "dashboards", "enforcer"]
STORE = REPO / "gpuledger" / "store"
# The names that tell the kinds apart: the kinds themselves, the S3 location type, the URL test, and the clients.
KIND_NAMES = {"S3Store", "LocalStore", "S3Location", "is_url", "problem", "s3", "local"}
CLIENTS = {"obstore", "boto3", "botocore", "s3fs", "fsspec"}
# The config's check of `lake.path` (is it a URL, and a valid one) and of keys that must be local folders.
ALLOWED = {"gpuledger/config.py", "gpuledger/config_keys.py"}


def _modules() -> list[Path]:
    return [p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py")) if STORE not in p.parents]


def _kind_uses(where: str, source: str) -> list[str]:
    """Where a module imports a kind-telling name from gpuledger.store, or any object-store client."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("gpuledger.store"):
                tail = node.module.removeprefix("gpuledger.store").lstrip(".")
                names = {a.name for a in node.names}
                if tail not in ("", "base") or names & KIND_NAMES:
                    found.append(f"{where}:{node.lineno} from {node.module} import {sorted(names)}")
            if node.module.split(".")[0] in CLIENTS:
                found.append(f"{where}:{node.lineno} from {node.module}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in CLIENTS or a.name.startswith("gpuledger.store."):
                    found.append(f"{where}:{node.lineno} import {a.name}")
    return found


def test_only_the_store_and_the_config_check_know_the_kind_of_lake():
    modules = {str(p.relative_to(REPO)): p.read_text() for p in _modules()}
    uses = {m: u for m, text in modules.items() if (u := _kind_uses(m, text))}
    assert set(uses) <= ALLOWED, "\n".join(u for m, us in uses.items() if m not in ALLOWED for u in us)


def test_the_seam_test_sees_a_fork():
    """The check above fails on the kind of code it is there to keep out (a module branching on S3Location)."""
    fork = "from gpuledger.store.s3 import S3Location\nfrom gpuledger.store import open_store, is_url\nimport obstore\n"
    assert len(_kind_uses("probe.py", fork)) == 3
    assert _kind_uses("ok.py", "from gpuledger.store import LakeRef, Store, open_store\n") == []
