"""Artifacts depend only on the program: the export strips source locations and names, so
the same function exported from any cell, line or file gives the same bytes (and one verdict
in the cache), while the compiled program, its analysis and its verdict stay exactly those of
the artifact as JAX exported it."""
from __future__ import annotations

import functools
import hashlib
import os

import jax
import pytest
from grading import load_module

from assignments.contract import case_request, make_inputs
from assignments.contracts import ASSIGNMENTS
from assignments.evaluate import evaluate_compiled, make_mesh, place
from graders.sandboxed.export import Exporter, canonical_program

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def solutions(assignment: str):
    return load_module(os.path.join(REPO_ROOT, "solutions", f"{assignment}.py"))


def judged(part, case, artifact: bytes):
    """(The analysis as JSON, the verdict) of an artifact compiled and run on the case."""
    exported = jax.export.deserialize(bytearray(artifact))
    mesh = make_mesh(case.mesh, part.axis_types)
    arrays = make_inputs(part, case, 0)
    compiled = jax.jit(exported.call).lower(*place(arrays, part, mesh)).compile()
    result = evaluate_compiled(part, case, mesh, compiled, exported.mlir_module(), arrays, show_values=False)
    return result.analysis.to_json(), (result.values_ok, result.rule_ok, result.messages)


PARTS = [(a, p.name) for a, spec in sorted(ASSIGNMENTS.items()) for p in spec.parts if not p.eager]


@pytest.mark.parametrize("assignment, name", PARTS, ids=[f"{a}.{n}" for a, n in PARTS])
def test_stripping_changes_nothing_the_graders_read(assignment, name):
    """For every graded function of every solution, on its visible case: does the stripped
    artifact compile to the same analysis and get the same verdict as JAX's own?"""
    part = ASSIGNMENTS[assignment].part(name)
    fn = getattr(solutions(assignment), name)
    case = part.visible_case
    request = case_request(part, case, "x")
    mesh = Exporter().mesh(request)
    specs = [Exporter().abstract(mesh, a) for a in request["args"]]
    keywords = part.call_kwargs(mesh, case.statics)
    raw = bytes(jax.export.export(jax.jit(functools.partial(fn, **keywords)))(*specs).serialize())
    with _limit():
        stripped = bytes(jax.export.export(jax.jit(canonical_program(fn, keywords)))(*specs).serialize())
    assert judged(part, case, raw) == judged(part, case, stripped)


class _limit:
    """jax_traceback_in_locations_limit = 0 for a block, as the export worker sets it."""

    def __enter__(self):
        self.old = jax.config.jax_traceback_in_locations_limit
        jax.config.update("jax_traceback_in_locations_limit", 0)

    def __exit__(self, *exc):
        jax.config.update("jax_traceback_in_locations_limit", self.old)


def test_the_same_function_from_anywhere_gives_the_same_bytes():
    """Exported from a notebook cell, from a later cell after scratch lines with its helper
    renamed, and from a module with other argument names, is roll_diff one artifact?"""
    source = ("def {helper}(block, shift):\n    return jnp.roll(block, shift, axis=0) - block\n"
              "def roll_diff({arg}, *, mesh, shift):\n"
              "    return jax.shard_map(lambda b: {helper}(b, shift), mesh=mesh, in_specs=P('X', 'Y'),\n"
              "                         out_specs=P('X', 'Y'))({arg})\n")
    part = ASSIGNMENTS["problem1"].part("roll_diff")
    request = case_request(part, part.visible_case, "x")
    digests = set()
    for filename, prefix, helper, arg in (("<cell 3>", "", "local", "A"),
                                          ("<cell 9>", "x = 1\n\n\n# scratch\n", "shifted", "A"),
                                          ("<submission>", '"""my module"""\nimport math\n', "h", "arr")):
        namespace = {"jax": jax, "jnp": jax.numpy, "P": jax.sharding.PartitionSpec}
        exec(compile(prefix + source.format(helper=helper, arg=arg), filename, "exec"), namespace)
        with _limit():
            digests.add(hashlib.sha256(Exporter()(namespace["roll_diff"], request)).hexdigest())
    assert len(digests) == 1
