"""The whole nbgrader loop on sample submissions: generate, autograde, feedback, export."""
import csv
import glob
import os
import subprocess
import sys

import nbformat
import pytest

from graders.demo import autograde_course, prepare_course, read_gradebook, write_submissions

pytestmark = [pytest.mark.slow, pytest.mark.nbgrader]

TAMPER_CELL = """
import sys, jax, assignments, assignments.checks
# A student's attempt to look good: fake checks, broken JAX, and noise on stderr.
assignments.check = assignments.checks.check = lambda *a, **k: print("passed")
jax.jit = lambda f, *a, **k: f
sys.stderr.write("warning: some noise on stderr\\n")
"""


PATCH_CELL = """
import os, subprocess, sys, assignments
# A student's attempt to grade itself: patch the kit's graders on disk, leave a process behind.
kit = os.path.dirname(os.path.dirname(os.path.abspath(assignments.__file__)))
for target in ("graders/pwned-nbgrader.py", "graders/harness.py"):
    try:
        with open(os.path.join(kit, target), "a") as f:
            f.write("# pwned-nbgrader\\n")
    except OSError:
        pass
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "nbgrader-marker-41d2"],
                 start_new_session=True)
"""


def add_cell(path, source):
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(2, nbformat.v4.new_code_cell(source))
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = str(tmp_path_factory.mktemp("course"))
    prepare_course("problem1", course)
    write_submissions(course, "problem1")
    submitted = os.path.join(course, "submitted")
    for student, base in (("tamper", "stub"), ("noisy", "solution"), ("patcher", "stub")):
        folder = os.path.join(submitted, student, "problem1")
        os.makedirs(folder)
        nb = nbformat.read(os.path.join(submitted, base, "problem1", "problem1.ipynb"), as_version=4)
        nbformat.write(nb, os.path.join(folder, "problem1.ipynb"))
        add_cell(os.path.join(folder, "problem1.ipynb"), PATCH_CELL if student == "patcher" else TAMPER_CELL)
    export_csv = autograde_course("problem1", course)
    return course, export_csv


def test_a_cell_that_patches_the_kit_changes_nothing(course, repo_root):
    """Does a notebook cell that patches graders/ on disk and starts a process score what the
    notebook is worth (the stub: 0), with the kit unchanged and no process left behind?"""
    path, _ = course
    book = read_gradebook(path, "problem1")
    assert auto_total(book["patcher"]) == 0
    assert not os.path.exists(os.path.join(repo_root, "graders", "pwned-nbgrader.py"))
    with open(os.path.join(repo_root, "graders", "harness.py")) as f:
        assert "pwned" not in f.read()
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                assert b"nbgrader-marker-41d2" not in f.read()
        except OSError:
            continue


def auto_total(scores):
    return round(sum(s for s, _, manual in scores.values() if not manual), 2)


def test_gradebook(course):
    """Does the gradebook show the solution at full marks, the stub at 0, mistakes partly?"""
    path, _ = course
    book = read_gradebook(path, "problem1")
    assert auto_total(book["solution"]) == 10
    assert auto_total(book["stub"]) == 0
    assert 0 < auto_total(book["mistakes"]) < 11
    assert book["solution"]["written_communication"][2], "the written answer waits for a human"


def test_tampering_in_the_kernel_gains_nothing(course):
    """Do fake checks, a broken jax.jit and stderr noise in the kernel leave scores unchanged?"""
    book = read_gradebook(course[0], "problem1")
    assert auto_total(book["tamper"]) == 0
    assert auto_total(book["noisy"]) == 10


def test_same_score_as_the_command_line(course, repo_root, tmp_path):
    """Does `python -m graders` give the mistakes notebook the score nbgrader recorded?"""
    path, _ = course
    book = read_gradebook(path, "problem1")
    nb = os.path.join(path, "submitted", "mistakes", "problem1", "problem1.ipynb")
    out = tmp_path / "results.json"
    subprocess.run([sys.executable, "-m", "graders", nb, "-a", "problem1", "-o", str(out), "--quiet"],
                   cwd=repo_root, check=True)
    import json
    results = json.loads(out.read_text())
    for test in results["tests"]:
        assert book["mistakes"][test["name"]][0] == pytest.approx(test["score"])


def test_feedback_and_export(course):
    """Is feedback written without hidden test code, and does export list every student?"""
    path, export_csv = course
    pages = glob.glob(os.path.join(path, "feedback", "*", "problem1", "problem1.html"))
    assert len(pages) == 6  # solution, stub, mistakes, tamper, noisy, patcher
    for page in pages:
        text = open(page).read()
        assert "HIDDEN TESTS" not in text and "FillGradeCells" not in text
    assert "wrong sharding" in open(os.path.join(path, "feedback", "mistakes", "problem1", "problem1.html")).read()
    with open(export_csv) as f:
        rows = {r["student_id"]: float(r["score"]) for r in csv.DictReader(f)}
    assert rows["solution"] == 10 and rows["stub"] == 0


def test_the_demo_prints_the_gradebook(repo_root):
    """The README's first command: `make demo` runs `python -m graders.demo` in the kit's
    environment. Does it finish, print every sample student's cells and total (the written
    answer waiting, on one line) and say what nbgrader export wrote?"""
    with open(os.path.join(repo_root, "Makefile")) as f:
        assert "\t$(BIN)/python -m graders.demo\n" in f.read()
    proc = subprocess.run([sys.executable, "-m", "graders.demo"], cwd=repo_root, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.strip().split(" ")[0] in ("solution", "stub", "mistakes")}
    assert rows["solution"][1:] == ["2/2"] * 5 + ["waiting", "10/12", "(2", "waiting)"], out
    assert rows["stub"][1:] == ["0/2"] * 6 + ["0/12"], out
    assert "communication" in out and "communicati…" not in out  # headings wrap between words
    assert "nbgrader export wrote 3 row(s) to grades.csv: mistakes=" in out
    assert "solution=10/12, stub=0/12" in out
    assert "Try: roll inside each shard" in " ".join(out.split())  # what the mistakes student reads (wrapped)
