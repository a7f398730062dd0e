"""What a grade cell holds (`graders.grade_cells.grade_cell_outputs`), on
hand-built results: the message, the step-by-step picture where the communication is off, and
the score nbgrader reads (no grading, no nbgrader run here; tests/test_feedback_page.py renders
them)."""
from __future__ import annotations

from assignments.contract import CHECKS, Case, CaseResult, Problem
from assignments.hlo import ArrayShape, Collective, ProgramAnalysis
from graders.grade_cells import grade_cell_outputs
from graders.results import PartResult

CASE = Case((2, 4), {"S": 16, "D": 8}, {"shift": 1})
PERMUTE = Collective("collective-permute", ("X",), (ArrayShape("f32", (1, 2)),), (ArrayShape("f32", (1, 2)),),
                     1, 2, shifts=(1,), name="cp.1", pairs=((0, 4), (4, 0)))
PERMUTES = ProgramAnalysis((PERMUTE,), (), 128, 8, mesh_shape=(2, 4), axis_names=("X", "Y"))
WRONG = CHECKS["V005"].problem("values wrong: ...")
SENDS = Problem("C001", "communication observed: ...; allowed: none", "communication")


def pictures(outputs) -> list[str]:
    return [o["data"]["text/plain"] for o in outputs if o["output_type"] == "display_data"]


def test_a_roll_of_the_whole_array_gets_its_picture():
    """Does a case whose values are wrong and whose communication breaks the rule (jnp.roll of
    the whole array: wrong values and a collective-permute) get the picture of what it sends,
    as a case with right values does, and a case that keeps the rule none?"""
    whole = CaseResult(CASE, False, False, [WRONG, SENDS],
                       PERMUTES)
    outputs = grade_cell_outputs(PartResult("roll_diff", 2, [whole]), "")
    assert len(pictures(outputs)) == 1
    assert "What roll_diff sends on mesh 2x4, S=16, D=8, shift=1" in pictures(outputs)[0]
    right_values = CaseResult(CASE, True, False, [SENDS], PERMUTES)
    assert len(pictures(grade_cell_outputs(PartResult("roll_diff", 2, [right_values]), ""))) == 1
    kept = CaseResult(CASE, False, True, [WRONG], PERMUTES)
    assert pictures(grade_cell_outputs(PartResult("roll_diff", 2, [kept]), "")) == []


def test_the_score_is_the_cells_value_for_nbgrader():
    """Does the grade cell still end with its score as its value (nbgrader's SaveAutoGrades
    reads it as partial credit; the feedback page does not show it)?"""
    part = PartResult("roll_diff", 2, [CaseResult(CASE, True, True, [], PERMUTES),
                                       CaseResult(CASE, False, True, [WRONG], PERMUTES)])
    value = grade_cell_outputs(part, "")[-1]
    assert value["output_type"] == "execute_result" and value["data"]["text/plain"] == repr(part.score) == "1.0"
