"""Visible checks: the same verdicts as the graders, on one small case, shown to students."""
import os
import re

import jax
import jax.numpy as jnp
import pytest
from grading import load_module
from jax.sharding import PartitionSpec as P

import assignments
from assignments.contracts import ASSIGNMENTS


@pytest.fixture(scope="module")
def solution(repo_root):
    return load_module(os.path.join(repo_root, "solutions", "problem1.py"))


@pytest.mark.parametrize("name", [p.name for p in ASSIGNMENTS["problem1"].parts])
def test_solution_passes_visible_check(solution, name, capsys):
    """Does every problem1 solution pass its visible check and show an empty table?"""
    result = assignments.check(getattr(solution, name))
    assert result.passed, result.result.messages
    shown = capsys.readouterr().out
    assert "no communication" in shown and "passed" in shown


def test_stub_says_not_implemented(capsys):
    """Does an untouched stub get a friendly 'not implemented yet'?"""
    def roll_diff(A, *, mesh, shift):
        raise NotImplementedError()

    with pytest.raises(assignments.CheckFailed, match="roll_diff: E001 not implemented yet"):
        assignments.check(roll_diff)
    assert "not implemented yet" in capsys.readouterr().out


def test_communication_is_named_with_axis_and_bytes():
    """Does a whole-array roll fail with the collective it adds, its axis and bytes?"""
    def roll_diff(A, *, mesh, shift):
        return jnp.roll(A, shift, axis=0) - A

    result = assignments.check(roll_diff, show=False, raises=False)
    assert not result.result.rule_ok
    assert any("communication observed: collective-permute over X" in p and "bytes" in p
               for p in result.result.messages)


def test_exception_points_at_the_students_line():
    """Does an exception while tracing name the student's function and line?"""
    def shard_average_jit(A, *, mesh):
        return A.reshape(3, -1, 7)

    result = assignments.check(shard_average_jit, show=False, raises=False)
    (problem,) = result.result.messages
    assert problem.startswith("raised TypeError while tracing or compiling (in shard_average_jit")
    assert "A.reshape(3, -1, 7)" in problem


def test_jax_explanation_is_kept_whole():
    """Is JAX's explanation after the first line kept, without kit or JAX frames?"""
    def shard_average_shard_map(A, *, mesh):
        return jax.shard_map(lambda b: b.mean(axis=0, keepdims=True), mesh=mesh,
                             in_specs=P("X", "Y"), out_specs=P("X"))(A)

    (problem,) = assignments.check(shard_average_shard_map, show=False, raises=False).messages
    assert "out_specs is P('X',)" in problem and "check_vma=False" in problem
    assert "site-packages" not in problem and "assignments/" not in problem


