"""A graded class, read from its results.json files alone: scores, the rule each student broke
first in each function, and the communication each program compiled to (for `graders.report`).

It reads what both grading routes leave, one `results.json` per student:
`graders.batch` writes `OUT/<student>/results.json`, nbgrader's autograde (the kit's
`FillGradeCells`) `<course>/graded/<assignment>/<student>/results.json`. Nothing is regraded
and no student code runs. Problems are counted by the id of the rule or check that found them
(every problem is a typed record, `assignments.contract.Problem`), never by their wording;
patterns come from the compiled programs' analyses (`assignments.hlo.ProgramAnalysis`).
Messages never hold a hidden input, and nothing here adds one.
"""
from __future__ import annotations

import collections
import dataclasses
import os
import re
import statistics

from assignments.contract import CaseResult
from assignments.hlo import ProgramAnalysis
from assignments.rulebook import rule_title
from assignments.rules import axes_label

from .results import RESULTS, PartResult, ResultsUnreadable, SubmissionResult, read_results, student_of_folder

WHOLE = "the whole submission"
"""The function column of a problem that stopped every function (a syntax error, a refusal)."""
NO_PROGRAM = "no compiled program"
"""The pattern of a function none of whose cases compiled."""
NO_COMMUNICATION = "no communication"
MAX_MESSAGE = 240
"""Characters of a message shown as an example of its kind."""


class NoResults(Exception):
    """A folder with no readable results.json (its message says what was looked for)."""


@dataclasses.dataclass(frozen=True)
class Graded:
    """One student's readable results."""

    student: str
    """The student's folder name (as the batch or nbgrader named it)."""
    path: str
    """Its results.json."""
    result: SubmissionResult


@dataclasses.dataclass(frozen=True)
class Unread:
    """A student folder whose results could not be used, and why."""

    student: str
    path: str
    why: str


@dataclasses.dataclass
class ClassResults:
    """Every student of one assignment found in a results folder."""

    folder: str
    assignment: str
    title: str
    graded: list[Graded]
    unread: list[Unread]
    functions: list[tuple[str, float]]
    """(graded function, points), in the contract's order."""
    rules: dict[str, str] = dataclasses.field(default_factory=dict)
    """Each graded function's communication rule, in words (from its contract)."""


# --- reading a folder ----------------------------------------------------------------------------


def _student_folders(folder: str) -> tuple[list[tuple[str, str]], list[Unread]]:
    """(student, results.json) of every student folder, and the entries that are not one."""
    found, unread = [], []
    with os.scandir(folder) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            path = os.path.join(entry.path, RESULTS)
            if entry.is_symlink():
                unread.append(Unread(entry.name, path, "a link, not a folder the graders wrote: not read"))
            elif entry.is_dir(follow_symlinks=False) and os.path.lexists(path):  # else not a student's
                found.append((student_of_folder(entry.name), path))
    return found, unread


def read_class(folder: str) -> ClassResults:
    """The class whose results lie in `folder` (`<folder>/<student>/results.json`). A damaged
    or foreign file is listed in `unread`; results of another assignment than most are too.
    Raises `NoResults` when there is not one readable result."""
    from assignments.contracts import ASSIGNMENTS

    if not os.path.isdir(folder):
        raise NoResults(f"no folder at {folder}: pass the folder graders.batch wrote (graded/<assignment>) "
                        f"or nbgrader's <course>/graded/<assignment>")
    folders, unread = _student_folders(folder)
    graded = []
    for student, path in folders:
        try:
            graded.append(Graded(student, path, read_results(path)))
        except ResultsUnreadable as e:
            unread.append(Unread(student, path, str(e)))
    if not graded:
        raise NoResults(_nothing_found(folder, unread))
    assignment = collections.Counter(g.result.assignment for g in graded).most_common(1)[0][0]
    unread += [Unread(g.student, g.path, f"results of {g.result.assignment}, not {assignment}")
               for g in graded if g.result.assignment != assignment]
    graded = [g for g in graded if g.result.assignment == assignment]
    contract = ASSIGNMENTS.get(assignment)
    order = [p.name for p in contract.parts] if contract else []
    points = {p.name: p.max_score for g in graded for p in g.result.parts}
    names = [n for n in order if n in points] + sorted(set(points) - set(order))
    rules = {p.name: p.rule.describe() for p in contract.parts} if contract else {}
    return ClassResults(folder, assignment, contract.title if contract else assignment, graded,
                        sorted(unread, key=lambda u: u.student), [(n, points[n]) for n in names], rules)


