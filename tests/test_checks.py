"""Visible checks: the same verdicts as the graders, on one small case, shown to students."""
import importlib.util
import os

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

import assignments
from assignments.contracts import ASSIGNMENTS


@pytest.fixture(scope="module")
def solution(repo_root):
    spec = importlib.util.spec_from_file_location("sol1", os.path.join(repo_root, "solutions", "problem1.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", [p.name for p in ASSIGNMENTS["problem1"].parts])
def test_solution_passes_visible_check(solution, name, capsys):
    """Does every problem1 solution pass its visible check and show an empty table?"""
    result = assignments.check(getattr(solution, name))
    assert result.passed, result.result.problems
    shown = capsys.readouterr().out
    assert "no communication" in shown and "passed" in shown


def test_stub_says_not_implemented(capsys):
    """Does an untouched stub get a friendly 'not implemented yet'?"""
    def roll_diff(A, *, mesh, shift):
        raise NotImplementedError()

    result = assignments.check(roll_diff)
    assert not result.passed
    assert "not implemented yet" in capsys.readouterr().out


def test_communication_is_named_with_axis_and_bytes():
    """Does a whole-array roll fail with the collective it adds, its axis and bytes?"""
    def roll_diff(A, *, mesh, shift):
        return jnp.roll(A, shift, axis=0) - A

    result = assignments.check(roll_diff, show=False)
    assert not result.result.rule_ok
    assert any("communication observed: collective-permute over X" in p and "bytes" in p
               for p in result.result.problems)


def test_exception_points_at_the_students_line():
    """Does an exception while tracing name the student's function and line?"""
    def shard_average_jit(A, *, mesh):
        return A.reshape(3, -1, 7)

    result = assignments.check(shard_average_jit, show=False)
    (problem,) = result.result.problems
    assert problem.startswith("raised TypeError while tracing or compiling (in shard_average_jit")


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
