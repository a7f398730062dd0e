"""The results model on hand-built results: scores, what a student reads, and the one pair of
functions every consumer reads and writes it with (no grading runs here)."""
from __future__ import annotations

import json
import os

import pytest

from assignments.contract import CHECKS, Case, CaseResult, Problem
from assignments.hlo import ArrayShape, Collective, ProgramAnalysis
from graders.results import (MAX_OUTPUT_CHARS, Check, Failure, PartResult, Provenance, ResultsUnreadable,
                             SubmissionResult, bounded, read_results, write_results)

CASE = Case((2, 4), {"S": 16, "D": 8}, {"shift": 3})
PERMUTE = Collective("collective-permute", ("Y",), (ArrayShape("f32", (4, 4)),), (ArrayShape("f32", (4, 4)),),
                     3, 4, shifts=(3,), name="cp.1", pairs=((0, 3), (1, 0), (2, 1), (3, 2)))
ANALYSIS = ProgramAnalysis((PERMUTE,), (), 128, 8, mesh_shape=(2, 4), axis_names=("X", "Y"))


def problem(message: str, rule: str = "V005") -> Problem:
    """A problem of a check of the kit's (`CHECKS`) or of a rule (`RULES`), by its id."""
    return CHECKS[rule].problem(message) if rule in CHECKS else Problem(rule, message, "communication")


def case(values_ok=True, rule_ok=True, problems=(), analysis=None, ran=True) -> CaseResult:
    return CaseResult(CASE, values_ok, rule_ok, [problem(p) if isinstance(p, str) else p for p in problems],
                      analysis, ran=ran)


def test_half_the_points_for_values_half_for_the_rule_where_values_are_right():
    """Does a case earn half for right values and the other half only with the rule too, and
    does a custom check take its points out of the function's total?"""
    part = PartResult("roll_diff", 2, [case(), case(rule_ok=False), case(values_ok=False, rule_ok=True),
                                       case(values_ok=False, rule_ok=False)])
    assert part.score == pytest.approx(2 * (1 + 0.5 + 0 + 0) / 4)
    part.checks = [Check("test_x", "roll_diff", 1, passed=False, message="nope")]
    assert part.score == round(1 * 1.5 / 4, 2)  # rounded to cents
    assert part.first_problem == ""  # the failing cases say nothing; the check does not come first
    assert not PartResult("f", 2, []).score


def test_output_says_what_failed_bounded_and_cut_at_a_word():
    """Is a part's output bounded, cut between words and saying how much was cut, whatever a
    submission raises?"""
    long = "word " * 5000
    part = PartResult("f", 2, [case(values_ok=False, problems=[f"{i} {long}"]) for i in range(10)])
    assert len(part.output) <= MAX_OUTPUT_CHARS
    assert "more failing case(s)" in part.output
    cut = bounded("alpha beta gamma delta " * 100, 200)
    assert len(cut) <= 200 and "more characters cut)" in cut
    assert cut.split(" ... (")[0].endswith(("alpha", "beta", "gamma", "delta"))


def test_the_whole_result_round_trips_through_results_json(tmp_path):
    """Does `write_results` put Gradescope's fields and the whole object in results.json, and
    `read_results` give back an equal object, analyses, failure and provenance included?"""
    result = SubmissionResult("problem1", "alice.py",
                              [PartResult("roll_diff", 2, [case(analysis=ANALYSIS), case(False, False, ["values wrong"], ran=False)],
                                          note="n", checks=[Check("c", "roll_diff", 1, True, "d", "")])],
                              problems=[problem("cell 3 raised", "E004")], timings={"export": 1.5}, isolation="bubblewrap",
                              provenance=Provenance("alice", "/x/alice.py", "abc", "graded alice.py", "2026-01-01", None),
                              execution_time=3.25)
    path = tmp_path / "results.json"
    write_results(str(path), result, {"roll_diff": "after_published"})
    data = json.loads(path.read_text())
    assert data["score"] == result.score and data["tests"][0]["visibility"] == "after_published"
    assert data["tests"][0]["output"] == result.parts[0].output
    # Students read the top-level output whatever the tests' visibility: no total that would
    # give away the hidden function's score (it says so when nothing is hidden).
    assert f"{result.score:g}/" not in data["output"] and "others are not shown here" in data["output"]
    assert f"{result.score:g}/{result.max_score:g} points" in result.to_gradescope({})["output"]
    back = read_results(str(path))
    assert back == result
    assert back.parts[0].cases[0].analysis.collectives[0].pairs == PERMUTE.pairs


