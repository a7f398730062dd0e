"""Where a batch's grades go besides each results.json: nbgrader's database (and the
autograded notebooks its feedback is made from), `gradebook.csv`, and the summary tables.
Everything here reads `SubmissionResult` objects (`graders.results`)."""
from __future__ import annotations

import os
import statistics

from assignments.rulebook import rule_title

from .files import csv_text, write_atomic
from .results import SubmissionResult


class GradebookMissing(RuntimeError):
    """nbgrader's database does not know the assignment (run generate_assignment first)."""


class NbgraderGradebook:
    """Writes batch grades into nbgrader's database, as `nbgrader autograde` would.

    Only `auto_score` of code grade cells changes, and a written answer left as released
    scores 0 with nothing to grade by hand (as autograde scores it); `manual_score`
    (formgrader) is never touched, and a submission row, once there, is never removed.
    """

    def __init__(self, db_url: str, assignment: str, course: str | None):
        from nbgrader.api import Gradebook, MissingEntry

        self.assignment, self.course, self.missing = assignment, course, MissingEntry
        self.gb = Gradebook(db_url)
        try:
            self.gb.find_assignment(assignment)
        except MissingEntry:
            self.gb.close()
            raise GradebookMissing(
                f"assignment {assignment!r} is not in nbgrader's database at {db_url}: run "
                f"`nbgrader generate_assignment {assignment}` first (it records the grade cells), "
                f"or leave out --gradebook") from None

    def record(self, student: str, result: SubmissionResult, timestamp: str | None,
               data: bytes | None = None) -> None:
        gb = self.gb
        gb.update_or_create_student(student)
        try:
            sub = gb.find_submission(self.assignment, student)
        except self.missing:
            sub = gb.add_submission(self.assignment, student, **({"timestamp": timestamp} if timestamp else {}))
        scores = {p.name: p.score for p in result.parts}
        answered = _answered_written_cells(data)
        for notebook in sub.notebooks:
            for grade in notebook.grades:
                if grade.cell.cell_type != "code":
                    if grade.manual_score is None and not self._answered(grade, notebook.name, answered):
                        grade.auto_score, grade.needs_manual_grade = 0.0, False
                    continue
                if grade.name not in scores:
                    continue
                grade.auto_score = scores[grade.name]
                grade.needs_manual_grade = grade.manual_score is not None
        gb.db.commit()

    def _answered(self, grade, notebook: str, answered: dict[str, str]) -> bool:
        """Does the student's written answer differ from the release? (nbgrader's test, once
        autograde has restored the cell's flags and type: its checksum, so its text.) A cell
        missing from the notebook is restored as released: unanswered."""
        try:
            released = self.gb.find_source_cell(grade.name, notebook, self.assignment).source
        except self.missing:
            return True
        return answered.get(grade.name, released) != released

    def write_feedback_notebook(self, student: str, path: str | None, data: bytes | None,
                                result: SubmissionResult, timestamp: str | None) -> None:
        """autograded/<student>/<assignment>/<notebook>.ipynb, so `nbgrader generate_feedback`
        has a notebook to render: the submission (`data`, its bytes as the batch read them,
        never the file at `path` again) without the outputs it came with (as `nbgrader
        autograde`'s ClearOutput: a student's HTML or script must not reach formgrader, which
        renders outputs unsanitized in the instructor's session), each grade cell showing the
        graders' message and score. A notebook written by `nbgrader autograde` is left alone; a submission that was
        not graded (not a regular file, say) gets no notebook."""
        if self.course is None or path is None or data is None or not path.endswith(".ipynb") or result.failure:
            return
        import nbformat

        sub = self.gb.find_submission(self.assignment, student)
        for notebook in sub.notebooks:
            target = os.path.join(self.course, "autograded", student, self.assignment, notebook.name + ".ipynb")
            if os.path.exists(target) and not _written_by_batch(target):
                continue
            try:
                nb = nbformat.reads(data.decode("utf-8", errors="replace"), as_version=4)
            except Exception:
                nb = nbformat.v4.new_notebook()
            for cell in nb.cells:
                if cell.cell_type == "code":
                    cell.outputs, cell.execution_count = [], None
            _fill_grade_cells(nb, notebook, result)
            nb.metadata["graders_batch"] = True
            write_atomic(target, nbformat.writes(nb))
            if timestamp:
                write_atomic(os.path.join(os.path.dirname(target), "timestamp.txt"), timestamp)

    def rollback(self) -> None:
        """Forget a submission's writes that failed half-way (the next one starts clean)."""
        self.gb.db.rollback()

    def close(self) -> None:
        self.gb.close()


def _written_by_batch(path: str) -> bool:
    import nbformat

    try:
        return bool(nbformat.read(path, as_version=4).metadata.get("graders_batch"))
    except Exception:
        return False


