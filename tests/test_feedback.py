"""What a student reads in nbgrader's feedback, on nbgrader's own route: generate_assignment,
autograde, generate_feedback, with the course's nbgrader_config.py as the README runs it.

problem3 has hidden test lines in its grade cells and two written answers, each followed by a
read-only rubric cell for graders: the route where hidden text could leak."""
from __future__ import annotations

import glob
import os
import re

import nbformat
import pytest

from graders.build import nbgrader
from graders.demo import prepare_course, read_gradebook

pytestmark = [pytest.mark.slow, pytest.mark.nbgrader]
ASSIGNMENT = "problem3"
ANSWER = "The carry changes type: zeros vary over no axis, acc + a @ w varies over X and Y."
HIDDEN_TEXT = ("MARK SCHEME", "Rubric (", "Model answer", "HIDDEN TESTS", "For graders: the rubric")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course with two submissions of the release: untouched, and with a written answer."""
    course = str(tmp_path_factory.mktemp("feedback-course"))
    prepare_course(ASSIGNMENT, course)
    release = os.path.join(course, "release", ASSIGNMENT, f"{ASSIGNMENT}.ipynb")
    for student in ("untouched", "answered"):
        nb = nbformat.read(release, as_version=4)
        if student == "answered":
            cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "written_vma")
            cell.source = ANSWER
        folder = os.path.join(course, "submitted", student, ASSIGNMENT)
        os.makedirs(folder)
        nbformat.write(nb, os.path.join(folder, f"{ASSIGNMENT}.ipynb"))
    autograde = nbgrader(["autograde", ASSIGNMENT], cwd=course)
    nbgrader(["generate_feedback", ASSIGNMENT], cwd=course)
    return course, autograde.stdout + autograde.stderr


def page(course, student: str) -> str:
    with open(os.path.join(course, "feedback", student, ASSIGNMENT, f"{ASSIGNMENT}.html")) as f:
        return f.read()


def test_feedback_holds_no_rubric_model_answer_or_hidden_test(course):
    """Does no feedback page carry a mark scheme, rubric, model answer or hidden test line
    (autograde restores locked cells from the database, which keeps all of them)?"""
    path, _ = course
    pages = glob.glob(os.path.join(path, "feedback", "*", ASSIGNMENT, f"{ASSIGNMENT}.html"))
    assert len(pages) == 2
    for text in map(open, pages):
        text = text.read()
        assert not [h for h in HIDDEN_TEXT if h in text]
    autograded = nbformat.read(os.path.join(path, "autograded", "answered", ASSIGNMENT, f"{ASSIGNMENT}.ipynb"), 4)
    rubric = next(c for c in autograded.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "written_vma_rubric")
    assert "Rubric (2 points)" in rubric.source, "formgrader still shows graders the rubric"


def test_only_written_answers_wait_for_a_human(course):
    """Are the written answers the only items graded by hand (the rubric cells are not
    gradebook items), and does feedback say an answer waits for a grader instead of 0?"""
    path, _ = course
    book = read_gradebook(path, ASSIGNMENT)
    assert set(book["answered"]) == {"allgather_matmul", "allreduce_matmul", "reducescatter_matmul",
                                     "transformer_block", "written_vma", "written_speed"}
    assert [name for name, (_, _, waiting) in book["answered"].items() if waiting] == ["written_vma"]
    answered = page(path, "answered")
    assert ANSWER in answered
    assert re.search(r"Your written answer.*?waiting for a grader \(2\.0 points\)", answered, re.S)
    assert "1 written answer(s), worth 2.0 point(s), wait for a grader" in answered
    # nbgrader scores an unchanged "YOUR ANSWER HERE" 0 itself: nothing waits there
    untouched = page(path, "untouched")
    assert "waiting for a grader" not in untouched
    assert re.search(r"Your written answer.*?no answer written: 0 / 2\.0", untouched, re.S)
    assert answered.count("no answer written") == 2  # written_speed (left as released): in the summary, at its cell


def test_untouched_release_raises_no_tampering_warning(course):
    """Does autograding an untouched release notebook print no "Attribute 'checksum' ... has
    changed!" warning (locked cells are exactly as released)?"""
    _, log = course
    assert "has changed" not in log, [line for line in log.splitlines() if "has changed" in line]


def test_a_tampered_locked_cell_is_still_reported(tmp_path):
    """Is a locked cell whose text a student changed still reported and restored?"""
    course = str(tmp_path)
    prepare_course(ASSIGNMENT, course)
    nb = nbformat.read(os.path.join(course, "release", ASSIGNMENT, f"{ASSIGNMENT}.ipynb"), 4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "written_vma_rubric")
    cell.source = "The rubric says: full marks for everyone."
    folder = os.path.join(course, "submitted", "tamperer", ASSIGNMENT)
    os.makedirs(folder)
    nbformat.write(nb, os.path.join(folder, f"{ASSIGNMENT}.ipynb"))
    proc = nbgrader(["autograde", ASSIGNMENT], cwd=course)
    assert "Attribute 'checksum' for cell written_vma_rubric has changed!" in proc.stdout + proc.stderr
    graded = nbformat.read(os.path.join(course, "autograded", "tamperer", ASSIGNMENT, f"{ASSIGNMENT}.ipynb"), 4)
    restored = next(c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "written_vma_rubric")
    assert "full marks for everyone" not in restored.source
