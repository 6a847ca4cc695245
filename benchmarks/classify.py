"""Workload classes against a person's: the share of ../shared/data/k8s/workloads (objects written by others)
given the class expected_classes.csv gives them, high- and low-confidence files apart, against a baseline measured
in the same run.

    python benchmarks/classify.py [--corpus DIR] [--tiny]
    (--tiny: the timing loop once, so the test suite runs this script)

The classifier is gpuledger.classify.classify_object, as the k8s source and the admission webhook run it. The
baseline is what a tool keyed on the workload's direct controller alone would say: the object's own kind for a
controller, a pod's first ownerReference, a Kueue Workload's owner; an object with none, `other`. The same kind
table (gpuledger.classify.KINDS) serves both, so the difference is the rest of the rules: labels, system
namespaces, the top of the chain, a bare pod's shape. Each file is read from tests/fixtures/k8s/workloads where
its licence allowed a copy, else from the corpus (SOURCES.md there).
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import yaml

from gpuledger.classify import Owner, classify_object, kind_class

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "k8s" / "workloads"
CORPUS = REPO.parent / "shared" / "data" / "k8s" / "workloads"


def load(name: str, corpus: Path) -> dict | None:
    path = FIXTURES / name if (FIXTURES / name).exists() else corpus / name
    if not path.exists():
        return None
    text = path.read_text()
    obj = json.loads(text) if name.endswith(".json") else next(d for d in yaml.safe_load_all(text) if d)
    while obj.get("kind") == "List" and obj.get("items"):
        obj = obj["items"][0]
    return obj


def baseline(obj: dict) -> str:
    """The direct controller's kind, and nothing else."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    if obj.get("kind") == "Pod" or obj.get("kind") == "Workload":
        if not refs:
            return "other"
        owner = Owner(refs[0].get("apiVersion"), refs[0].get("kind", ""))
    else:
        owner = Owner(obj.get("apiVersion"), obj.get("kind", ""))
    return kind_class(owner) or "other"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    with (FIXTURES / "expected_classes.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["expected_class"] != "n/a"]
    print(f"{'confidence':<11} {'files':>5} {'classifier':>11} {'baseline':>9}  (share given the expected class)")
    missing = 0
    for conf in ("high", "low"):
        mine = base = n = 0
        for r in (r for r in rows if r["confidence"] == conf):
            obj = load(r["file"], args.corpus)
            if obj is None:
                missing += 1
                continue
            n += 1
            mine += classify_object(obj).workload_class == r["expected_class"]
            base += baseline(obj) == r["expected_class"]
        print(f"{conf:<11} {n:>5} {mine:>5}/{n:<2} {100 * mine / n:3.0f}% {base:>3}/{n:<2} {100 * base / n:3.0f}%")
    if missing:
        print(f"{missing} file(s) neither copied nor in {args.corpus}: left out")
    objs = [o for o in (load(r["file"], args.corpus) for r in rows) if o is not None]
    rounds = 1 if args.tiny else 200
    t0 = time.perf_counter()
    for _ in range(rounds):
        for o in objs:
            classify_object(o)
    per = (time.perf_counter() - t0) / (rounds * len(objs))
    print(f"classify_object: {per * 1e6:.1f} us per object (mean over {rounds * len(objs)} calls)")


if __name__ == "__main__":
    main()
