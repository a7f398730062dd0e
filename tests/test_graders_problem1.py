"""The problem1 graders against a corpus of broken submissions.

Each file in `tests/submissions/problem1/` holds the functions it breaks, graded as an overlay
on the reference solution (`grading.overlay_text`; the few whose subject is the whole
submission are whole files, `grading.WHOLE_FILES`); most break ONE function, so each test checks
that exactly that function loses points (an exact score where the hidden cases make it
deterministic), that every other function keeps full marks, and that the student-visible
message (`PartResult.output`) says why. The files whose subject is a fault, a mistake or a
message are graded here, in this process, by the workers' own code (`grading.graded_here`),
once per session, with small limits (cells 3 s, cases 2 s), on both stacks; so are the files
of `tests/submissions/faults/` that a reader of files must survive (malformed notebooks,
deleted cells, binary files). The files whose subject is the sandbox (hangs, crashes, memory,
floods, forged events, tampering: `grading.SANDBOXED`) are graded by `graders.batch` in the
sandbox, and asserted on in test_batch_faults.py.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import nbformat
import pytest
from grading import (CORPUS, CORPUS_LIMITS, CORPUS_VERDICTS, FAULTS, JAX_FAULTS, SANDBOXED, assert_only_broken,
                     assert_verdict, corpus_files, failing_cases, graded, submission_file)

import assignments.evaluate
from assignments.contract import NEEDS_AN_INPUT_CASE
from assignments.contracts import get_assignment
from graders import Limits, SubmissionResult
from graders.samples import notebook_from

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLUTION_PY = os.path.join(REPO_ROOT, "solutions", "problem1.py")
SOLUTION_NB = os.path.join(REPO_ROOT, "solutions", "problem1", "problem1.ipynb")
RELEASE_NB = os.path.join(REPO_ROOT, "release", "problem1", "problem1.ipynb")

POINTS = {p.name: p.points for p in get_assignment("problem1").parts}
TOTAL = sum(POINTS.values())

FAST = Limits(cell_timeout=5, case_timeout=5, stall_timeout=20)
"""Small limits for the files graded here."""


@pytest.fixture(scope="module")
def grade():
    """grade(corpus name or path) -> its result, graded in this process once per session: a
    name is a file of the problem1 corpus (graded with the corpus's small limits), a path
    anything else (the notebooks made here, the solution's)."""
    def grade(submission: str) -> SubmissionResult:
        if os.sep not in submission:
            assert submission not in SANDBOXED, f"{submission} is graded by the batch (test_batch_faults.py)"
            return graded(os.path.join(CORPUS, submission + ".py"), "problem1", CORPUS_LIMITS, here=True)
        return graded(submission, "problem1", FAST, here=True)

    return grade


# --- right answers and the untouched stub -------------------------------------------------


@pytest.mark.parametrize("path", [SOLUTION_PY, SOLUTION_NB], ids=["module", "notebook"])
def test_solution_gets_full_marks(grade, path):
    """Does the reference solution, as a module and as the solutions notebook, get 10/10?"""
    result = grade(path)
    assert result.score == result.max_score == TOTAL
    assert result.messages == []
    for part in result.parts:
        assert part.passed, part.output
        assert all(c.values_ok and c.rule_ok and not c.messages for c in part.cases)


def test_release_stub_gets_zero(grade):
    """Does the released notebook, untouched, get 0 with every part saying "not implemented"?"""
    result = grade(RELEASE_NB)
    assert result.score == 0
    for part in result.parts:
        assert part.score == 0
        assert re.search(r"not implemented \(the function raises NotImplementedError\)", part.output)


# --- communication, values, shape, dtype, sharding ---------------------------------------


def test_whole_array_roll_loses_communication_points(grade):
    """Does a roll of the whole array lose roll_diff's communication points?"""
    result = grade("comm_whole_roll")
    # Right (and communication-free) only where no row crosses an X-shard: nX == 1, a zero
    # shift, or a shift of the whole array (2x2 mesh, 6 rows, shift 6): 4 of 10 cases.
    assert_only_broken(result, "roll_diff", 4 / 10,
                       r"communication observed: collective-permute over X .*allowed: none")
    for c in failing_cases(result, "roll_diff"):
        assert not c.values_ok and not c.rule_ok
        assert c.case.mesh[0] > 1 and c.case.statics["shift"] != 0
        assert {col.kind for col in c.analysis.collectives} == {"collective-permute"}
        # The note for a roll built from slices does not fit a roll of the whole array.
        assert not any("built from slices" in p for p in c.messages), c.messages


def test_gather_then_roll_keeps_only_the_values_half(grade):
    """Do right values with an all-gather nobody needs earn exactly half of roll_diff's points?"""
    result = grade("comm_gather_roll")
    assert_only_broken(result, "roll_diff", 0.5, r"communication observed: .*all-gather over X.*allowed: none\. "
                       r"Every output element .* Try: roll inside each shard, not the global array")
    output = result.part("roll_diff").output
    assert output.count("Try: roll inside each shard") == 1, output  # said once, not once per case
    cases = result.part("roll_diff").cases
    assert all(c.values_ok and not c.rule_ok for c in cases)


def test_hard_coded_mesh_sizes_fail_on_other_meshes(grade):
    """Does reshaping with the visible check's literal 2 and 4 pass only on the 2x4 mesh?"""
    result = grade("hardcoded_mesh")
    assert_only_broken(result, "block_average_jit", 1 / 6,
                       r"raised while tracing: TypeError .*cannot reshape array")
    passing = [c.case.mesh for c in result.part("block_average_jit").cases if c.passed]
    assert passing == [(2, 4)]
    # Each case that raised names the call that raises it again where the student can see it.
    for c in result.part("block_average_jit").cases:
        if not c.passed:
            assert c.messages[0].endswith(f"; to see it, run check(block_average_jit, case={c.case.label!r})")


def test_replicated_output_is_wrong_sharding(grade):
    """Does asking jax.jit for a replicated result lose all of shard_average_jit's points?"""
    result = grade("replicated_output")
    assert_only_broken(result, "shard_average_jit", 0,
                       r"wrong sharding: got P\(\), expected P\('X', 'Y'\)")
    assert re.search(r"communication observed: all-gather", result.part("shard_average_jit").output)


def test_slicing_roll_fails_on_large_shifts(grade):
    """Does a roll by slicing, right only while |shift| < rows per shard, lose exactly those cases,
    each saying that its shift reaches past the rows of a shard?"""
    result = grade("slice_roll")
    assert_only_broken(result, "roll_diff", 0.7, r"values wrong: (some|most|every) elements? of the result differs?")
    for c in result.part("roll_diff").cases:
        rows = c.case.sizes["S"] // c.case.mesh[0]
        shift = c.case.statics["shift"]
        # concatenate([a[-s:], a[:-s]]) is a roll for |s| < rows; past that, one slice is
        # empty and the other the whole block, which is right only if s is a multiple of rows.
        right = abs(shift) < rows or shift % rows == 0
        assert c.passed == right, (c.case.label, c.messages)
        # A failing case names the call that shows it on inputs one knows, and what sets it
        # apart from the visible case (shift 3 of 8 rows): the result is the slicing roll's.
        assert right or re.search(rf"; to see them, run check\(roll_diff, case='{re.escape(c.case.label)}'\) "
                                  rf"\(this case, on inputs you can see\); Your result is what a roll built from "
                                  rf"slices .* gives when \|shift\| is at least the rows each X-shard holds .* reduce "
                                  rf"the shift modulo the rows first", "; ".join(c.messages)), c.messages
    assert len(failing_cases(result, "roll_diff")) == 3


def test_a_roll_that_ignores_its_input_earns_nothing(grade):
    """Does zeros of the right shape, dtype and sharding, with no communication, earn none of
    roll_diff's points, though zeros are the right answer of every case whose shift is a whole
    number of the rows per shard? Those cases count only beside a right case whose answer
    depends on A, and the message on each says so; the slicing roll, right on smaller shifts,
    keeps them (above)."""
    result = grade("ignores_inputs")
    assert_only_broken(result, "roll_diff", 0.0, r"values right, but this case's answer is the same whatever")
    part = result.part("roll_diff")
    constant = [c for c in part.cases if c.case.statics["shift"] % (c.case.sizes["S"] // c.case.mesh[0]) == 0]
    assert len(constant) == 3 and not any(c.values_ok for c in part.cases)
    assert all(c.messages[0] == NEEDS_AN_INPUT_CASE for c in constant)
    assert not any(NEEDS_AN_INPUT_CASE in c.messages for c in part.cases if c not in constant)


def test_wrong_dtype(grade):
    """Does returning bfloat16 instead of float32 cost the whole part, saying which dtype?"""
    result = grade("wrong_dtype")
    assert_only_broken(result, "shard_average_shard_map", 0,
                       r"wrong dtype: got bfloat16, expected float32")


def test_wrong_shape(grade):
    """Does returning one row per input row instead of per X-shard fail with a shape message?"""
    result = grade("wrong_shape")
    assert_only_broken(result, "shard_average_jit", 0,
                       r"wrong shape: got \(16, 8\), expected \(2, 8\)")


def test_a_dict_instead_of_an_array(grade):
    """Does a result wrapped in a dict cost the part with a message saying so (not a judge
    that fails as if the student's process had crashed)?"""
    result = grade("returns_dict")
    assert_only_broken(result, "shard_average_shard_map", 0,
                       r"returned a dict; expected one array out: float32\[2, 8\] at P\('X', 'Y'\)")


def test_nan_output(grade):
    """Are NaNs in a result reported as NaNs, not as a vague value mismatch?"""
    result = grade("nan_output")
    assert_only_broken(result, "block_average_shard_map", 0,
                       r"values wrong: the result has NaN elements")


def test_jit_only_part_written_with_shard_map(grade):
    """Does a jit-only part written with shard_map keep the values half and lose the style half?"""
    result = grade("jit_part_uses_shard_map")
    assert_only_broken(result, "shard_average_jit", 0.5,
                       r"shard_average_jit must use jax.jit only, but the program contains a shard_map")
    assert all(c.values_ok and not c.rule_ok for c in result.part("shard_average_jit").cases)


def test_an_identity_shard_map_beside_jit_work_is_no_shard_map_work(grade):
    """shard_average_shard_map whose shard_map passes its input through while jax.jit averages
    around it (2/2 when only the presence of a shard_map was checked): the values half only,
    saying the work runs outside the shard_map."""
    result = grade("identity_shard_map")
    assert_only_broken(result, "shard_average_shard_map", 0.5,
                       r"shard_average_shard_map must do its work inside its shard_map, but jax.jit computes "
                       r"around it \(reduce outside the shard_map\)")


def test_a_shard_map_manual_over_x_only_is_a_shard_map_on_every_mesh(grade):
    """shard_average_shard_map manual over X only (Y left to the partitioner): on the 1x8 and 1x3
    meshes JAX inlines it and the program shows no shard_map. Full marks, the style judged only
    where every axis has two devices or more."""
    result = grade("shard_map_over_x_only")
    assert result.score == TOTAL, result.to_text()
    assert {c.case.mesh for c in result.part("shard_average_shard_map").cases} >= {(1, 8), (1, 3), (2, 4)}


# --- functions that are missing, misdeclared or raise -----------------------------------


def test_raises_exception(grade):
    """Does a function raising ValueError get 0, with the exception and the submission's line?"""
    result = grade("raises")
    assert_only_broken(
        result, "block_average_shard_map", 0,
        r"raised while tracing: ValueError \(submission, line \d+: raise ValueError\(.*\)\): "
        r"block sizes do not divide the array")


def test_missing_function(grade):
    """Is a function that is not defined graded 0 with a message naming the expected signature?"""
    result = grade("missing_function")
    assert_only_broken(result, "block_average_shard_map", 0,
                       r"function block_average_shard_map was not defined; "
                       r"define it as block_average_shard_map\(A, \*, mesh\)")
    assert result.messages == []


def test_wrong_signature(grade):
    """Does roll_diff without the `shift` keyword get 0 with a "wrong signature" message?"""
    result = grade("wrong_signature")
    assert_only_broken(result, "roll_diff", 0,
                       r"wrong signature: expected roll_diff\(A, \*, mesh, shift\), "
                       r"but roll_diff\(A, \*, mesh\) cannot be called that way")


# --- the sandbox's faults that go through JAX, on both stacks ------------------------------


@pytest.fixture(scope="module")
def sandboxed():
    """sandboxed(name) -> a file of `grading.JAX_FAULTS` graded in the sandbox on this stack,
    with the corpus's small limits, checked against its verdict (`grading.CORPUS_VERDICTS`)."""
    def grade(name: str) -> SubmissionResult:
        assert name in JAX_FAULTS
        result = graded(os.path.join(CORPUS, name + ".py"), "problem1", CORPUS_LIMITS)
        assert_verdict(result, name)
        return result

    return grade


def test_memory_hog_at_top_level(sandboxed):
    """Does a 40 GB allocation at top level hit the memory limit as a MemoryError, reported
    to the student, without costing the functions defined before it?"""
    result = sandboxed("memory_hog")
    assert result.score == TOTAL
    assert len(result.messages) == 1
    assert re.search(r"submission raised MemoryError \(submission, line \d+: table = np.ones",
                     result.messages[0])
    assert "While running your submission: submission raised MemoryError" in \
        result.to_gradescope()["output"]


def test_tampering_scores_zero(sandboxed):
    """Does a submission that monkeypatches jax.jit, jax.export and assignments.evaluate and
    imports graders, with nothing implemented, still score 0 without upsetting the grader?"""
    evaluate_compiled = assignments.evaluate.evaluate_compiled
    result = sandboxed("tampering")
    assert result.score == 0
    assert all(p.score == 0 for p in result.parts)
    assert len(result.messages) == 1
    assert re.search(r"raised ImportError .*'graders' is not available to submissions",
                     result.messages[0])
    for part in result.parts:
        assert re.search(r"not implemented", part.output), part.output
    # The patches lived and died in the grading child: this process is untouched.
    assert assignments.evaluate.evaluate_compiled is evaluate_compiled


def test_a_compiled_program_that_never_ends_costs_only_its_cases(sandboxed):
    """Does a compiled infinite loop lose only that function's cases, with a clear message?"""
    result = sandboxed("compiled_infinite_loop")
    hang, fine = result.part("shard_average_jit"), result.part("shard_average_shard_map")
    assert hang.score == 0 and fine.score == fine.max_score
    assert re.search(r"running the compiled program: it ran longer than 5 s and was stopped", hang.output)


# --- notebooks and files -------------------------------------------------------------------


READ_FAULTS = ("binary", "truncated", "not_a_notebook", "deleted_cells", "duplicated_cells", "edited_setup_cell",
               "empty", "syntax_error", "forged_cell_metadata")
"""The files of tests/submissions/faults/ that a reader of submissions must survive (the
others, a submission that writes files and one that tries the network, are the sandbox's)."""


@pytest.mark.parametrize("name", READ_FAULTS)
def test_a_file_that_is_not_what_it_should_be_costs_only_what_it_breaks(name):
    """Does a binary, truncated, empty or malformed file, or a notebook with deleted,
    duplicated or edited cells, score what it holds, saying why (`grading.CORPUS_VERDICTS`)?"""
    assert_verdict(graded(corpus_files()[name], "problem1", CORPUS_LIMITS, here=True), name)


def test_every_fault_file_is_read_here_or_sandboxed():
    """Is each file of tests/submissions/faults/ graded here, or by the batch in the sandbox?"""
    files = {os.path.splitext(n)[0] for n in os.listdir(FAULTS)}
    assert files == set(READ_FAULTS) | (SANDBOXED & files)



def test_syntax_error_in_one_cell_keeps_the_other_parts(grade, tmp_path):
    """Does a syntax error in one solution cell cost only that cell's function?"""
    with open(SOLUTION_PY) as f:
        nb = notebook_from(RELEASE_NB, f.read())
    number = next(i for i, cell in enumerate(nb.cells, start=1)
                  if cell.metadata.get("nbgrader", {}).get("grade_id") == "block_average_jit_solution")
    cell = nb.cells[number - 1]
    assert cell.source.startswith("def block_average_jit(A, *, mesh):")
    cell.source = cell.source.replace("def block_average_jit(A, *, mesh):",
                                      "def block_average_jit(A, *, mesh)", 1)  # no colon
    path = tmp_path / "problem1.ipynb"
    nbformat.write(nb, path)

    result = grade(str(path))
    assert_only_broken(result, "block_average_jit", 0,
                       r"function block_average_jit was not defined")
    assert len(result.messages) == 1
    assert re.search(rf"cell {number} has a syntax error at line 1: .*it was skipped",
                     result.messages[0])
    assert re.search(rf"note: while running your submission: cell {number} has a syntax error",
                     result.part("block_average_jit").output)


def test_malformed_notebook_gets_zero(grade, tmp_path):
    """Does a truncated .ipynb (invalid JSON) get 0 everywhere, saying it is not a valid notebook?"""
    with open(SOLUTION_NB, encoding="utf-8") as f:
        text = f.read()
    path = tmp_path / "problem1.ipynb"
    path.write_text(text[: len(text) // 2], encoding="utf-8")

    result = grade(str(path))
    assert result.score == 0
    assert any("not a valid notebook" in p for p in result.messages)
    for part in result.parts:
        assert part.score == 0
        assert re.search(r"not a valid notebook", part.output), part.output


# --- the command line and Gradescope's format ---------------------------------------------


def test_cli_writes_gradescope_results(tmp_path):
    """Does `python -m graders ... -o results.json` write Gradescope's shape, with the scores?"""
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "graders", submission_file(os.path.join(CORPUS, "comm_whole_roll.py")),
         "--assignment", "problem1", "--only", "shard_average_jit", "roll_diff",
         "-o", str(out), "--quiet"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""

    results = json.loads(out.read_text())
    assert isinstance(results["score"], (int, float))
    roll_diff = round(POINTS["roll_diff"] * CORPUS_VERDICTS["comm_whole_roll"][0]["roll_diff"], 2)
    assert results["score"] == pytest.approx(POINTS["shard_average_jit"] + roll_diff)
    assert isinstance(results["output"], str)
    tests = results["tests"]
    assert [t["name"] for t in tests] == ["shard_average_jit", "roll_diff"]
    for t in tests:
        assert {"name", "score", "max_score", "status", "output"} <= set(t)
        assert t["status"] in ("passed", "failed")
        assert isinstance(t["output"], str) and t["output"]
    assert results["score"] == pytest.approx(sum(t["score"] for t in tests))
    first, roll = tests
    assert (first["score"], first["max_score"], first["status"]) == (POINTS["shard_average_jit"],) * 2 + ("passed",)
    assert (roll["score"], roll["max_score"], roll["status"]) == (roll_diff, POINTS["roll_diff"], "failed")
    assert re.search(r"communication observed: collective-permute over X", roll["output"])


# --- the corpus itself ---------------------------------------------------------------------


TESTED = {
    "comm_whole_roll", "comm_gather_roll", "hardcoded_mesh", "replicated_output", "slice_roll", "ignores_inputs",
    "wrong_dtype", "wrong_shape", "returns_dict", "nan_output", "jit_part_uses_shard_map", "raises",
    "shard_map_over_x_only", "identity_shard_map", "adds_of_slices_outside", "loop_outside", "triangular_solve_outside",
    "missing_function", "wrong_signature", "replicated_claim_passes_through", "sum_of_slices_from_zero",
    "negated_slices_subtracted", "psum_in_groups_of_one_claim", "work_in_a_composite_outside",
    "slices_cut_by_pads_added_outside", "slices_through_a_barrier_added_outside",
}


@pytest.mark.parametrize("name", sorted(TESTED))
def test_each_corpus_file_scores_its_verdict(grade, name):
    """Does each file graded here score its total, each message as `grading.CORPUS_VERDICTS`
    says (the verdicts the batch of test_batch_faults.py checks for the sandbox's files)?"""
    assert_verdict(grade(name), name)


def test_every_corpus_file_is_tested():
    """Is every submission in tests/submissions/problem1 graded by a test above (in this
    process, or in the sandbox for `JAX_FAULTS`), or (its subject the sandbox) by
    test_batch_faults.py?"""
    files = {name[:-3] for name in os.listdir(CORPUS) if name.endswith(".py")}
    assert files == TESTED | JAX_FAULTS | (SANDBOXED & files) and not TESTED & (SANDBOXED | JAX_FAULTS)
