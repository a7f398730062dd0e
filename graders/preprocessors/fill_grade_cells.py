"""FillGradeCells: the trusted graders' verdict in each grade cell; no student code in a kernel.

nbgrader's usual autograde runs the student's notebook in an ordinary kernel, as the
grader's user, where any cell could patch the kit on disk or leave a process behind. This
course's pipeline (`nbgrader_config.py`) has no `Execute` step: `FillGradeCells` grades the
submitted code with the hidden graders (in nbgrader's own process; student code runs only in
their sandbox), with the course's limits (`grading_config.py`), and writes each grade cell's
message and score. nbgrader's `SaveAutoGrades` then reads a number as partial credit.
A submission that is not a regular file (a link to the instructor's solutions, say) or that
holds links is refused: every grade cell says so, with 0, and nothing the links name is kept.
"""
from __future__ import annotations

import os
import time

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor

from ..files import NotASubmission, check_submission
from ..grade_cells import grade_cell_outputs


def links_in(folder: str) -> list[str]:
    """Everything under `folder` that is not a regular file or a folder (links first of all)."""
    found = []
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            if os.path.islink(path) or not (os.path.isdir(path) or os.path.isfile(path)):
                found.append(path)
    return found


class FillGradeCells(NbGraderPreprocessor):
    """Replace each autograded test cell's outputs with the trusted grader's verdict."""

    def preprocess(self, nb, resources):
        """A submission that cannot be graded (a link, a special file) gets a zero in every
        grade cell, saying why. Any other exception is the graders' own failure, never the
        submission's: it propagates, so nbgrader reports it and records no grade for this
        student (the other students are graded all the same)."""
        info = resources["nbgrader"]
        try:
            refused = self.refusal(info)
            if refused:
                nb.cells = [nbformat.v4.new_markdown_cell(f"**Not graded:** {refused}")]
                raise NotASubmission(refused)
            started = time.perf_counter()
            result = self.grade(info)
            self.log.info("graded %s's %s: %g/%g in %.2f s", info.get("student"), info.get("assignment"),
                          result.score, result.max_score, time.perf_counter() - started)
            self.record(result, info)
            parts = {p.name: p for p in result.parts}
            failure = None
        except NotASubmission as e:
            parts, failure = {}, str(e)
            self.log.error("not grading %s: %s", info.get("student"), e)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
                continue
            cell.outputs = grade_cell_outputs(
                parts.get(meta.get("grade_id")), failure or f"no grader result for {meta.get('grade_id')!r}",
                cell.get("execution_count") or 1)
        self.restore_deleted_test_cells(nb, resources, parts, failure)
        return nb, resources

    def grade(self, info: dict):
        """The graders' result for the submitted file, read as every route reads it (its
        bytes, reached without links from the submitted folder; the set-up cell run as
        released, as nbgrader restores it), so that a notebook scores the same here as
        with `python -m graders`, the batch or Gradescope."""
        from ..run import grade
        from ..settings import Limits

        coursedir = CourseDirectory(config=self.config)
        submitted = coursedir.format_path(coursedir.submitted_directory, ".", ".")
        path = os.path.join(coursedir.format_path(coursedir.submitted_directory, info["student"], info["assignment"]),
                            info["notebook"] + ".ipynb")
        return grade(path, info["assignment"], limits=Limits(config=self.config), trusted_folder=submitted)

    def record(self, result, info: dict) -> None:
        """Keep the whole result where `graders.batch` keeps its own
        (`<course>/graded/<assignment>/<student>/results.json`), for the class report
        (`python -m graders.report`); the gradebook keeps only the scores."""
        from ..results import Provenance, results_path, write_results

        coursedir = CourseDirectory(config=self.config)
        folder = coursedir.format_path(coursedir.submitted_directory, info["student"], info["assignment"])
        result.provenance = Provenance(student=info["student"], path=os.path.join(folder, info["notebook"] + ".ipynb"))
        write_results(results_path(os.path.join(coursedir.root, "graded", info["assignment"]), info["student"]), result)

    def refusal(self, info: dict) -> str | None:
        """Why the student's submitted files cannot be graded (a link, a FIFO, ...), or None.
        Copies nbgrader already made of linked files are removed, so feedback never holds them."""
        coursedir = CourseDirectory(config=self.config)
        submitted = coursedir.format_path(coursedir.submitted_directory, ".", ".")
        folder = coursedir.format_path(coursedir.submitted_directory, info["student"], info["assignment"])
        try:
            check_submission(os.path.join(folder, info["notebook"] + ".ipynb"), trusted=submitted)
        except NotASubmission as e:
            return str(e)
        links = links_in(folder)
        if not links:
            return None
        autograded = coursedir.format_path(coursedir.autograded_directory, info["student"], info["assignment"])
        for link in links:
            copy = os.path.join(autograded, os.path.relpath(link, folder))
            if os.path.lexists(copy) and not os.path.isdir(copy):
                os.remove(copy)
        names = ", ".join(os.path.relpath(link, folder) for link in links[:5])
        return (f"the submission holds {len(links)} link(s) or special file(s) ({names}): only regular "
                f"files are graded; hand in the notebook itself")

    def restore_deleted_test_cells(self, nb, resources, parts: dict, failure: str | None) -> None:
        """A test cell the student deleted gets its grade all the same (the graders judge the
        function, not the cell; `python -m graders.batch` does the same): a locked cell is put
        back at the end, holding the verdict, for SaveAutoGrades to read. (nbgrader's own
        OverwriteCells.add_missing_cells fails on notebooks with duplicated cells.)"""
        from nbgrader.api import Gradebook, MissingEntry

        info = resources["nbgrader"]
        present = {cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells}
        with Gradebook(info["db_url"]) as gb:
            expected = [c.name for c in gb.find_notebook(info["notebook"], info["assignment"]).grade_cells]
            for name in (n for n in expected if n not in present):
                try:
                    source = gb.find_grade_cell(name, info["notebook"], info["assignment"])
                except MissingEntry:
                    continue
                if source.cell_type != "code":
                    continue
                cell = nbformat.v4.new_code_cell(
                    f"# The test cell {name!r} was missing from the submission; the graders "
                    f"judged {name} itself.")
                cell.metadata["nbgrader"] = {"grade": True, "grade_id": name, "locked": True,
                                             "points": source.max_score, "schema_version": 3,
                                             "solution": False, "task": False}
                cell.outputs = grade_cell_outputs(parts.get(name), failure or f"no grader result for {name!r}")
                nb.cells.append(cell)
