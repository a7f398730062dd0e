"""Route 8: learn hidden values through feedback. Each function returns something wrong on
purpose, chosen to make the message quote a value: a constant (the reference value would be
"expected ..."), the input itself (its values would be "got ..."), and one raises with what it
was given. A grader that quoted any of them would let a file of constants, learned over a few
regradings, pass without solving anything."""
import jax.numpy as jnp


def shard_average_jit(A, *, mesh):
    return jnp.zeros((mesh.shape["X"], A.shape[1]), A.dtype) + 0.125


def block_average_jit(A, *, mesh):
    return A[: mesh.shape["X"], : mesh.shape["Y"]]  # the input's own values, wrongly placed


def roll_diff(A, *, mesh, shift):
    raise ValueError(f"what I was given: {A!r}")
