"""What `.ci/run` selects: each stack runs `make test` with a marker expression; every test of
the suite must be selected by at least one of them (a marker added to a test can otherwise
take it out of CI without anyone noticing)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from _pytest.mark.expression import Expression

pytestmark = pytest.mark.stack_neutral  # what CI runs is the same question on any stack

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

COLLECT = r"""
import json, sys
import pytest

class Markers:
    items = []

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        Markers.items = [[item.nodeid, sorted({m.name for m in item.iter_markers()})] for item in items]

code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"], plugins=[Markers()])
json.dump({"code": int(code), "items": Markers.items}, open(sys.argv[1], "w"))
"""


def ci_selections() -> dict[str, str]:
    """Python version -> the marker expression `.ci/run` hands that stack's `make test`."""
    with open(os.path.join(REPO_ROOT, ".ci", "run")) as f:
        text = f.read()
    declared = re.search(r"declare -A selected=\((.*?)\)\n", text, re.S)
    assert declared, "no `declare -A selected=(...)` in .ci/run"
    return dict(re.findall(r'\[(3\.\d+)\]="([^"]*)"', declared.group(1)))


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> dict:
    """{"code": pytest's exit code, "items": [[node id, [marker names]], ...]}: the whole suite collected."""
    out = tmp_path_factory.mktemp("collect") / "items.json"
    subprocess.run([sys.executable, "-c", COLLECT, str(out)], cwd=REPO_ROOT, check=True,
                   capture_output=True, timeout=300)
    return json.loads(out.read_text())


def ci_runs(collected: dict) -> dict[str, list[str]]:
    """Python version -> the node ids `.ci/run` runs on that stack."""
    expressions = {version: Expression.compile(expr) for version, expr in ci_selections().items()}
    return {version: [node for node, marks in collected["items"]
                      if expression.evaluate(lambda name, /, **kwargs: name in marks)]
            for version, expression in expressions.items()}


def test_every_test_runs_on_some_stack_in_ci(collected):
    """Is each collected test selected on at least one stack, and do both stacks run some?"""
    assert set(ci_selections()) == {"3.11", "3.12"}
    assert collected["code"] == 0 and len(collected["items"]) > 500
    runs = ci_runs(collected)
    nowhere = sorted({node for node, _ in collected["items"]} - set().union(*map(set, runs.values())))
    assert nowhere == [], f"tests no stack of .ci/run selects: {nowhere[:10]}"
    assert all(len(nodes) > 300 for nodes in runs.values()), {v: len(n) for v, n in runs.items()}


def test_each_rules_sample_runs_on_the_older_stack(collected):
    """Does every test `tests/older_stack.py` names exist, name known rule ids, and run on 3.11
    (not taken out by another marker), while the corpus tests it does not name run on 3.12?"""
    from older_stack import RULE_SAMPLES, on_the_older_stack

    from assignments.contract import known_rule
    from assignments.contracts import ASSIGNMENTS

    assert set(RULE_SAMPLES) <= set(ASSIGNMENTS)
    unknown = sorted({rule for samples in RULE_SAMPLES.values() for rule in samples if not known_rule(rule)})
    assert unknown == [], f"tests/older_stack.py names rule ids no rule or check has: {unknown}"
    named = {"tests/" + node for node in on_the_older_stack()}
    nodes = {node for node, _ in collected["items"]}
    assert sorted(named - nodes) == [], "tests/older_stack.py names tests that are not collected"
    runs = ci_runs(collected)
    assert sorted(named - set(runs["3.11"])) == [], "tests/older_stack.py names tests .ci/run leaves out on 3.11"
    more = {node for node, marks in collected["items"] if "more_corpora" in marks}
    assert more and not more & named and more <= set(runs["3.12"])
    assert not more & set(runs["3.11"])
