"""Grading results: small dataclasses, one object from the grader to every consumer.

`SubmissionResult` is what a grading makes; it crosses every process boundary as itself:
`write_results` puts it in `results.json` (Gradescope's format, with the whole object, versioned,
under `extra_data.kit`), and `read_results` gives the same object back, for the batch, nbgrader,
Gradescope, the demo and the class report. A submission that could not be graded at all is a
`SubmissionResult` too, with its `failure` set (like Otter's catastrophic error): one shape
everywhere.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re

from assignments.contract import CHECKS, Case, CaseResult, Problem

VERSION = 2
"""Bumped whenever the JSON form changes shape; `read_results` refuses another version."""
VALUES_WEIGHT = 0.5
"""Share of a part's points for right values (shape, dtype, sharding, numbers) per case;
the rest is for meeting the communication rule, counted only where the values are right."""
MAX_CASES_SHOWN = 4
"""Failing cases listed in a part's output; the rest are counted."""
MAX_PROBLEM_CHARS = 1200
"""Characters of one problem shown (messages quote student code and errors)."""
MAX_OUTPUT_CHARS = 6000
"""Characters of one part's output: feedback has a bounded size whatever a submission does."""


RESULTS = "results.json"
GRADEBOOK_CSV = "gradebook.csv"
"""graders.batch's class gradebook, beside the students' folders."""
REPORT_PAGE = "report.html"
"""graders.report's page, beside the students' folders (by default)."""
_ESCAPED = ".student"


def results_path(folder: str, student: str) -> str:
    """Where a student's results.json lies in a class's results folder (`graded/<assignment>`):
    `<folder>/<student>/results.json`, unless the name is one of the class's own files
    (`GRADEBOOK_CSV`, `REPORT_PAGE`): a student named `report.html` must not take the report's
    place. Such a name, and any that ends in `.student` (so that no two students share a
    folder), has `.student` added; `student_of_folder` reads it back."""
    name = student + _ESCAPED if student in (GRADEBOOK_CSV, REPORT_PAGE) or student.endswith(_ESCAPED) else student
    return os.path.join(folder, name, RESULTS)


def student_of_folder(name: str) -> str:
    """The student whose results a folder of a class's results folder holds (`results_path`)."""
    return name.removesuffix(_ESCAPED)


class ResultsUnreadable(ValueError):
    """A results.json that is missing, damaged, or of another version."""


