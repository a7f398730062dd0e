"""FillGradeCells: the trusted graders' verdict in each grade cell; no student code in a kernel.

nbgrader's usual autograde runs the student's notebook in an ordinary kernel, as the
grader's user, where any cell could patch the kit on disk or leave a process behind. This
course's pipeline (`nbgrader_config.py`) has no `Execute` step: `FillGradeCells` grades the
submitted code with the hidden graders, in their sandbox, and writes each grade cell's
message and score. nbgrader's `SaveAutoGrades` then reads a number as partial credit.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Integer

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def grade_notebook(nb, assignment: str, timeout: int) -> dict:
    """Run the graders on a notebook object; returns the Gradescope-format result."""
    with tempfile.TemporaryDirectory(prefix="nbgrader-grade-") as tmp:
        path = os.path.join(tmp, "submission.ipynb")
        out = os.path.join(tmp, "results.json")
        nbformat.write(nb, path)
        proc = subprocess.run(
            [sys.executable, "-m", "graders", path, "--assignment", assignment, "-o", out, "--quiet"],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout,
        )
        if proc.returncode != 0 or not os.path.exists(out):
            tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"the graders failed on this notebook: {tail[0]}")
        with open(out) as f:
            return json.load(f)


def grade_cell_outputs(test: dict | None, missing: str, execution_count: int = 1) -> list:
    """A grade cell's outputs for one graded function's result (Gradescope's test dict): its
    message on stdout and its score as the cell's value, which nbgrader's SaveAutoGrades
    reads as partial credit. The one place grade cells are written (autograde, the batch)."""
    text, score = (test["output"], test["score"]) if test else (missing, 0)
    return [nbformat.v4.new_output("stream", name="stdout", text=text + "\n"),
            nbformat.v4.new_output("execute_result", data={"text/plain": repr(float(score))},
                                   execution_count=execution_count)]


class FillGradeCells(NbGraderPreprocessor):
    """Replace each autograded test cell's outputs with the trusted grader's verdict."""

    timeout = Integer(1800, help="Seconds the graders may take for one notebook.").tag(config=True)

    def preprocess(self, nb, resources):
        assignment = resources["nbgrader"]["assignment"]
        try:
            graded = grade_notebook(nb, assignment, self.timeout)
            tests = {t["name"]: t for t in graded["tests"]}
            failure = None
        except Exception as e:  # the grade cells get a clear zero, the batch goes on
            tests, failure = {}, str(e)
            self.log.error("grading %s failed: %s", resources["nbgrader"].get("student"), e)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
                continue
            cell.outputs = grade_cell_outputs(
                tests.get(meta.get("grade_id")), failure or f"no grader result for {meta.get('grade_id')!r}",
                cell.get("execution_count") or 1)
        self.restore_deleted_test_cells(nb, resources, tests)
        return nb, resources

    def restore_deleted_test_cells(self, nb, resources, tests: dict) -> None:
        """A test cell the student deleted gets its grade all the same (the graders judge the
        function, not the cell; `python -m graders.batch` does the same): a locked cell is put
        back at the end, holding the verdict, for SaveAutoGrades to read. (nbgrader's own
        OverwriteCells.add_missing_cells fails on notebooks with duplicated cells.)"""
        present = {cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells}
        missing = [name for name in tests if name not in present]
        if not missing:
            return
        from nbgrader.api import Gradebook, MissingEntry

        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            for name in missing:
                try:
                    source = gb.find_grade_cell(name, info["notebook"], info["assignment"])
                except MissingEntry:
                    continue
                if source.cell_type != "code":
                    continue
                test = tests[name]
                cell = nbformat.v4.new_code_cell(
                    f"# The test cell {name!r} was missing from the submission; the graders "
                    f"judged {name} itself.")
                cell.metadata["nbgrader"] = {"grade": True, "grade_id": name, "locked": True,
                                             "points": source.max_score, "schema_version": 3,
                                             "solution": False, "task": False}
                cell.outputs = grade_cell_outputs(test, "")
                nb.cells.append(cell)