def test_a_submission_that_could_not_be_graded_has_one_shape():
    """Is a failure a SubmissionResult with every function at 0 saying why, whose fault it was?"""
    failed = SubmissionResult.failed("problem1", "bob.py", "the graders crashed", graders_fault=True)
    assert failed.score == 0 and [p.note for p in failed.parts] == ["the graders crashed"] * 5
    assert failed.failure == Failure("the graders crashed", True)
    assert SubmissionResult.from_json(failed.to_json()) == failed
    only = SubmissionResult.failed("problem1", "b.py", "a link", graders_fault=False, only=["roll_diff"])
    assert [p.name for p in only.parts] == ["roll_diff"] and not only.failure.graders_fault


def test_damaged_foreign_or_old_results_are_refused(tmp_path):
    """Is a missing, damaged, foreign (not the kit's) or other-version results.json refused
    with ResultsUnreadable, never read as a grade?"""
    path = tmp_path / "results.json"
    with pytest.raises(ResultsUnreadable, match="no results"):
        read_results(str(path))
    path.write_text('{"score": 11, "tests": [')
    with pytest.raises(ResultsUnreadable, match="not readable JSON"):
        read_results(str(path))
    path.write_text('{"score": 10, "tests": []}')
    with pytest.raises(ResultsUnreadable, match="not written by the kit"):
        read_results(str(path))
    data = SubmissionResult.failed("problem1", "a", "x", graders_fault=False).to_json()
    path.write_text(json.dumps({"extra_data": {"kit": {**data, "version": 0}}}))
    with pytest.raises(ResultsUnreadable, match="another version"):
        read_results(str(path))
    path.write_text(json.dumps({"extra_data": {"kit": {**data, "parts": [{"name": 3}]}}}))
    with pytest.raises(ResultsUnreadable, match="damaged"):
        read_results(str(path))


def test_a_missing_shard_map_shown_on_one_mesh_counts_on_every_mesh():
    """A shard_map manual over one-device axes leaves no trace, so the style is judged only on
    meshes whose axes all have two devices or more. Is a program shown there to lack its
    shard_map refused on the other meshes too, while a part that shows it keeps them?"""
    from assignments.contract import style_on_every_mesh
    from assignments.contracts import get_assignment

    part = get_assignment("problem1").part("shard_average_shard_map")
    missing = "shard_average_shard_map must be written with jax.shard_map, but the program has none."
    lacking = [CaseResult(Case((2, 4), {}), True, False, [Problem("S002", missing, "style")]),
               CaseResult(Case((1, 8), {}), True, True, [])]
    judged, carried = style_on_every_mesh(part, lacking)
    assert judged is lacking[0] and not carried.rule_ok
    assert carried.problems == [problem(missing + " (seen on the 2x4 mesh: a mesh with a one-device axis cannot "
                                                  "show it)", "P002")]
    shown = [CaseResult(Case((2, 4), {}), True, True, []), CaseResult(Case((1, 8), {}), True, True, [])]
    assert style_on_every_mesh(part, shown) == shown
    jit_part = get_assignment("problem1").part("shard_average_jit")
    assert style_on_every_mesh(jit_part, lacking) == lacking


