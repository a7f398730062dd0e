"""A module that does not parse (a missing colon): nothing in it can be graded, and the
message says where the syntax error is."""
import jax


def shard_average_jit(A, *, mesh)
    return A
