"""Hidden configurations: the cases each graded function is judged on, per assignment.

Meshes follow PROBLEMS.md; sizes vary between meshes so that hard-coded shapes fail.
Input values are drawn in the grading parent from `HIDDEN_SEED` and never reach the
submission's process.
"""
from __future__ import annotations

from assignments.contract import Assignment, Case

from . import problem1

HIDDEN_SEED = 2718281

_CASES = {"problem1": problem1.cases}


def hidden_cases(assignment: Assignment) -> dict[str, list[Case]]:
    """{function name: [Case, ...]} for every graded function of the assignment."""
    return {part.name: _CASES[assignment.name](part) for part in assignment.parts}