def _nothing_found(folder: str, unread: list[Unread]) -> str:
    where = (f"no results.json in {folder} (looked for {folder}/<student>/{RESULTS}: the folder "
             f"graders.batch writes, or nbgrader's <course>/graded/<assignment> after autograde)")
    if unread:
        return f"{where}; {len(unread)} unreadable, e.g. {unread[0].student}: {unread[0].why}"
    inside = os.path.join(folder, "graded")
    if os.path.isdir(inside):
        assignments = ", ".join(sorted(os.listdir(inside))[:8])
        return f"{where}; this looks like a course folder: pass {inside}/<assignment> ({assignments})"
    return where


# --- the kind of a problem -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FirstProblem:
    """The first thing that went wrong in one function of one submission."""

    function: str
    """The graded function, or `WHOLE`."""
    rule: str
    """The id of the rule or check that found it (`assignments.contract.Problem.rule`): the
    class report counts problems by it, never by their wording."""
    message: str
    """The first line of what the student read (bounded)."""

    @property
    def kind(self) -> str:
        """The rule as the report names it: its id and name ("C001 no-communication")."""
        return f"{self.rule} {rule_title(self.rule)}"


def first_line(text: str, limit: int = MAX_MESSAGE) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[:limit - 1] + "\u2026"


def first_problems(result: SubmissionResult) -> list[FirstProblem]:
    """Each function's first problem; one problem of the whole submission instead when it
    could not be graded, or when one note (a syntax error, ...) stopped every function."""
    whole_rule = result.problems[0].rule if result.problems else "E004"
    if result.failure is not None:
        rule = "E005" if result.failure.graders_fault else whole_rule
        return [FirstProblem(WHOLE, rule, first_line(result.failure.message))]
    notes = {p.note for p in result.parts}
    if len(result.parts) > 1 and len(notes) == 1 and "" not in notes:
        return [FirstProblem(WHOLE, whole_rule, first_line(notes.pop()))]
    return [FirstProblem(p.name, p.first_rule or whole_rule, first_line(p.first_observed))
            for p in result.parts if not p.passed]


def problem_table(graded: list[Graded]) -> list[tuple[FirstProblem, list[str]]]:
    """(the rule broken first, in one function, with its first student's message; the students)
    per function and rule, most students first; ties by function and rule id, so the order never
    changes."""
    groups: dict[tuple[str, str], list[tuple[str, FirstProblem]]] = collections.defaultdict(list)
    for g in graded:
        for problem in first_problems(g.result):
            groups[(problem.function, problem.rule)].append((g.student, problem))
    rows = [(members[0][1], [student for student, _ in members]) for members in groups.values()]
    return sorted(rows, key=lambda row: (-len(row[1]), row[0].function, row[0].rule))


# --- communication patterns ------------------------------------------------------------------------

_KIND_NAMES = {"all-reduce": "all-reduce (psum)", "reduce-scatter": "reduce-scatter (psum_scatter)",
               "all-to-all": "all-to-all", "ragged-all-to-all": "ragged all-to-all",
               "all-gather": "all-gather", "collective-broadcast": "broadcast"}


def _ways(analysis: ProgramAnalysis) -> dict[str, set[bool]]:
    """Per axis of its collective-permutes, the ring directions one program takes (forward:
    True), on rings of 3 or more devices (on 2 the one neighbour is both ways)."""
    ways: dict[str, set[bool]] = {}
    for c in analysis.of_kind("collective-permute"):
        seen = ways.setdefault(axes_label(c), set())
        if c.group_size >= 3 and len(c.axes) == 1:
            seen |= {d > 0 for d in c.directions}
    return ways


