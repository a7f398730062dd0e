"""Notebooks with deleted or duplicated grade cells through `nbgrader autograde`, compared with
`python -m graders.batch --gradebook`; and LMS downloads through `nbgrader zip_collect`."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

import pytest
from grading import PROBLEM1_POINTS, expected_score

from graders.batch import discover
from graders.build import nbgrader
from graders.demo import course_config, prepare_course, read_gradebook

pytestmark = [pytest.mark.slow, pytest.mark.nbgrader]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAULTS = os.path.join(REPO_ROOT, "tests", "submissions", "faults")
FAULT_STUDENTS = {"deleted": "deleted_cells.ipynb", "duplicated": "duplicated_cells.ipynb",
                  "edited_setup": "edited_setup_cell.ipynb", "forged": "forged_cell_metadata.ipynb"}


@pytest.fixture(scope="module")
def courses(tmp_path_factory):
    """The same two submissions in two courses: one autograded by nbgrader, one by the batch."""
    made = []
    for name in ("autograde", "batch"):
        course = str(tmp_path_factory.mktemp(name))
        prepare_course("problem1", course)
        for student, notebook in FAULT_STUDENTS.items():
            folder = os.path.join(course, "submitted", student, "problem1")
            os.makedirs(folder)
            shutil.copy(os.path.join(FAULTS, notebook), os.path.join(folder, "problem1.ipynb"))
        made.append(course)
    autograded, batched = made
    proc = nbgrader(["autograde", "problem1", "--force"], cwd=autograded, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    proc = subprocess.run(
        [sys.executable, "-m", "graders.batch", "-a", "problem1", os.path.join(batched, "submitted"),
         "-o", os.path.join(batched, "graded"), "--workers", "2", "--gradebook"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return autograded, batched


def test_nbgrader_autograde_and_the_batch_agree(courses):
    """For a notebook missing a solution cell and a test cell, one with a solution and a test
    cell duplicated, one whose locked set-up cell the student broke (nbgrader restores it;
    every route runs it as released), and one whose cells' nbgrader flags were edited (nbgrader
    failed the whole notebook: 0 on this route only), does every grade cell get the same score
    both ways: zero only for the function that is missing or wrong?"""
    autograded, batched = courses
    theirs, ours = read_gradebook(autograded, "problem1"), read_gradebook(batched, "problem1")
    assert set(theirs) == set(ours) == set(FAULT_STUDENTS)
    for student in FAULT_STUDENTS:
        assert ours[student] == theirs[student], student
    deleted, duplicated = theirs["deleted"], theirs["duplicated"]
    assert deleted["block_average_jit"][0] == 0
    assert deleted["roll_diff"][:2] == (PROBLEM1_POINTS["roll_diff"],) * 2 and not deleted["roll_diff"][2], \
        "a deleted test cell must not cost the points of a right function"
    assert duplicated["shard_average_jit"][0] == 0  # the later, wrong definition counts
    for book, fault in ((deleted, "deleted_cells"), (duplicated, "duplicated_cells")):
        assert sum(score for name, (score, _, manual) in book.items() if not manual) == expected_score(fault)
    assert sum(score for name, (score, _, manual) in theirs["edited_setup"].items() if not manual) == \
        expected_score("edited_setup_cell")
    # a test cell made "not graded" or "a solution", an answer cell renamed, the written answer
    # made "not an answer", a 100-point grade cell added: graded as released, on the code's score
    forged = theirs["forged"]
    assert set(forged) == set(deleted) and "bonus" not in forged
    assert sum(score for name, (score, _, manual) in forged.items() if not manual) == \
        pytest.approx(expected_score("forged_cell_metadata"))


def test_deleted_test_cell_says_why(courses):
    """Does the autograded notebook hold a restored cell saying its test cell was missing?"""
    import nbformat

    autograded, _ = courses
    nb = nbformat.read(os.path.join(autograded, "autograded", "deleted", "problem1", "problem1.ipynb"),
                       as_version=4)
    restored = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "roll_diff"]
    assert len(restored) == 1 and "was missing from the submission" in restored[0].source
    assert "roll_diff: 2/2 points" in restored[0].outputs[0]["text"]


def test_lms_download_through_zip_collect(tmp_path):
    """Does a zip downloaded from an LMS, collected with `nbgrader zip_collect`, give the
    batch one submission per student, with the LMS's time stamp?"""
    course = str(tmp_path)
    with open(os.path.join(course, "nbgrader_config.py"), "w") as f:
        f.write(course_config(course))
        f.write('c.FileNameCollectorPlugin.named_regexp = (r".*/(?P<student_id>[a-z]+)_attempt_"\n'
                '    r"(?P<timestamp>[0-9\\-]+)_(?P<file_id>\\w+\\.ipynb)")\n')
    archive = os.path.join(course, "downloaded", "problem1", "archive")
    os.makedirs(archive)
    with zipfile.ZipFile(os.path.join(archive, "lms.zip"), "w") as z:
        z.write(os.path.join(REPO_ROOT, "solutions", "problem1", "problem1.ipynb"),
                "alice_attempt_2026-01-30-15-00-00_problem1.ipynb")
        z.write(os.path.join(REPO_ROOT, "release", "problem1", "problem1.ipynb"),
                "bob_attempt_2026-01-31-09-00-00_problem1.ipynb")
    nbgrader(["zip_collect", "problem1"], cwd=course)
    found = {s.student: s for s in discover(os.path.join(course, "submitted"), "problem1")}
    assert sorted(found) == ["alice", "bob"]
    assert found["alice"].path == os.path.join(course, "submitted", "alice", "problem1", "problem1.ipynb")
    with open(os.path.join(course, "submitted", "alice", "problem1", "timestamp.txt")) as f:
        assert f.read().startswith("2026-01-30 15:00:00")
