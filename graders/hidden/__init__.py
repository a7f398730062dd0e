"""Hidden configurations: the cases each graded function is judged on, per assignment.

One module per assignment, named after it, defining `cases(part) -> list[Case]` (and,
optionally, `make_inputs(part, case, seed) -> list[np.ndarray]` for adversarial data).
Meshes follow PROBLEMS.md; sizes vary between meshes so that hard-coded shapes fail.
Input values are drawn in the grading parent from `HIDDEN_SEED` and never reach the
submission's process.
"""
from __future__ import annotations

import importlib

from assignments.contract import Assignment, Case, Part
from assignments.evaluate import make_inputs as default_inputs

HIDDEN_SEED = 2718281


def _module(assignment: Assignment):
    return importlib.import_module(f"{__name__}.{assignment.name}")


def hidden_cases(assignment: Assignment) -> dict[str, list[Case]]:
    """{function name: [Case, ...]} for every graded function of the assignment."""
    module = _module(assignment)
    return {part.name: module.cases(part) for part in assignment.parts}


def hidden_inputs(assignment: Assignment, part: Part, case: Case, seed: int):
    """The hidden input arrays for one case (the assignment's own generator if it has one)."""
    generate = getattr(_module(assignment), "make_inputs", default_inputs)
    return generate(part, case, seed)