def test_hard_coded_mesh_fails_on_the_second_mesh():
    """Does a function that hard-codes nX = 2 pass on 2x4 but fail on 4x2, saying why?"""
    def shard_average_jit(A, *, mesh):
        S, D = A.shape
        return jax.jit(lambda a: a.reshape(2, S // 2, D).mean(axis=1),
                       out_shardings=jax.sharding.NamedSharding(mesh, P("X", "Y")))(A)

    result = assignments.check(shard_average_jit, show=False, raises=False)
    assert result.result.passed and not result.second.passed and result.second.case.mesh == (4, 2)
    assert any("read sizes from mesh.shape" in p for p in result.messages)


def test_a_hidden_case_runs_as_its_message_says(repo_root):
    """Does the call a hidden case's wrong-values message names (`check(fn, case=...)`) run the
    check at that case's mesh, sizes and statics, showing the worst element, and refuse a
    case it cannot read, missing a size or not dividing, saying how to write one?"""
    slicing = load_module(os.path.join(repo_root, "tests", "submissions", "problem1", "slice_roll.py"))
    from assignments.contract import Case
    from assignments.contracts import get_assignment
    from assignments.evaluate import check_call

    part = get_assignment("problem1").part("roll_diff")
    call = check_call(part, Case((1, 3), {"S": 7, "D": 9}, {"shift": -15}))
    assert call == "check(roll_diff, case='mesh 1x3, S=7, D=9, shift=-15')"
    label = re.fullmatch(r"check\(roll_diff, case='(.*)'\)", call).group(1)
    result = assignments.check(slicing.roll_diff, show=False, raises=False, case=label)
    assert result.second is None and result.result.case == Case((1, 3), {"S": 7, "D": 9}, {"shift": -15})
    assert [p.rule for p in result.problems] == ["V005", "H001"]  # the wrong values, then the contract's hint
    assert re.search(r"values wrong: 63 of 63 elements differ .*worst at index ", result.messages[0])
    assert re.search(r"Your result is what a roll built from slices .* gives when \|shift\| is at least the rows",
                     result.messages[1])
    assert "Right on these inputs" not in str(result.messages)
    assert repr(result) == "<roll_diff at mesh 1x3, S=7, D=9, shift=-15: failed>"
    from assignments.checks import console, render

    with console.terminal.capture() as shown:
        render(result)
    assert "roll_diff at mesh 1x3, S=7, D=9, shift=-15: failed" in shown.get() and "visible check" not in shown.get()
    with pytest.raises(assignments.CheckFailed) as failed:  # named by its case, not as the visible check
        assignments.check(slicing.roll_diff, show=False, case=label)
    assert failed.value._render_traceback_()[0] == (
        "CheckFailed: roll_diff at mesh 1x3, S=7, D=9, shift=-15 did not pass (details in its panel)")
    assert assignments.check(slicing.roll_diff, show=False, case="mesh 2x2, S=6, D=10, shift=1").passed
    # Every hidden case of every function reads back from its label (sizes, statics, floats).
    from assignments.checks import parse_case
    from graders.hidden import hidden_cases

    for name, assignment in ASSIGNMENTS.items():
        for each in assignment.parts:
            for case in hidden_cases(assignment)[each.name]:
                back = parse_case(each, case.label)
                assert (back.mesh, back.sizes, back.statics, back.label) == (
                    case.mesh, case.sizes, case.statics, case.label), case.label
    for bad, why in (("2x4, S=16", "could not read the case"), ("mesh 2x4, S=16", "needs D, shift"),
                     ("mesh 0x4, S=16, D=8, shift=1", "could not read the case"),
                     ("mesh 2x4, S=16.0, D=8, shift=1", "whole numbers of at least 1"),
                     ("mesh 2x4, S=15, D=8, shift=1", "does not divide evenly")):
        with pytest.raises(ValueError, match=why):
            assignments.check(slicing.roll_diff, case=bad)


def test_failed_check_raises_a_short_error_naming_the_function():
    """Does a failed check end its cell in a short CheckFailed (what nbgrader's Validate reports)?"""
    def block_average_jit(A, *, mesh):
        return A.mean()

    with pytest.raises(assignments.CheckFailed) as info:
        assignments.check(block_average_jit, show=False)
    lines = info.value._render_traceback_()
    assert lines[0].startswith("CheckFailed: the visible check of block_average_jit did not pass")
    assert isinstance(info.value, AssertionError) and len(lines) < 8 and max(map(len, lines)) <= 90


def test_name_error_says_run_the_first_cell():
    """Does a name the set-up cell defines, missing after a restart, say to run the first cell?"""
    def roll_diff(A, *, mesh, shift):
        return undefined_jnp.roll(A, shift, axis=0) - A  # noqa: F821

    (problem,) = assignments.check(roll_diff, show=False, raises=False).messages
    assert "NameError" in problem and "run the notebook's first cell" in problem


def test_notebook_output_is_html_with_theme_colours():
    """Does the check panel render as width-free HTML with JupyterLab's theme variables?"""
    from rich.panel import Panel
    from rich.text import Text

    from assignments import display
    from assignments.hlo import ProgramAnalysis

    table = display.communication_table(ProgramAnalysis(collectives=(), largest_values=(), temp_bytes=None, num_devices=8), title="t: mesh 2x4")
    html = display.to_html(table)
    assert "<table" in html and "no communication" in html and "var(--jp-success-color1" in html
    panel = display.to_html(Panel(Text("\u2717 bad", style="red"), title="visible check: f [red]failed[/red]"))
    assert "var(--jp-error-color1" in panel and not re.search(r"[^-]width:", panel)
    assert "…" not in display.to_text(table)


def test_passed_check_shows_no_repr_noise():
    """Does a passed check, as a cell's last line, display nothing more than its panel?"""
    result = assignments.check(lambda A, *, mesh: A, part="roll_diff", show=False, raises=False)
    assert hasattr(result, "_ipython_display_")


def test_unknown_function_name():
    """Is a renamed function met with a hint to pass part=...?"""
    with pytest.raises(ValueError, match="part='<function name>'"):
        assignments.check(lambda A, *, mesh: A)


def test_report_reads_mesh_from_arrays(mesh_2x4, capsys):
    """Does report() show the all-reduce of a global column sum?"""
    A = jax.device_put(jnp.ones((16, 8)), jax.sharding.NamedSharding(mesh_2x4, P("X", "Y")))
    analysis = assignments.report(lambda a: a.sum(axis=0), A)
    assert [c.kind for c in analysis.collectives][:1] == ["all-reduce"]
    assert "all-reduce" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.nbgrader
def test_nbgrader_validate_tells_the_truth(repo_root, tmp_path):
    """Does `nbgrader validate` fail the released notebook, naming every unimplemented
    function, and pass it once the solutions are filled in?"""
    import subprocess
    import sys

    import nbformat

    release = os.path.join(repo_root, "release", "problem1", "problem1.ipynb")
    solved = nbformat.read(os.path.join(repo_root, "solutions", "problem1", "problem1.ipynb"), as_version=4)
    answers = {c.metadata.nbgrader["grade_id"]: c.source for c in solved.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    worked = nbformat.read(release, as_version=4)
    for cell in worked.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in answers:
            cell.source = answers[grade_id]
    nbformat.write(worked, tmp_path / "worked.ipynb")
    nbformat.write(nbformat.read(release, as_version=4), tmp_path / "problem1.ipynb")

    def validate(name):
        return subprocess.run([sys.executable, "-m", "nbgrader", "validate", name], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600,
                              env={**os.environ, "TMPDIR": str(tmp_path)}).stdout  # its kernel's traces

    fresh = validate("problem1.ipynb")
    assert "VALIDATION FAILED ON 6 CELL(S)" in fresh  # five checks and the unanswered written answer
    for part in ASSIGNMENTS["problem1"].parts:
        assert f"CheckFailed: the visible check of {part.name} did not pass" in fresh
    assert "Success! Your notebook passes all the tests." in validate("worked.ipynb")


def test_cells_run_before_the_set_up_say_run_the_first_cell(tmp_path):
    """After a kernel restart with the set-up cell skipped, does a check cell say to run the
    cells above (set-up first) rather than end in a bare NameError?"""
    import nbformat
    from nbclient import NotebookClient

    check_cell = "from assignments import check\ncheck({})"
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(check_cell.format("shard_average_jit")),   # its cell not run either
        nbformat.v4.new_code_cell("def roll_diff(A, *, mesh, shift):\n    return jnp.roll(A, shift, axis=0) - A"),
        nbformat.v4.new_code_cell(check_cell.format("roll_diff")),
    ])
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    (undefined,) = nb.cells[0].outputs
    assert undefined.ename == "NameError" and "Run All Above Selected Cell" in "\n".join(undefined.traceback)
    shown = "".join(o.get("data", {}).get("text/plain", "") for o in nb.cells[2].outputs)
    assert "name 'jnp' is not defined" in shown and "run the notebook's first cell" in shown
    assert nb.cells[2].outputs[-1].ename == "CheckFailed"
