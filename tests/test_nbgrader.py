"""The whole nbgrader loop on sample submissions: generate, autograde, feedback, export."""
import csv
import glob
import os
import re
import subprocess
import sys

import nbformat
import pytest
from grading import CODE_POINTS, PROBLEM1, PROBLEM1_POINTS

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
    assert auto_total(book["solution"]) == CODE_POINTS
    assert auto_total(book["stub"]) == 0
    assert 0 < auto_total(book["mistakes"]) <= CODE_POINTS
    assert book["solution"]["written_communication"][2], "the written answer waits for a human"


def test_tampering_in_the_kernel_gains_nothing(course):
    """Do fake checks, a broken jax.jit and stderr noise in the kernel leave scores unchanged?"""
    book = read_gradebook(course[0], "problem1")
    assert auto_total(book["tamper"]) == 0
    assert auto_total(book["noisy"]) == CODE_POINTS


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
    assert rows["solution"] == CODE_POINTS and rows["stub"] == 0


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
    written, total = PROBLEM1.max_score - CODE_POINTS, PROBLEM1.max_score
    assert rows["solution"][1:] == [f"{p:g}/{p:g}" for p in PROBLEM1_POINTS.values()] + [
        "waiting", f"{CODE_POINTS:g}/{total:g}", f"({written:g}", "waiting)"], out
    assert rows["stub"][1:] == [f"0/{p:g}" for p in (*PROBLEM1_POINTS.values(), written, total)], out
    assert "communication" in out and "communicati…" not in out  # headings wrap between words
    assert "nbgrader export wrote 3 row(s) to grades.csv: mistakes=" in out
    assert f"solution={CODE_POINTS:g}/{total:g}, stub=0/{total:g}" in out
    assert "Try: roll inside each shard" in " ".join(out.split())  # what the mistakes student reads (wrapped)


# --- a laptop's hand-in: uploaded to the LMS, collected with zip_collect ---------------------------

LAPTOP_SECTION = "**Laptops: hand-ins through your LMS.**"


def readme_blocks(repo_root, heading: str) -> list[tuple[str, str]]:
    """The fenced code blocks (language, text) of the README's paragraph that starts with
    `heading`, up to the next heading or bold paragraph title."""
    text = open(os.path.join(repo_root, "README.md")).read()
    section = text[text.index(heading) + len(heading):]
    section = re.split(r"\n(?:#+ |\*\*[^*\n]+\.\*\*)", section)[0]
    return re.findall(r"```(\w+)\n(.*?)```", section, re.S)


def typed_into_handout(handout_notebook: str, repo_root: str) -> None:
    """A student's work: each answer cell of the hand-out's notebook as the solution has it."""
    solved = nbformat.read(os.path.join(repo_root, "solutions", "problem1", "problem1.ipynb"), as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solved.cells
               if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"}
    nb = nbformat.read(handout_notebook, as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    nbformat.write(nb, handout_notebook)


def test_a_laptop_hand_in_through_the_lms_and_zip_collect(tmp_path, repo_root):
    """The laptop route as the READMEs write it: a student types the solution into the
    hand-out's notebook, uploads the file the hand-out's README names; another uploads the
    hand-out untouched. The LMS's zip (nbgrader's example names), the README's regexp in the
    course's config, then the README's commands, typed as written: does each student get one
    submission, scored by the graders (all code points, and 0), with feedback to return?"""
    import zipfile

    from graders.handout import build_handout

    (config_line,), commands = [b for lang, b in readme_blocks(repo_root, LAPTOP_SECTION) if lang == "python"], \
        [b for lang, b in readme_blocks(repo_root, LAPTOP_SECTION) if lang == "bash"]
    assert len(commands) == 1 and "nbgrader zip_collect problem1" in commands[0], commands
    # Each student's copy of the hand-out, and the file its README says to upload.
    uploads = {}
    for student in ("alice", "bob"):
        zipfile.ZipFile(build_handout("problem1", str(tmp_path / "dist"))).extractall(tmp_path / student)
        folder = tmp_path / student / "handout-problem1"
        upload = re.search(r"upload\s+`([^`]+)`", (folder / "README.md").read_text()).group(1)
        assert upload == "problem1/problem1.ipynb"
        if student == "alice":
            typed_into_handout(str(folder / upload), repo_root)
        uploads[student] = folder / upload
    course = str(tmp_path / "course")
    prepare_course("problem1", course)
    with open(os.path.join(course, "nbgrader_config.py"), "a") as f:
        f.write("\n" + config_line)
    with zipfile.ZipFile(os.path.join(course, "submissions.zip"), "w") as z:  # the LMS's download
        z.write(uploads["alice"], "alice_attempt_2026-01-30-15-00-00_problem1.ipynb")
        z.write(uploads["bob"], "bob_attempt_2026-01-31-09-00-00_problem1.ipynb")
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    proc = subprocess.run(["bash", "-e", "-c", commands[0]], cwd=course, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for student in ("alice", "bob"):
        assert os.path.exists(os.path.join(course, "submitted", student, "problem1", "problem1.ipynb"))
    with open(os.path.join(course, "submitted", "alice", "problem1", "timestamp.txt")) as f:
        assert f.read().startswith("2026-01-30 15:00:00")
    book = read_gradebook(course, "problem1")
    assert auto_total(book["alice"]) == CODE_POINTS and auto_total(book["bob"]) == 0
    feedback = open(os.path.join(course, "feedback", "alice", "problem1", "problem1.html")).read()
    points = PROBLEM1_POINTS["roll_diff"]
    assert f"roll_diff: {points:g}/{points:g} points" in feedback and "HIDDEN TESTS" not in feedback
