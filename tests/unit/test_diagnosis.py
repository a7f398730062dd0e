"""What the kit adds to JAX's own error messages (`assignments.diagnosis.exception_hint`), shared
by the visible checks and the export worker."""
from __future__ import annotations

from assignments.diagnosis import exception_hint


def test_set_mesh_inside_a_graded_function_is_explained():
    """A `with jax.set_mesh(mesh):` inside a graded function works when the student calls it
    outside jax.jit, and fails where the checks and graders trace it: does the hint say why,
    and what to write instead?"""
    hint = exception_hint(ValueError("`set_mesh` can only be used outside of `jax.jit`."))
    assert "trace your whole function with jax.jit" in hint
    assert "NamedSharding(mesh, P(...))" in hint


def test_an_unreduced_out_spec_is_explained_and_other_errors_get_nothing():
    """Does the out_specs replication error name its axis, and an unrelated error get no hint?"""
    error = ValueError("shard_map applied to the function 'local' was given out_specs which "
                       "require replicated outputs, but out_specs P() is not replicated across mesh axis 'Y'")
    assert "added over Y: check the axis your psum names" in exception_hint(error)
    assert exception_hint(TypeError("cannot reshape array of shape (24, 6)")) == ""
