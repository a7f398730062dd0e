"""The reference solution, plus an attempt to leave files behind while it is imported:
in its own folder (allowed: a scratch folder), in the kit's student runtime and next to
JAX's own modules (where a planted file could change the grading of later submissions).
The last two must fail (read-only in the grading child), and the functions keep full marks.
It only ever creates new files named planted_by_submission.*, never changes existing ones."""
import os

import assignments
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

WROTE = {}
for folder in (".", os.path.dirname(assignments.__file__), os.path.dirname(jax.__file__)):
    target = os.path.join(folder, "planted_by_submission.txt")
    try:
        with open(target, "w") as f:
            f.write("a submission was here\n")
        WROTE[folder] = True
    except OSError as e:
        WROTE[folder] = f"{type(e).__name__}: {e}"


def shard_average_jit(A, *, mesh):
    nX = mesh.shape['X']
    S, D = A.shape
    return jax.jit(lambda a: a.reshape(nX, S // nX, D).mean(axis=1),
                   out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)


def shard_average_shard_map(A, *, mesh):
    return jax.shard_map(lambda a: a.mean(axis=0, keepdims=True), mesh=mesh,
                         in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)


def block_average_jit(A, *, mesh):
    nX, nY = mesh.shape['X'], mesh.shape['Y']
    S, D = A.shape
    return jax.jit(lambda a: a.reshape(nX, S // nX, nY, D // nY).mean(axis=(1, 3)),
                   out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)


def block_average_shard_map(A, *, mesh):
    return jax.shard_map(lambda a: a.mean(keepdims=True), mesh=mesh,
                         in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)


def roll_diff(A, *, mesh, shift):
    return jax.shard_map(lambda a: jnp.roll(a, shift, axis=0) - a, mesh=mesh,
                         in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
