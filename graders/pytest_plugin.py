"""The hidden graders as pytest tests: fixtures, options and the results they add up to.

    python -m pytest graders/test_problem1.py --submission PATH [-k roll_diff] [-x] [--lf] [-v]

Each graded function is a test parametrized by its hidden cases (`case_test`), with readable
ids such as ``test_roll_diff[2x4-S16-D8-shift=-2]``. Student code never runs in the pytest
process: the first test that needs a verdict grades the submission once for the session
(`graders.harness.grade_submission`: sandboxed export and judge), restricted to the graded
functions the selected tests need, and every test reads its case from that result.

Instructors add checks as plain test functions with a `points` marker naming the graded
function whose points they share, e.g. ``@pytest.mark.points(1, part="moe_all_to_all")``;
the fixture `judged` gives each case's verdict (values, rule, problems) and compiled-program
analysis (collectives, loop trip counts, largest values, temporary memory). A check's
points come out of its function's total, and it counts in results.json, nbgrader and
Gradescope like the cases do (`graders.results.Check`).
"""
from __future__ import annotations

import os

import pytest

from assignments.contract import Case

from .results import Check, SubmissionResult, case_text


def case_label(case: Case) -> str:
    """A case as a test id: ``2x4-S16-D8-shift=-2``."""
    parts = [f"{case.mesh[0]}x{case.mesh[1]}", *(f"{k}{v}" for k, v in case.sizes.items()),
             *(f"{k}={v}" for k, v in case.statics.items())]
    return "-".join(parts)


def case_test(assignment: str, part: str):
    """The test of one graded function: one parametrized case per hidden case."""
    from .harness import selected_assignment
    from .hidden import hidden_cases

    cases = hidden_cases(selected_assignment(assignment, [part]))[part]

    @pytest.mark.graded(assignment=assignment, part=part)
    @pytest.mark.parametrize("index", range(len(cases)), ids=[case_label(c) for c in cases])
    def test(index, grading):
        result = grading.submission(assignment).part(part).cases[index]
        if not result.passed:
            pytest.fail(case_text(result.problems) or "failed", pytrace=False)

    test.__name__ = f"test_{part}"
    test.__doc__ = f"Does {part} give the right values, sharding and communication on this case?"
    return test


def case_tests(assignment: str) -> dict:
    """``{"test_<function>": case_test(...)}`` for every graded function of the contract."""
    from assignments.contracts import get_assignment

    return {f"test_{p.name}": case_test(assignment, p.name) for p in get_assignment(assignment).parts}


class Grading:
    """The session's grading: one sandboxed run per assignment, of the functions selected.
    What to grade, and with which limits, comes from `graders.run.grade` (a `GradingRequest`
    plugin object) or, on pytest's own command line, from `--submission` and the limit flags."""

    def __init__(self, config):
        self.config = config
        from .run import GradingRequest

        self.request = next((p for p in config.pluginmanager.get_plugins()
                             if isinstance(p, GradingRequest)), None)
        self.needed: dict[str, set[str]] = {}
        self.results: dict[str, SubmissionResult] = {}
        self.checks: list[Check] = []

    def submission(self, assignment: str) -> SubmissionResult:
        if assignment not in self.results:
            from assignments.contracts import get_assignment

            from .harness import grade_submission

            parts = [p.name for p in get_assignment(assignment).parts]
            only = [name for name in parts if name in self.needed.get(assignment, ())]
            only = None if len(only) == len(parts) else only
            if self.request is not None:
                r = self.request
                try:
                    result = grade_submission(r.submission, assignment, limits=r.limits, only=only,
                                              concurrent=r.concurrent, trusted_folder=r.trusted_folder,
                                              prepared=r.prepared)
                except Exception as e:  # the graders' own failure: `graders.run.grade` raises it
                    r.error = e
                    raise
                finally:
                    r.prepared = None  # used once: another assignment in the session prepares its own
            else:
                from .settings import from_arguments

                path = self.config.getoption("submission")
                if not path:
                    raise pytest.UsageError("the hidden graders need --submission PATH (a notebook or .py)")
                result = grade_submission(path, assignment, limits=from_arguments(self.config.option), only=only)
            self.results[assignment] = result
        return self.results[assignment]


