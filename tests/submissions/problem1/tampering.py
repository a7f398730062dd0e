"""Tampering: every graded function is left unimplemented, and the module tries to
influence the grader instead: it monkeypatches jax.jit, jax.export and assignments.evaluate,
tries `from solutions import problem1`, and ends with `import graders` (which raises).
It must score 0 and never crash the grader.
"""
import types

import jax

import assignments
import assignments.evaluate


def shard_average_jit(A, *, mesh):
    raise NotImplementedError()


def shard_average_shard_map(A, *, mesh):
    raise NotImplementedError()


def block_average_jit(A, *, mesh):
    raise NotImplementedError()


def block_average_shard_map(A, *, mesh):
    raise NotImplementedError()


def roll_diff(A, *, mesh, shift):
    raise NotImplementedError()


# Make every verdict "passed", in this process (the grader judges in another one).
class _AllGood:
    values_ok = rule_ok = passed = True
    problems = []


assignments.evaluate.evaluate_compiled = lambda *args, **kwargs: _AllGood()
assignments.evaluate.CaseResult.failed = classmethod(lambda cls, case, problem: _AllGood())
assignments.evaluate._compare_values = lambda got, want: None

# jax.jit that does nothing, and an export that "succeeds" with a bogus artifact.
jax.jit = lambda fun, *args, **kwargs: fun
jax.export.export = lambda fun, *args, **kwargs: (
    lambda *specs: types.SimpleNamespace(serialize=lambda: bytearray(b"\x00" * 64)))

# The hidden modules (blocked in the grading process).
try:
    from solutions import problem1  # noqa: F401
except ImportError:
    pass
import graders  # noqa: E402,F401  (raises ImportError: not available to submissions)