def _permute_label(axes: str, most_ways: int) -> str:
    if "+" in axes or axes == "no axis":
        return f"collective-permutes over {axes}"
    way = {0: "", 1: " (one way)", 2: " (both ways)"}[most_ways]
    return f"ring of collective-permutes over {axes}{way}"


def _pattern_labels(analyses: list[ProgramAnalysis]) -> set[str]:
    """The parts of a pattern that these programs show together."""
    labels: set[str] = set()
    most_ways: dict[str, int] = {}
    for analysis in analyses:
        for axes, ways in _ways(analysis).items():
            most_ways[axes] = max(most_ways.get(axes, 0), len(ways))
        for c in analysis.collectives:
            if c.kind != "collective-permute":
                repeated = c.count is None or c.count > 1
                labels.add(f"{_KIND_NAMES.get(c.kind, c.kind)} over {axes_label(c)}"
                           + (" in a loop" if repeated else ""))
    return labels | {_permute_label(axes, n) for axes, n in most_ways.items()}


def communication_pattern(part: PartResult) -> str:
    """What a function's programs communicate over all its compiled cases, e.g. "ring of
    collective-permutes over Y (both ways)", "all-gather over X + all-reduce (psum) over Y",
    "all-to-all over X in a loop"; `NO_COMMUNICATION`, or `NO_PROGRAM` if none compiled.
    A ring goes both ways if one of its programs sends both ways along the axis."""
    analyses = [c.analysis for c in part.cases if c.analysis is not None]
    if not analyses:
        return NO_PROGRAM
    return " + ".join(sorted(_pattern_labels(analyses))) or NO_COMMUNICATION


def example_case(part: PartResult) -> CaseResult | None:
    """The case that shows a function's pattern best, to draw: the one that shows most of the
    pattern on its own, then the one with the most collectives, then the first."""
    cases = [c for c in part.cases if c.analysis is not None]
    whole = _pattern_labels([c.analysis for c in cases])

    def shows(item):
        index, case = item
        return len(_pattern_labels([case.analysis]) & whole), len(case.analysis.collectives), -index

    return max(enumerate(cases), key=shows)[1] if cases else None


def pattern_table(graded: list[Graded], function: str) -> list[tuple[str, list[Graded]]]:
    """(pattern, its students) for one function, most students first."""
    groups: dict[str, list[Graded]] = collections.defaultdict(list)
    for g in graded:
        part = next((p for p in g.result.parts if p.name == function), None)
        if part is not None:
            groups[communication_pattern(part)].append(g)
    return sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))


# --- scores and gradings -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FunctionScores:
    name: str
    points: float
    scores: list[float]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.scores) if self.scores else 0.0

    @property
    def median(self) -> float:
        return statistics.median(self.scores) if self.scores else 0.0

    @property
    def full(self) -> int:
        return sum(s >= self.points for s in self.scores)

    @property
    def zero(self) -> int:
        return sum(s == 0 for s in self.scores)


def function_scores(results: ClassResults) -> list[FunctionScores]:
    """Every graded function's scores over the students graded on it."""
    return [FunctionScores(name, points, [p.score for g in results.graded for p in g.result.parts if p.name == name])
            for name, points in results.functions]


def histogram(scores: list[float], points: float, bins: int = 4) -> list[int]:
    """Counts of `scores`: none, then `bins` equal shares of partial credit, then full marks."""
    counts = [0] * (bins + 2)
    for s in scores:
        share = s / points if points else 1.0
        counts[0 if s <= 0 else bins + 1 if share >= 1 else 1 + min(int(share * bins), bins - 1)] += 1
    return counts


def grading_seconds(result: SubmissionResult) -> float:
    """How long the grading took: as its caller measured it (the batch), else the export and
    judging the grader measured (nbgrader's autograde records no total)."""
    return result.execution_time or result.timings.get("export and judge (all)", 0.0)


def slowest_phase(result: SubmissionResult) -> str:
    """The phase that took longest (the totals left out), e.g. "judge: deserialize and compile 5.9 s"."""
    phases = {k: v for k, v in result.timings.items() if "(all)" not in k}
    if not phases:
        return ""
    name = max(sorted(phases), key=phases.get)
    return f"{name} {phases[name]:.1f} s"
