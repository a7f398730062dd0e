"""Generated files: release/ and solutions/ are what the generators make from source/."""
import os
import subprocess
import sys

import nbformat
import pytest

from graders import build

pytestmark = pytest.mark.stack_neutral  # the generated files


def test_release_and_solutions_are_current():
    """Are the committed release/ and solutions/ what `python -m graders.build all` makes now?"""
    assert build.stale_files() == []


def test_release_has_no_solutions_or_hidden_tests(repo_root):
    """Does the released notebook hold stubs, and none of the solution or hidden test lines?"""
    for name in build.assignment_names():
        text = open(os.path.join(repo_root, "release", name, f"{name}.ipynb")).read()
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
        assert "raise NotImplementedError()" in text


def test_notebooks_carry_the_kernels_whole_language_info(repo_root):
    """Do the source, release and solution notebooks carry the whole language_info a Python
    kernel reports? When its kernel is ready, JupyterLab writes the kernel's language_info into
    the notebook and marks it modified if any field differs (seen in JupyterLab 4.6): one
    without a version, or without language_info, opens modified with every Python. With the
    kernel's whole set the notebook opens unmodified on the kit's Python; the hand-out's server
    fills in the student's own version (tests/test_handout.py)."""
    from ipykernel.ipkernel import IPythonKernel

    for name in build.assignment_names():
        for folder in ("source", "release", "solutions"):
            nb = nbformat.read(os.path.join(repo_root, folder, name, f"{name}.ipynb"), as_version=4)
            assert nb.metadata.kernelspec.name == "python3", (folder, name)
            info = nb.metadata.language_info
            assert set(info) == set(IPythonKernel.language_info), (folder, name, sorted(info))
            assert info["name"] == "python" and info["version"].startswith("3."), (folder, name)


def test_points_match_the_contract(repo_root):
    """Do the source notebook's grade cells carry the contract's names and points?"""
    from assignments.contracts import ASSIGNMENTS

    for name, assignment in ASSIGNMENTS.items():
        nb = nbformat.read(os.path.join(repo_root, "source", name, f"{name}.ipynb"), as_version=4)
        graded = {c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader["points"]
                  for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
        expected = {p.name: p.points for p in assignment.parts}
        expected.update({w.name: w.points for w in assignment.written})
        assert graded == expected


def test_every_written_answer_has_a_rubric_for_graders_only(repo_root):
    """Does every written answer have a model answer in its solution region and a read-only
    mark-scheme cell right after it (not a task cell), holding the rubric and the same model
    answer (shown in formgrader, removed from the release)?"""
    from assignments.contracts import ASSIGNMENTS

    for name, assignment in ASSIGNMENTS.items():
        nb = nbformat.read(os.path.join(repo_root, "source", name, f"{name}.ipynb"), as_version=4)
        ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
        released = open(os.path.join(repo_root, "release", name, f"{name}.ipynb")).read()
        for written in assignment.written:
            answer = nb.cells[ids.index(written.name)]
            assert "### BEGIN SOLUTION" in answer.source, written.name
            rubric = nb.cells[ids.index(written.name) + 1]
            meta = rubric.metadata.get("nbgrader", {})
            # read-only, and not a task cell, which nbgrader would count as one more answer to grade
            assert meta.get("locked") and not (meta.get("task") or meta.get("grade") or meta.get("solution"))
            assert meta.get("grade_id") == f"{written.name}_rubric"
            assert "### BEGIN MARK SCHEME" in rubric.source and "Rubric" in rubric.source
            model = answer.source.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0].strip()
            assert model in rubric.source, f"{written.name}: the mark scheme must repeat the model answer"
        assert "MARK SCHEME" not in released and "Rubric (" not in released


def test_solutions_branch(repo_root, tmp_path):
    """Does the solutions-branch command make a branch whose release notebooks are solved?"""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", repo_root, str(clone)], check=True)
    subprocess.run([sys.executable, "-m", "graders.build", "solutions-branch"], cwd=clone, check=True)
    shown = subprocess.run(["git", "show", "solutions:release/problem1/problem1.ipynb"], cwd=clone,
                           check=True, capture_output=True, text=True).stdout
    assert "raise NotImplementedError()" not in shown and "jnp.roll(block, shift, axis=0)" in shown
