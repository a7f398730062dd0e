"""Grading results: small dataclasses, with the text and Gradescope views made from them."""
from __future__ import annotations

import dataclasses

from assignments.contract import CaseResult

VALUES_WEIGHT = 0.5
"""Share of a part's points for right values (shape, dtype, sharding, numbers) per case;
the rest is for meeting the communication rule, counted only where the values are right."""


MAX_CASES_SHOWN = 4
"""Failing cases listed in a part's output; the rest are counted."""
MAX_PROBLEM_CHARS = 600
"""Characters of one problem shown (messages quote student code and errors)."""
MAX_OUTPUT_CHARS = 4000
"""Characters of one part's output: feedback has a bounded size whatever a submission does."""


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 20] + " ... (cut)"


@dataclasses.dataclass
class Check:
    """An instructor's custom check: a pytest test in `graders/test_<assignment>.py` marked
    ``@pytest.mark.points(n, part=...)``. Its points come out of that function's total."""

    name: str
    part: str
    """The graded function whose points it shares."""
    points: float
    passed: bool
    description: str = ""
    """The first line of the check's docstring (what it asks)."""
    message: str = ""
    """Why it failed (the assertion's message)."""


@dataclasses.dataclass
class PartResult:
    """The verdict on one graded function."""

    name: str
    max_score: float
    cases: list[CaseResult]
    note: str = ""
    """A problem that applies to the whole part (e.g. a cell that failed to run)."""
    checks: list[Check] = dataclasses.field(default_factory=list)
    """Custom checks that share this function's points."""

    @property
    def score(self) -> float:
        if not self.cases:
            return 0.0
        case_points = self.max_score - sum(c.points for c in self.checks)
        credit = sum(VALUES_WEIGHT * c.values_ok + (1 - VALUES_WEIGHT) * (c.values_ok and c.rule_ok)
                     for c in self.cases)
        passed_checks = sum(c.points for c in self.checks if c.passed) if credit else 0.0
        return round(case_points * credit / len(self.cases) + passed_checks, 2)

    @property
    def passed(self) -> bool:
        return self.score >= self.max_score

    @property
    def first_problem(self) -> str:
        """The first thing that went wrong (for gradebook summaries), or ""."""
        if self.note:
            return self.note
        failed_checks = [c for c in self.checks if not c.passed]
        failing = [c for c in self.cases if not c.passed]
        if failing:
            return "; ".join(failing[0].problems)
        return f"check {failed_checks[0].name}: {failed_checks[0].message}" if failed_checks else ""

    @property
    def output(self) -> str:
        """What the student may read: which cases failed and why (no hidden inputs)."""
        if not self.cases:  # never graded: the note says why
            return _bounded(f"{self.name}: 0/{self.max_score:g} points: {self.note}", MAX_OUTPUT_CHARS)
        ok = sum(c.passed for c in self.cases)
        values = sum(c.values_ok for c in self.cases)
        rule = sum(c.values_ok and c.rule_ok for c in self.cases)
        lines = [f"{self.name}: {self.score:g}/{self.max_score:g} points; {ok} of {len(self.cases)} "
                 f"cases fully right (values right in {values}, values and communication right in {rule})."]
        if self.note:
            lines.append("  note: " + _bounded(self.note, MAX_PROBLEM_CHARS))
        for check in self.checks:
            if not check.passed:
                lines.append(f"  - check {check.name} ({check.points:g} point(s)): "
                             + _bounded(f"{check.description} {check.message}".strip(), MAX_PROBLEM_CHARS))
        failing = [c for c in self.cases if not c.passed]
        for c in failing[:MAX_CASES_SHOWN]:
            lines.append(f"  - [{c.case.label}] " + _bounded("; ".join(c.problems), MAX_PROBLEM_CHARS))
        if len(failing) > MAX_CASES_SHOWN:
            lines.append(f"  - ... and {len(failing) - MAX_CASES_SHOWN} more failing case(s)")
        return _bounded("\n".join(lines), MAX_OUTPUT_CHARS)


@dataclasses.dataclass
class SubmissionResult:
    """The verdict on one submission of one assignment."""

    assignment: str
    submission: str
    parts: list[PartResult]
    problems: list[str] = dataclasses.field(default_factory=list)
    """Problems met while running the submission (failed cells, syntax errors, ...)."""
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    """Seconds spent per phase (export, compile, run, ...)."""
    isolation: str = ""
    """Which sandbox the submission's code ran in (`graders.sandbox.Isolation.note`)."""

    @classmethod
    def failed(cls, assignment: str, submission: str, message: str) -> "SubmissionResult":
        """Zero for every graded function, each saying `message` (the submission could not
        be graded at all)."""
        from assignments.contracts import get_assignment

        parts = [PartResult(p.name, p.points, [], note=message) for p in get_assignment(assignment).parts]
        return cls(assignment, submission, parts, [message])

    @property
    def score(self) -> float:
        return round(sum(p.score for p in self.parts), 2)

    @property
    def max_score(self) -> float:
        return sum(p.max_score for p in self.parts)

    def part(self, name: str) -> PartResult:
        return next(p for p in self.parts if p.name == name)

    def to_gradescope(self) -> dict:
        extra = ("\n\nWhile running your submission: " +
                 _bounded("; ".join(self.problems), MAX_OUTPUT_CHARS)) if self.problems else ""
        return {
            "score": self.score,
            "output": f"{self.assignment}: {self.score:g}/{self.max_score:g} points from the hidden "
                      f"graders (written answers are graded by hand).{extra}",
            "tests": [
                {"name": p.name, "score": p.score, "max_score": p.max_score,
                 "status": "passed" if p.passed else "failed", "output": p.output,
                 "extra_data": {"first_problem": _bounded(p.first_problem, MAX_PROBLEM_CHARS)}}
                for p in self.parts
            ],
            "extra_data": {"isolation": self.isolation,
                           "timings": {k: round(v, 3) for k, v in self.timings.items()}},
        }

    def to_text(self) -> str:
        lines = [f"{self.assignment} — {self.submission}",
                 f"score: {self.score:g} / {self.max_score:g} (auto-graded parts)"]
        for problem in self.problems:
            lines.append("! " + _bounded(problem, MAX_PROBLEM_CHARS))
        if self.isolation:
            lines.append(f"isolation: {self.isolation}")
        lines += ["", *(p.output for p in self.parts)]
        return "\n".join(lines)