def pytest_addoption(parser):
    group = parser.getgroup("graders", "the hidden graders")
    group.addoption("--submission", help="the student's notebook or .py module to grade")
    group.addoption("--results", help="write Gradescope-format results.json here")
    group.addoption("--only", action="append", default=[], metavar="FUNCTION",
                    help="grade only this graded function, with its custom checks (repeatable); "
                         "unlike -k, never a function whose name merely contains it")
    from .settings import add_arguments

    class Adder:  # argparse-style add_argument onto the pytest group
        @staticmethod
        def add_argument(*names, **kwargs):
            group.addoption(*names, **kwargs)

    add_arguments(Adder)


def pytest_configure(config):
    config.addinivalue_line("markers", "graded(assignment, part): the cases of a graded function")
    config.addinivalue_line("markers", "points(n, part): a custom check worth n of part's points")
    config.stash[GRADING] = Grading(config)


GRADING = pytest.StashKey[Grading]()


def _part_of(item) -> str | None:
    """The graded function a test is about: a case test's, or a custom check's `points` part."""
    for name in ("graded", "points"):
        mark = item.get_closest_marker(name)
        if mark is not None:
            return mark.kwargs.get("part")
    return None


def pytest_collection_modifyitems(config, items):
    """--only: keep the tests of the named functions (exact names)."""
    only = set(config.getoption("only") or ())
    if not only:
        return
    kept = [item for item in items if _part_of(item) in only]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept


def pytest_collection_finish(session):
    """Grade only the functions the selected tests need (so -k and --lf stay fast)."""
    grading = session.config.stash[GRADING]
    for item in session.items:
        for mark in item.iter_markers("graded"):
            grading.needed.setdefault(mark.kwargs["assignment"], set()).add(mark.kwargs["part"])
        for mark in item.iter_markers("points"):
            assignment = getattr(item.module, "ASSIGNMENT", None)
            if assignment:
                grading.needed.setdefault(assignment, set()).add(mark.kwargs["part"])


@pytest.fixture(scope="session")
def grading(request) -> Grading:
    return request.config.stash[GRADING]


@pytest.fixture
def judged(request, grading):
    """The judged cases of the function a custom check is about (its `points` marker's
    part): a list of `assignments.contract.CaseResult`, each with `.case` (mesh, sizes),
    `.values_ok`, `.rule_ok`, `.problems` and `.analysis` (`assignments.hlo.ProgramAnalysis`)."""
    mark = request.node.get_closest_marker("points")
    assignment = getattr(request.module, "ASSIGNMENT", None)
    if mark is None or assignment is None:
        raise pytest.UsageError("`judged` is for checks marked @pytest.mark.points(n, part=...) in "
                                "a module that sets ASSIGNMENT")
    return grading.submission(assignment).part(mark.kwargs["part"]).cases


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    mark = item.get_closest_marker("points")
    if mark is None or report.when != "call" and not (report.when == "setup" and report.failed):
        return
    message = "" if report.passed else str(report.longrepr.reprcrash.message if hasattr(
        report.longrepr, "reprcrash") and report.longrepr.reprcrash else report.longrepr)
    item.config.stash[GRADING].checks.append(
        Check(item.name, mark.kwargs["part"], float(mark.args[0]), report.passed,
              (item.function.__doc__ or "").strip().splitlines()[0] if item.function.__doc__ else "",
              message.splitlines()[0][:300] if message else ""))


def pytest_sessionfinish(session, exitstatus):
    """Fold the custom checks into their functions' results; hand the result to
    `graders.run.grade`, or write results.json (`--results`)."""
    grading = session.config.stash[GRADING]
    for result in grading.results.values():
        for check in grading.checks:
            if any(p.name == check.part for p in result.parts):
                result.part(check.part).checks.append(check)
    if grading.request is not None and grading.results:
        (grading.request.result,) = grading.results.values()
    path = session.config.getoption("results")
    if path and grading.results:
        from .results import write_results

        (result,) = grading.results.values()
        write_results(path, result)
    if exitstatus == pytest.ExitCode.TESTS_FAILED and os.environ.get("KIT_GRADERS_EXIT_ZERO"):
        session.exitstatus = pytest.ExitCode.OK  # failing cases are a grade, not an error