def test_a_case_any_constant_answers_counts_only_beside_one_that_depends_on_the_inputs():
    """roll_diff's answer at a shift that is a whole number of a shard's rows is all zeros, and a
    normalization over one row is all ones, whatever the inputs hold. Are exactly those hidden
    cases found (two draws of the inputs), and are right values there counted only when some
    case whose answer depends on the inputs is right too?"""
    from assignments.contract import NEEDS_AN_INPUT_CASE, answer_is_constant, counted_where_answers_depend
    from assignments.contracts import get_assignment
    from graders.hidden import hidden_cases

    # The parts whose hidden cases include constant answers today (a new part may add its own).
    parts = {("problem1", "roll_diff"), ("problem1", "block_average_jit"), ("warmup", "normalized_convolution"),
             ("warmup", "total_sum"), ("problem3", "allgather_matmul")}
    constant = {(a, name, c.label) for a, name in parts
                for c in hidden_cases(get_assignment(a))[name]
                if answer_is_constant(get_assignment(a), get_assignment(a).part(name), c)}
    assert constant == {("problem1", "roll_diff", "mesh 2x4, S=16, D=8, shift=0"),
                        ("problem1", "roll_diff", "mesh 1x8, S=5, D=16, shift=0"),
                        ("problem1", "roll_diff", "mesh 2x2, S=6, D=10, shift=6"),
                        ("warmup", "normalized_convolution", "mesh 1x1, N=1, L=15, Lc=13")}

    right, wrong = case(), case(values_ok=False, problems=["values wrong"])
    only_where_constant = counted_where_answers_depend([right, wrong, right], [True, False, True])
    assert [c.values_ok for c in only_where_constant] == [False, False, False]
    assert only_where_constant[0].problems == [problem(NEEDS_AN_INPUT_CASE, "P001")] and only_where_constant[1] is wrong
    assert PartResult("roll_diff", 2, only_where_constant).score == 0
    beside_a_right_one = [right, right, wrong]
    assert counted_where_answers_depend(beside_a_right_one, [True, False, False]) == beside_a_right_one
    assert counted_where_answers_depend([right, wrong], [True, True]) == [right, wrong]  # nothing to lean on


def test_a_student_named_after_a_class_file_keeps_both(tmp_path):
    """Does a student named `report.html` or `gradebook.csv` (or with the escape's own suffix)
    get a results folder of their own, read back under their name, leaving the class's files
    their places, with no two students sharing a folder?"""
    from graders.class_results import _student_folders
    from graders.results import GRADEBOOK_CSV, REPORT_PAGE, results_path

    students = ["alice", REPORT_PAGE, GRADEBOOK_CSV, REPORT_PAGE + ".student", "bob.student"]
    paths = [results_path(str(tmp_path), s) for s in students]
    assert len(set(paths)) == len(students)
    assert os.path.dirname(paths[1]) != str(tmp_path / REPORT_PAGE)
    assert os.path.dirname(paths[2]) != str(tmp_path / GRADEBOOK_CSV)
    for student, path in zip(students, paths):
        os.makedirs(os.path.dirname(path))
        open(path, "w").close()
    (tmp_path / REPORT_PAGE).write_text("<html>")
    assert sorted(s for s, _ in _student_folders(str(tmp_path))[0]) == sorted(students)