def bounded(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, at a word boundary, saying so."""
    if len(text) <= limit:
        return text
    cut = text[:limit - 30].rsplit(" ", 1)[0]
    return cut + f" ... ({len(text) - len(cut)} more characters cut)"


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
"""Where one sentence of a message ends and the next begins (". Try: ...", ". Every ...")."""


def full_stop(text: str) -> str:
    """`text` ending as a sentence does (problems are written without their last full stop)."""
    text = text.strip()
    return text if not text or text.endswith((".", "!", "?")) else text + "."


def observed_and_advice(problem: str) -> tuple[str, str]:
    """A problem's first sentence (what was observed on the case) and the rest (why, and what
    to try: the same words on every case the problem is met on), "" when there is no rest."""
    parts = _SENTENCE.split(problem.strip(), maxsplit=1)
    return parts[0], parts[1] if len(parts) > 1 else ""


def named(problem: Problem, text: str | None = None) -> str:
    """A problem as a student reads it: the id of the rule or check that found it first (as
    ruff prints "F401 ..."), which `python -m assignments.rules ID` and `explain("ID")` explain."""
    return f"{problem.rule} {full_stop(problem.message if text is None else text)}"


def case_text(problems: list[Problem], said: set[str] | None = None, limit: int = MAX_PROBLEM_CHARS) -> str:
    """A case's problems as sentences on one line (never glued with ".;"), each led by its rule's
    id. Advice already in `said` (given on an earlier case of the function) is not repeated: only
    what was observed is kept. The advice given here, whole within the `limit` the line is cut to
    (`bounded`), is added to `said`."""
    pieces = []
    for problem in problems:
        observed, advice = observed_and_advice(problem.message)
        if said is not None and advice and advice in said:
            pieces.append(named(problem, observed))
            continue
        pieces.append(named(problem))
        if said is not None and advice and len(" ".join(pieces)) <= limit - 30:
            said.add(advice)
    return " ".join(pieces)


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
        failing = [c for c in self.cases if not c.passed]
        if failing:
            return case_text(failing[0].problems)
        failed_checks = [c for c in self.checks if not c.passed]
        return f"check {failed_checks[0].name}: {failed_checks[0].message}" if failed_checks else ""

    @property
    def first_rule(self) -> str:
        """The id of the rule or check behind `first_problem`: T001 for an instructor's failed
        check, "" for a note on the whole submission (its problems have the ids)."""
        failing = [c for c in self.cases if not c.passed]
        if self.note:
            return ""
        if failing:
            return failing[0].problems[0].rule if failing[0].problems else ""
        return "T001" if any(not c.passed for c in self.checks) else ""

    @property
    def first_observed(self) -> str:
        """`first_problem` without its advice (what was observed only): the class report's
        example of a kind, where every student of the function read the same advice."""
        failing = [c for c in self.cases if not c.passed]
        if self.note or not failing:
            return self.first_problem
        return " ".join(full_stop(observed_and_advice(p.message)[0]) for p in failing[0].problems)

    @property
    def output(self) -> str:
        """What the student may read: which cases failed and why (no hidden inputs)."""
        if not self.cases:  # never graded: the note says why
            return bounded(f"{self.name}: 0/{self.max_score:g} points: {self.note}", MAX_OUTPUT_CHARS)
        ok = sum(c.passed for c in self.cases)
        values = sum(c.values_ok for c in self.cases)
        rule = sum(c.values_ok and c.rule_ok for c in self.cases)
        lines = [f"{self.name}: {self.score:g}/{self.max_score:g} points; {ok} of {len(self.cases)} "
                 f"cases fully right (values right in {values}, values and communication right in {rule})."]
        if self.note:
            lines.append("  note: " + bounded(self.note, MAX_PROBLEM_CHARS))
        for check in self.checks:
            if not check.passed:
                lines.append(f"  - check {check.name} ({check.points:g} point(s)): "
                             + bounded(f"{check.description} {check.message}".strip(), MAX_PROBLEM_CHARS))
        failing = [c for c in self.cases if not c.passed]
        whole = [case_text(c.problems) or "failed." for c in failing]
        if len(failing) > 1 and all(text == whole[0] for text in whole):  # the same words on every case: once
            every = (f"all {len(failing)} cases" if len(failing) == len(self.cases)
                     else f"all {len(failing)} failing cases")
            lines.append(f"  - [{every}] " + bounded(whole[0], MAX_PROBLEM_CHARS))
        else:
            said: set[str] = set()  # advice given once for the function, on the first case it fits
            for c in failing[:MAX_CASES_SHOWN]:
                lines.append(f"  - [{c.case.label}] " + bounded(case_text(c.problems, said) or "failed.",
                                                                MAX_PROBLEM_CHARS))
            if len(failing) > MAX_CASES_SHOWN:
                lines.append(f"  - ... and {len(failing) - MAX_CASES_SHOWN} more failing case(s)")
        return bounded("\n".join(lines), MAX_OUTPUT_CHARS)


@dataclasses.dataclass
class Failure:
    """Why a submission could not be graded at all (every function then scores 0)."""

    message: str
    graders_fault: bool
    """True: the graders failed (rerun them); False: the submission itself (e.g. no file, or
    a link instead of a file)."""


@dataclasses.dataclass
class Provenance:
    """Which file was graded, for whom (the batch's bookkeeping; empty for a single run)."""

    student: str = ""
    path: str = ""
    sha256: str = ""
    note: str = ""
    """Why this file was chosen, when there was a choice."""
    graded_at: str = ""
    only: list[str] | None = None
    """The functions graded, when not all."""


@dataclasses.dataclass
class SubmissionResult:
    """The verdict on one submission of one assignment."""

    assignment: str
    submission: str
    parts: list[PartResult]
    problems: list[Problem] = dataclasses.field(default_factory=list)
    """Problems met while running the submission (failed cells, syntax errors, ...)."""
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    """Seconds spent per phase (export, compile, run, ...)."""
    isolation: str = ""
    """Which sandbox the submission's code ran in (`graders.sandbox.Isolation.note`)."""
    failure: Failure | None = None
    """Set when the submission could not be graded at all."""
    provenance: Provenance = dataclasses.field(default_factory=Provenance)
    execution_time: float = 0.0
    """Seconds the whole grading took, as its caller measured it."""

    @classmethod
    def failed(cls, assignment: str, submission: str, message: str, *, graders_fault: bool,
               only: list[str] | None = None) -> "SubmissionResult":
        """Zero for every graded function, each saying `message`."""
        from assignments.contracts import get_assignment

        parts = [PartResult(p.name, p.points, [], note=message)
                 for p in get_assignment(assignment).parts if not only or p.name in only]
        problem = CHECKS["E005" if graders_fault else "E004"].problem(message)
        return cls(assignment, submission, parts, [problem], failure=Failure(message, graders_fault))

    @property
    def messages(self) -> list[str]:
        """The messages of the problems met while running the submission, in order."""
        return [p.message for p in self.problems]

    @property
    def score(self) -> float:
        return round(sum(p.score for p in self.parts), 2)

    @property
    def max_score(self) -> float:
        return sum(p.max_score for p in self.parts)

    def part(self, name: str) -> PartResult:
        return next(p for p in self.parts if p.name == name)

    def to_text(self) -> str:
        lines = [f"{self.assignment} — {self.submission}",
                 f"score: {self.score:g} / {self.max_score:g} (auto-graded parts)"]
        for problem in self.problems:
            lines.append("! " + bounded(full_stop(problem.message), MAX_PROBLEM_CHARS))
        if self.isolation:
            lines.append(f"isolation: {self.isolation}")
        lines += ["", *(p.output for p in self.parts)]
        return "\n".join(lines)

    def to_gradescope(self, visibility: dict[str, str] | None = None) -> dict:
        """Gradescope's results.json fields (what a student may read is in `output`)."""
        extra = ("\n\nWhile running your submission: " +
                 bounded(" ".join(full_stop(p.message) for p in self.problems), MAX_OUTPUT_CHARS)) if self.problems else ""
        if self.provenance.note:
            extra += f"\n\nNote: {full_stop(self.provenance.note)}"
        tests = []
        for p in self.parts:
            test = {"name": p.name, "score": p.score, "max_score": p.max_score,
                    "status": "passed" if p.passed else "failed", "output": p.output}
            if visibility is not None:
                test["visibility"] = visibility.get(p.name, "visible")
            tests.append(test)
        # The top-level output is shown to students whatever a test's visibility: a total
        # would tell them the score of the functions the instructor hides.
        hiding = any(t.get("visibility", "visible") != "visible" for t in tests)
        total = ("scores of the functions shown below (others are not shown here)" if hiding
                 else f"{self.score:g}/{self.max_score:g} points")
        return {"score": self.score, "execution_time": round(self.execution_time, 2),
                "stdout_visibility": "hidden",  # grading logs are for the instructor
                "output": f"{self.assignment}: {total} from the hidden graders (written answers are "
                          f"graded by hand).{extra}",
                "tests": tests}

    def to_json(self) -> dict:
        """The whole object as JSON (`from_json` reads it back)."""
        data = dataclasses.asdict(self)
        for part, original in zip(data["parts"], self.parts):
            part["cases"] = [_case_to_json(c) for c in original.cases]
        return {"version": VERSION, **data}

    @classmethod
    def from_json(cls, data: dict) -> "SubmissionResult":
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ResultsUnreadable(f"results of another version ({data.get('version') if isinstance(data, dict) else '?'}); "
                                    f"this kit reads version {VERSION}: regrade")
        try:
            parts = [PartResult(p["name"], float(p["max_score"]), [_case_from_json(c) for c in p["cases"]],
                                p.get("note", ""), [Check(**c) for c in p.get("checks", [])])
                     for p in data["parts"]]
            failure = Failure(**data["failure"]) if data.get("failure") else None
            return cls(data["assignment"], data["submission"], parts,
                       [Problem.from_json(p) for p in data.get("problems", [])],
                       dict(data.get("timings", {})), data.get("isolation", ""), failure,
                       Provenance(**data.get("provenance", {})), float(data.get("execution_time", 0.0)))
        except (KeyError, TypeError, ValueError) as e:
            raise ResultsUnreadable(f"damaged results ({type(e).__name__}: {e})") from None


def _case_to_json(c: CaseResult) -> dict:
    return {"case": c.case.to_json(), "values_ok": c.values_ok, "rule_ok": c.rule_ok,
            "problems": [p.to_json() for p in c.problems], "ran": c.ran,
            "analysis": None if c.analysis is None else c.analysis.to_json()}


def _case_from_json(data: dict) -> CaseResult:
    from assignments.hlo import ProgramAnalysis

    case = Case(tuple(data["case"]["mesh"]), dict(data["case"]["sizes"]), dict(data["case"]["statics"]))
    analysis = None if data.get("analysis") is None else ProgramAnalysis.from_json(data["analysis"])
    return CaseResult(case, bool(data["values_ok"]), bool(data["rule_ok"]),
                      [Problem.from_json(p) for p in data["problems"]],
                      analysis, ran=bool(data.get("ran", True)))


# --- on disk -------------------------------------------------------------------------------


def write_results(path: str, result: SubmissionResult, visibility: dict[str, str] | None = None) -> None:
    """`result` as `results.json` at `path`, atomically: Gradescope's fields, and the whole
    object under `extra_data.kit`."""
    from .files import write_atomic

    data = result.to_gradescope(visibility)
    data["extra_data"] = {"kit": result.to_json()}
    write_atomic(path, json.dumps(data, indent=1))


def read_results(path: str) -> SubmissionResult:
    """The `SubmissionResult` a `results.json` holds; `ResultsUnreadable` if it holds none."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ResultsUnreadable(f"no results at {path}") from None
    except (OSError, ValueError) as e:
        raise ResultsUnreadable(f"{path} is not readable JSON ({e})") from None
    kit = (data.get("extra_data") or {}).get("kit") if isinstance(data, dict) else None
    if kit is None:
        raise ResultsUnreadable(f"{path} was not written by the kit's graders")
    return SubmissionResult.from_json(kit)
