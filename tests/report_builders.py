"""Class results built by hand, for the class report's tests (tests/unit/test_report.py,
tests/test_report_corpora.py): problem1 cases with the contract's own rule messages."""
from __future__ import annotations

import os

from assignments.contract import CHECKS, Case, CaseResult
from assignments.contracts import get_assignment
from assignments.hlo import ArrayShape, Collective, ProgramAnalysis
from assignments.rules import Program
from graders.results import Failure, PartResult, Provenance, SubmissionResult, write_results

PROBLEM1 = get_assignment("problem1")
FUNCTIONS = [p.name for p in PROBLEM1.parts]
CASE = Case((2, 4), {"S": 16, "D": 8}, {"shift": 1})
HOSTILE = ["<script>alert(1)", "<img src=x onerror=alert(2)>", '=HYPERLINK("evil.example","x")',
           "javascript:alert(3)", "a&b \"quoted\" 'single'"]
"""Student folder names as hostile as a file name can be (no "/")."""


def collective(kind: str, axes: str, *, count: int | None = 1, group: int = 4, shifts=(), shape=(2, 4)):
    return Collective(kind=kind, axes=tuple(axes), operands=(ArrayShape("f32", shape),),
                      results=(ArrayShape("f32", shape),), count=count, group_size=group, shifts=tuple(shifts))


def analysis(*collectives: Collective) -> ProgramAnalysis:
    return ProgramAnalysis(collectives=tuple(collectives), largest_values=(), temp_bytes=0, num_devices=8,
                           mesh_shape=(2, 4), axis_names=("X", "Y"))


def judged(function: str, program: ProgramAnalysis, values_ok: bool = True, values_problem: str = "",
           values_check: str = "V005") -> CaseResult:
    """A case as the judge gives it: the contract's own rules on `program` (and a problem of the
    check `values_check` saying `values_problem`, when given)."""
    part = PROBLEM1.part(function)
    rule = part.rule.check(Program(part, program), CASE)
    problems = ([CHECKS[values_check].problem(values_problem)] if values_problem else []) + rule
    return CaseResult(CASE, values_ok, not rule, problems, program)


def failed(message: str, check: str = "E002") -> CaseResult:
    return CaseResult.failed(CASE, CHECKS[check].problem(message))


def submission(student: str, cases: dict[str, list[CaseResult]] | None = None, *, note: str = "",
               seconds: float = 3.0, failure: Failure | None = None) -> SubmissionResult:
    """problem1, every function right (no communication) unless `cases` says otherwise."""
    cases = cases or {}
    parts = [PartResult(p.name, p.points, [] if failure else cases.get(p.name, [judged(p.name, analysis())]),
                        note=note) for p in PROBLEM1.parts]
    return SubmissionResult("problem1", f"{student}.py", parts, failure=failure, execution_time=seconds,
                            provenance=Provenance(student=student, graded_at="2025-01-01T10:00:00+00:00"),
                            timings={"judge: deserialize and compile": seconds / 2})


def class_folder(root, results: dict[str, SubmissionResult]) -> str:
    folder = os.path.join(str(root), "graded", "problem1")
    for student, result in results.items():
        write_results(os.path.join(folder, student, "results.json"), result)
    return folder


ALL_GATHER_Y = analysis(collective("all-gather", "Y"))
ALL_GATHER_BOTH = analysis(collective("all-gather", "Y"), collective("all-gather", "X", group=2))
ONE_WAY = analysis(collective("collective-permute", "Y", count=3, shifts=(3,)))
BOTH_WAYS = analysis(collective("collective-permute", "Y", count=3, shifts=(1,)),
                     collective("collective-permute", "Y", count=3, shifts=(3,)))


def page_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()
