"""A grade cell's outputs (the graders' message, the step-by-step picture where communication is
off, the score nbgrader reads), written the same way by autograde's `FillGradeCells` and the
batch's gradebooks. Needs nbformat, not nbgrader, so the fast tier can test it without loading
nbgrader."""
from __future__ import annotations

import nbformat

from .results import PartResult


def grade_cell_outputs(part: PartResult | None, missing: str, execution_count: int = 1) -> list:
    """A grade cell's outputs for one graded function's result: its message on stdout, a
    picture of what it sends where its communication is off, and its score as the cell's
    value, which nbgrader's SaveAutoGrades reads as partial credit. The one place grade cells
    are written (autograde, the batch)."""
    text, score = (part.output, part.score) if part else (missing, 0)
    return [nbformat.v4.new_output("stream", name="stdout", text=text + "\n"),
            *(schedule_outputs(part) if part else []),
            nbformat.v4.new_output("execute_result", data={"text/plain": repr(float(score))},
                                   execution_count=execution_count)]


def schedule_outputs(part: PartResult) -> list:
    """The step-by-step picture (`assignments.schedule`) of the first case whose communication
    breaks the rule, whether or not its values are right (a roll of the whole array: wrong
    values and a collective-permute): what the student's program sends, drawn from the
    compiled program's analysis (no value of the case is in it). None otherwise."""
    case = next((c for c in part.cases if not c.rule_ok and c.analysis is not None
                 and c.analysis.collectives), None)
    if case is None:
        return []
    from assignments.schedule import draw_schedule

    picture = draw_schedule(case.analysis, compact=True,
                            title=f"What {part.name} sends on {case.case.label}, step by step")
    return [nbformat.v4.new_output("display_data", data={"text/html": picture._repr_html_(),
                                                         "text/plain": picture.text()})]
