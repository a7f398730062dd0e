"""`python -m graders.batch --gradebook`: nbgrader's database, export and feedback see the batch's
grades, agree with `nbgrader autograde` on deleted and duplicated cells, and no grade is lost."""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys

import pytest
from grading import CODE_POINTS, expected_score

from assignments.contracts import get_assignment
from graders.build import nbgrader
from graders.demo import prepare_course, read_gradebook, write_submissions

pytestmark = [pytest.mark.slow, pytest.mark.nbgrader]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAULTS = os.path.join(REPO_ROOT, "tests", "submissions", "faults")
FAULT_STUDENTS = {"deleted": "deleted_cells.ipynb", "duplicated": "duplicated_cells.ipynb"}


def batch(course, *extra):
    proc = subprocess.run(
        [sys.executable, "-m", "graders.batch", "-a", "problem1", os.path.join(course, "submitted"),
         "-o", os.path.join(course, "graded"), "--workers", "2", "--gradebook", *extra],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def exported(course) -> dict[str, float]:
    out = os.path.join(course, "grades.csv")
    nbgrader(["export", "--to", out], cwd=course)
    with open(out) as f:
        return {r["student_id"]: float(r["score"]) for r in csv.DictReader(f)}


SCRIPT = "<script>/*hostile-output*/fetch('/api/contents')</script>"


def write_hostile(course) -> None:
    """The solution, handed in with what a hostile student controls besides the code: cells
    whose nbgrader metadata is a string or has a list for a grade id, an HTML output holding a
    script, and a timestamp.txt that is not a time (`nbgrader submit` writes that file in a
    folder the student owns)."""
    import nbformat

    nb = nbformat.read(os.path.join(course, "submitted", "solution", "problem1", "problem1.ipynb"), as_version=4)
    scratch = nbformat.v4.new_code_cell("1 + 1")
    scratch.metadata["nbgrader"] = "x"
    listed = nbformat.v4.new_code_cell("2 + 2")
    listed.metadata["nbgrader"] = {"grade_id": ["roll_diff"], "grade": True, "points": 99}
    shown = nbformat.v4.new_code_cell("print('hi')")
    shown.outputs = [nbformat.v4.new_output("display_data", data={"text/html": SCRIPT})]
    nb.cells += [scratch, listed, shown]
    folder = os.path.join(course, "submitted", "hostile", "problem1")
    os.makedirs(folder)
    nbformat.write(nb, os.path.join(folder, "problem1.ipynb"))
    with open(os.path.join(folder, "timestamp.txt"), "w") as f:
        f.write("yesterday-ish, honest")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course with six submissions (solution, stub, sample mistakes, deleted and
    duplicated cells, and the hostile one above), graded by the batch command into
    nbgrader's database."""
    course = str(tmp_path_factory.mktemp("course"))
    prepare_course("problem1", course)
    write_submissions(course, "problem1")
    for student, name in FAULT_STUDENTS.items():
        folder = os.path.join(course, "submitted", student, "problem1")
        os.makedirs(folder)
        shutil.copy(os.path.join(FAULTS, name), os.path.join(folder, "problem1.ipynb"))
    write_hostile(course)
    batch(course)
    return course


def test_export_has_the_batch_scores(course):
    """Does `nbgrader export` list every student with the batch's gradebook.csv score?"""
    with open(os.path.join(course, "graded", "gradebook.csv")) as f:
        batch_scores = {r["student"]: float(r["score"]) for r in csv.DictReader(f)}
    assert exported(course) == pytest.approx(batch_scores)
    assert batch_scores["solution"] == sum(p.points for p in get_assignment("problem1").parts) and batch_scores["stub"] == 0
    assert batch_scores["deleted"] == expected_score("deleted_cells")
    assert batch_scores["duplicated"] == expected_score("duplicated_cells")
    assert batch_scores["hostile"] == batch_scores["solution"], "metadata and a timestamp the student wrote stop nothing"
    book = read_gradebook(course, "problem1")
    assert book["solution"]["written_communication"][2], "the written answer waits for a human"


def test_feedback_shows_the_graders_messages(course):
    """Does `nbgrader generate_feedback` write a page per student with the graders' verdicts?"""
    nbgrader(["generate_feedback", "problem1", "--force"], cwd=course)
    pages = {s: os.path.join(course, "feedback", s, "problem1", "problem1.html")
             for s in ("solution", "stub", "mistakes", *FAULT_STUDENTS)}
    for student, page in pages.items():
        assert os.path.exists(page), student
    with open(pages["deleted"]) as f:
        text = f.read()
    assert "function block_average_jit was not defined" in text and "HIDDEN TESTS" not in text
    # The outputs a student handed in never reach formgrader's pages (rendered unsanitized in
    # the instructor's session): the autograded notebook has only the graders' outputs.
    with open(os.path.join(course, "autograded", "hostile", "problem1", "problem1.ipynb")) as f:
        assert "hostile-output" not in f.read()


def test_manual_grades_survive_a_regrade(course):
    """Are a manual score on the written answer and a manual override of a code cell kept
    when the batch runs again and regrades a changed notebook, with export using them?"""
    from nbgrader.api import Gradebook

    url = f"sqlite:///{course}/gradebook.db"
    with Gradebook(url) as gb:
        gb.find_grade("written_communication", "problem1", "problem1", "solution").manual_score = 2
        gb.find_grade("roll_diff", "problem1", "problem1", "mistakes").manual_score = 3
        gb.db.commit()
    with open(os.path.join(course, "graded", "gradebook.csv")) as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    expected = {s: float(r["score"]) for s, r in rows.items()}
    expected["solution"] += 2  # the written answer, by hand
    expected["mistakes"] += 3 - float(rows["mistakes"]["roll_diff"])  # the override counts
    # The mistakes notebook changes (a new cell, same code), so it is graded again; the
    # others are kept, and the database is brought up to date from every results.json.
    import nbformat

    path = os.path.join(course, "submitted", "mistakes", "problem1", "problem1.ipynb")
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("I tried my best."))
    nbformat.write(nb, path)
    output = " ".join(batch(course).split())
    assert "1 graded" in output and "5 kept" in output
    with Gradebook(url) as gb:
        written = gb.find_grade("written_communication", "problem1", "problem1", "solution")
        override = gb.find_grade("roll_diff", "problem1", "problem1", "mistakes")
        assert written.manual_score == 2 and override.manual_score == 3
        assert override.needs_manual_grade  # a human's score stays the one that counts
    assert exported(course) == pytest.approx(expected)
    results = json.loads(open(os.path.join(course, "graded", "solution", "results.json")).read())
    assert results["score"] == CODE_POINTS