def test_an_archivers_hidden_files_are_not_the_submission(tmp_path):
    """Is the notebook graded from a macOS zip the student's, not `__MACOSX/._name.ipynb` or
    a hidden `._name.ipynb` beside it?"""
    from graders.gradescope import find_submission

    for name in ("__MACOSX/._problem1 (1).ipynb", "._problem1 (1).ipynb", "problem1 (1).ipynb"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("{}")
    path, note = find_submission(str(tmp_path), "problem1")
    assert os.path.basename(path) == "problem1 (1).ipynb" and note == ""


ADVICE = ("Every output element depends only on data the device already holds, so nothing needs to move. "
          "Try: roll inside each shard, not the global array.")


BY_WORDS = {"values wrong": "V005", "communication observed": "C001", "not implemented": "E001"}
"""The check or rule behind each message these tests write, by its first words."""


def _case_at(shift: int, problems: list[str], **verdict) -> CaseResult:
    typed = [problem(p, next(rule for words, rule in BY_WORDS.items() if p.startswith(words))) for p in problems]
    return CaseResult(Case((2, 4), {"S": 16, "D": 8}, {"shift": shift}), verdict.get("values_ok", False),
                      verdict.get("rule_ok", False), typed, None)


def test_a_functions_advice_is_said_once():
    """Is the advice failing cases of a function share (the rule's why and what to try) said
    once, on the first case it fits, each later case keeping what was observed on it and its
    own notes, with no sentence glued to the next with ".;"? Does the class report's example
    keep what was observed only?"""
    cases = [_case_at(shift, [f"values wrong: some elements differ; to see them, run check(roll_diff, "
                              f"case='shift={shift}') (this case, on inputs you can see). A note on shift {shift}.",
                              f"communication observed: collective-permute over X of f32[{shift},2] ({8 * shift} "
                              f"bytes) x1; allowed: none. {ADVICE}"]) for shift in (1, 2, 3)]
    part = PartResult("roll_diff", 2, cases)
    out = part.output
    assert out.count("Try: roll inside each shard") == 1, out
    lines = out.splitlines()
    assert lines[1].endswith(f"C001 communication observed: collective-permute over X of f32[1,2] (8 bytes) x1; "
                             f"allowed: none. {ADVICE}"), out
    for shift, line in zip((2, 3), lines[2:]):
        assert line == (f"  - [mesh 2x4, S=16, D=8, shift={shift}] V005 values wrong: some elements differ; to see "
                        f"them, run check(roll_diff, case='shift={shift}') (this case, on inputs you can see). A note "
                        f"on shift {shift}. C001 communication observed: collective-permute over X of f32[{shift},2] "
                        f"({8 * shift} bytes) x1; allowed: none."), out
    assert ".;" not in out and ".;" not in part.first_problem
    assert part.first_problem.endswith(ADVICE) and "Try:" not in part.first_observed
    assert part.first_observed == ("values wrong: some elements differ; to see them, run check(roll_diff, "
                                   "case='shift=1') (this case, on inputs you can see). communication observed: "
                                   "collective-permute over X of f32[1,2] (8 bytes) x1; allowed: none.")


def test_a_lone_failing_case_keeps_its_advice():
    """With one failing case its advice stays with it, and problems that end in a full stop are
    not followed by a stray ";"."""
    part = PartResult("roll_diff", 2, [_case_at(11, ["values wrong: most elements differ. Reduce the shift first.",
                                                     f"communication observed: none; allowed: none. {ADVICE}"]),
                                       _case_at(3, [], values_ok=True, rule_ok=True)])
    out = part.output
    assert out.count("Try: roll inside each shard") == 1 and ".;" not in out and ".;" not in part.first_problem
    assert part.first_problem == ("V005 values wrong: most elements differ. Reduce the shift first. "
                                  f"C001 communication observed: none; allowed: none. {ADVICE}")


def test_while_running_problems_end_as_sentences():
    """Are the problems met while running a submission joined as sentences, not with ".;"?"""
    result = SubmissionResult("problem1", "s.py", [], problems=[problem("cell 3 failed.", "E004"),
                                                                problem("cell 4 failed", "E004")])
    assert "cell 3 failed. cell 4 failed." in result.to_gradescope()["output"]


def test_the_same_words_on_every_failing_case_are_said_once():
    """A function that says the same on every case (not implemented yet) says it once, for all
    of them, not once per case and "... and 6 more"."""
    part = PartResult("roll_diff", 2, [_case_at(shift, ["not implemented (the function raises NotImplementedError)"])
                                       for shift in range(10)])
    assert part.output.splitlines()[1:] == [
        "  - [all 10 cases] E001 not implemented (the function raises NotImplementedError)."]
    part.cases.append(_case_at(3, [], values_ok=True, rule_ok=True))
    assert "  - [all 10 failing cases] E001 not implemented" in part.output
