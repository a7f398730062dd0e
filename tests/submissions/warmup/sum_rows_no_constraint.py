"""x.sum(0) left to the compiler: the result stays split over Y only."""

import jax


def sum_rows_fully_sharded(x, *, mesh):
    return jax.jit(lambda x: x.sum(axis=0))(x)
