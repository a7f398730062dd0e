"""The hidden graders are plain pytest: `python -m pytest graders/test_<assignment>.py --submission PATH`."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from grading import submission_file

from graders.pytest_plugin import case_label

pytestmark = [pytest.mark.slow, pytest.mark.stack_neutral]  # the pytest route's plumbing
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def graders_pytest(*args: str, cwd: str = REPO_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", *args, "-p", "no:randomly"], cwd=cwd,
                          capture_output=True, text=True, timeout=900)


def test_case_ids_read_like_the_case():
    """Is a case's test id its mesh, sizes and static arguments?"""
    from assignments.contract import Case

    assert case_label(Case((2, 4), {"S": 16, "D": 8}, {"shift": -2})) == "2x4-S16-D8-shift=-2"


def test_the_solution_passes_every_case(tmp_path):
    """Does the problem3 solution pass every case, each listed with a readable id, with -v and
    --junitxml working and results.json written?"""
    junit, results = tmp_path / "junit.xml", tmp_path / "results.json"
    proc = graders_pytest("graders/test_problem3.py", "--submission", "solutions/problem3.py", "-v",
                          f"--junitxml={junit}", f"--results={results}")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert re.search(r"test_allgather_matmul\[2x4-B\d+-D\d+-F\d+\] PASSED", proc.stdout), proc.stdout[-2000:]
    cases = ET.parse(junit).getroot().iter("testcase")
    names = [c.get("name") for c in cases]
    assert len(names) >= 16 and all(n.startswith("test_") for n in names)
    data = json.loads(results.read_text())
    assert data["score"] == sum(t["max_score"] for t in data["tests"])


def test_a_wrong_submission_fails_the_cases_it_gets_wrong(tmp_path):
    """Does a wrong submission show each failing case with the observed-versus-allowed
    message, -k select one function, and --lf rerun only what failed?"""
    wrong = submission_file(os.path.join(REPO_ROOT, "tests", "submissions", "problem3", "one_psum.py"))
    cache = f"cache_dir={tmp_path / 'cache'}"
    first = graders_pytest("graders/test_problem3.py", "--submission", wrong, "-k", "allreduce_matmul",
                           "-o", cache, "-rf")
    assert first.returncode == 1, first.stdout[-3000:]
    assert "test_allgather_matmul" not in first.stdout  # -k selected one function
    failed = re.findall(r"FAILED \S+::(test_\w+\[[^\]]+\])", first.stdout)
    assert failed and all(f.startswith("test_allreduce_matmul[") for f in failed), first.stdout[-3000:]
    assert re.search(r"runs in one piece: all-reduce over Y of f32\[[\d,]+\] \(\d+ bytes\) x1 reduces the "
                     r"whole result \(\d+ elements per device\) at once; allowed: at least 2",
                     first.stdout), first.stdout[-3000:]
    again = graders_pytest("graders/test_problem3.py", "--submission", wrong, "--lf", "-o", cache, "-q")
    ran = re.search(r"(\d+) failed", again.stdout)
    assert ran and int(ran.group(1)) == len(failed) and "passed" not in again.stdout.splitlines()[-1], \
        again.stdout[-2000:]


def test_a_custom_check_counts_in_results_and_in_python_m_graders(tmp_path):
    """Does problem2's custom [S, D, F] check run as a test with points, count in results.json,
    and give `python -m graders` (the path nbgrader, the batch and Gradescope take) the same score?"""
    submission = os.path.join("solutions", "problem2.py")
    results = tmp_path / "results.json"
    proc = graders_pytest("graders/test_problem2.py", "--submission", submission, "-k",
                          "moe_all_to_all", f"--results={results}", "-v")
    assert "test_moe_all_to_all_holds_no_sdf_buffer PASSED" in proc.stdout, proc.stdout[-3000:]
    via_pytest = json.loads(results.read_text())
    out = tmp_path / "cli.json"
    cli = subprocess.run([sys.executable, "-m", "graders", submission, "-a", "problem2", "--only",
                          "moe_all_to_all", "-o", str(out), "--quiet"], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=900)
    assert cli.returncode == 0, cli.stderr[-2000:]
    via_cli = json.loads(out.read_text())
    score = {t["name"]: t["score"] for t in via_pytest["tests"]}
    assert score["moe_all_to_all"] == {t["name"]: t["score"] for t in via_cli["tests"]}["moe_all_to_all"]
    assert score["moe_all_to_all"] == next(t["max_score"] for t in via_pytest["tests"]
                                           if t["name"] == "moe_all_to_all")


def test_a_failed_check_takes_its_points():
    """Does a failed custom check take exactly its points from its function, and say why?"""
    from assignments.contract import Case
    from assignments.contract import CaseResult
    from graders.results import Check, PartResult

    cases = [CaseResult(Case((2, 4), {"S": 8}), True, True, []) for _ in range(4)]
    part = PartResult("moe_all_to_all", 6, cases,
                      checks=[Check("test_no_sdf", "moe_all_to_all", 1, False, "No [S, D, F] buffer?",
                                    "[mesh 2x4] holds f32[8,8,8]")])
    assert part.score == 5
    assert "check test_no_sdf (1 point(s)): No [S, D, F] buffer? [mesh 2x4] holds" in part.output


def test_only_selects_one_function_by_its_exact_name():
    """Does --only moe_all_to_all keep that function's cases and its custom check, and not
    moe_all_to_all_x (whose name merely contains it, as -k would match)?"""
    proc = graders_pytest("graders/test_problem2.py", "--only", "moe_all_to_all", "--collect-only", "-q")
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    assert ids and all("test_moe_all_to_all[" in i or "holds_no_sdf_buffer" in i for i in ids), ids
    assert any("holds_no_sdf_buffer" in i for i in ids)


def test_a_failure_of_the_graders_names_its_cause(monkeypatch):
    """Does a failure of the graders inside pytest (their own bug, never the submission's)
    reach the caller with its cause, not as a bare pytest exit code?"""
    from graders import Limits, harness, run

    def broken(*args, **kwargs):
        raise RuntimeError("a judge of the graders failed: OSError(11, 'Resource temporarily unavailable')")

    monkeypatch.setattr(harness, "grade_submission", broken)
    with pytest.raises(run.GradersDidNotRun, match=r"the graders failed: RuntimeError: a judge of the graders "
                                                   r"failed: OSError\(11"):
        run.grade(os.path.join(REPO_ROOT, "solutions", "problem1.py"), "problem1", limits=Limits(sandbox="none"))
