"""GetGradesWithPending: feedback tells a written answer waiting for a grader from a 0."""
from __future__ import annotations

from nbgrader.preprocessors import GetGrades


class GetGradesWithPending(GetGrades):
    """nbgrader's GetGrades (each grade cell's score and points, from the gradebook), plus
    ``metadata.nbgrader.pending``: True for an answer that needs a human grade nobody has given
    yet. nbgrader scores such a cell 0 until then; the kit's feedback template
    (`graders/templates/feedback`) says "waiting for a grader" instead."""

    def _get_score(self, cell, resources) -> None:
        super()._get_score(cell, resources)
        grade = self.gradebook.find_grade(cell.metadata["nbgrader"]["grade_id"], self.notebook_id,
                                          self.assignment_id, self.student_id)
        cell.metadata.nbgrader["pending"] = bool(grade.needs_manual_grade and grade.manual_score is None)
        # nbgrader scores a written answer left as released 0 itself, with no grader to wait for:
        # the page says that nothing was written, not that a grader gave 0.
        cell.metadata.nbgrader["unanswered"] = bool(
            cell.metadata["nbgrader"].get("solution") and not grade.needs_manual_grade
            and grade.manual_score is None and not grade.auto_score)

    def preprocess(self, nb, resources):
        nb, resources = super().preprocess(nb, resources)
        pending = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("pending")]
        resources["nbgrader"]["pending"] = len(pending)
        resources["nbgrader"]["pending_points"] = sum(c.metadata.nbgrader["points"] for c in pending)
        return nb, resources