def _fill_grade_cells(nb, notebook, result: SubmissionResult) -> None:
    """Each known grade cell shows the graders' verdict; cells nbgrader does not know, and
    duplicates but the last, become ordinary cells (as nbgrader does)."""
    from .grade_cells import grade_cell_outputs

    known = {g.name for g in notebook.grades} | {c.name for c in notebook.comments}
    parts = {p.name: p for p in result.parts}
    seen: set[str] = set()
    for cell in reversed(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if not meta:
            continue
        grade_id = meta.get("grade_id") if isinstance(meta, dict) else None  # the student's JSON: any type
        if not isinstance(grade_id, str) or grade_id not in known or grade_id in seen:
            cell.metadata.pop("nbgrader")
            continue
        seen.add(grade_id)
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            cell.outputs = grade_cell_outputs(parts.get(grade_id), f"no grader result for {grade_id!r}")


# --- gradebook.csv and the summary -------------------------------------------------------------


def gradebook_rows(results: list[tuple[str, str, SubmissionResult]], parts) -> tuple[list[str], list[dict]]:
    """(header, rows) of gradebook.csv: one row per (student, status, result)."""
    header = ["student", *(p.name for p in parts), "score", "max_score", "status", "submission",
              "sha256", "problems"]
    rows = []
    for student, status, result in results:
        scores = {p.name: p for p in result.parts}
        problems = [f"{p.name}: {p.first_problem}" for p in result.parts if not p.passed]
        rows.append({"student": student, **{p.name: scores[p.name].score if p.name in scores else 0.0 for p in parts},
                     "score": result.score, "max_score": sum(p.points for p in parts), "status": status,
                     "submission": result.provenance.path, "sha256": result.provenance.sha256,
                     "problems": " | ".join(problems)[:500]})
    return header, rows


def write_gradebook_csv(path: str, results: list[tuple[str, str, SubmissionResult]], parts) -> None:
    """`gradebook.csv`, with every text cell safe to open in a spreadsheet (`files.safe_cell`)."""
    header, rows = gradebook_rows(results, parts)
    write_atomic(path, csv_text(header, rows))


def summary_tables(results: list[tuple[str, str, SubmissionResult]], assignment: str, parts, console) -> None:
    """Per graded function (mean, full marks, zeros, most common first problem), then the
    students with the lowest scores."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{assignment}: {len(results)} submission(s) by graded function", box=box.SIMPLE_HEAVY)
    for column in ("function", "points", "mean", "full marks", "zero", "most common problem"):
        table.add_column(column, justify="left" if column in ("function", "most common problem") else "right")
    for p in parts:
        found = [r.part(p.name) for _, _, r in results if any(q.name == p.name for q in r.parts)]
        scores = [q.score for q in found] + [0.0] * (len(results) - len(found))
        problems: dict[str, int] = {}  # by the id of the rule broken first, never by the wording
        for q in found:
            if not q.passed:
                rule = q.first_rule or "note"
                problems[rule] = problems.get(rule, 0) + 1
        common = max(sorted(problems), key=problems.get) if problems else ""
        table.add_row(p.name, f"{p.points:g}", f"{statistics.mean(scores):.2f}" if scores else "-",
                      str(sum(s >= p.points for s in scores)), str(sum(s == 0 for s in scores)),
                      Text(f"{common} {rule_title(common) or 'a note on the whole submission'} "
                           f"({problems[common]}x)" if common else ""))
    console.print(table)
    students = Table(title="students" + (" (lowest 25)" if len(results) > 25 else ""), box=box.SIMPLE)
    for column in ("student", "score", "status", "time (s)", "first problem"):
        students.add_column(column, justify="right" if column in ("score", "time (s)") else "left")
    maximum = sum(p.points for p in parts)
    shown = sorted(results, key=lambda r: (r[2].score, r[0]))[:25]
    for student, status, result in sorted(shown):
        failing = [q for q in result.parts if not q.passed]
        first = f"{failing[0].name}: {failing[0].first_problem}"[:90] if failing else ""
        style = {"failed": "red", "kept": "dim"}.get(status, "")
        students.add_row(Text(student), f"{result.score:g}/{maximum:g}", Text(status, style=style),
                         f"{result.execution_time:.1f}", Text(first))  # Text: names and messages are not markup
    console.print(students)


def _answered_written_cells(data: bytes | None) -> dict[str, str]:
    """{grade id: text} of every cell with a grade id in a submitted notebook's bytes, whatever
    its flags and type say (autograde restores them), the last of a duplicated id (as
    nbgrader keeps it); empty when the bytes are not a notebook (nothing written to grade)."""
    if data is None:
        return {}
    try:
        import nbformat

        nb = nbformat.reads(data.decode("utf-8", errors="replace"), as_version=4)
        return {cell.metadata["nbgrader"]["grade_id"]: cell.source for cell in nb.cells
                if isinstance(cell.metadata.get("nbgrader"), dict)
                and isinstance(cell.metadata["nbgrader"].get("grade_id"), str)}
    except Exception:
        return {}
