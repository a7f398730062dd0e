"""A hang the per-case time limit cannot stop: on a mesh with nX == 4, roll_diff blocks the
SIGALRM the grading process uses for its time limit and loops forever. Only the grader's
stall watchdog can end it: it kills the process, blames that case and restarts for the rest.

Broken part: roll_diff (the 4x2 case). Every other function is the reference solution.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
import signal


def roll_diff(A, *, mesh, shift):
    if mesh.shape['X'] == 4:
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
        while True:
            pass

    def local(block):
        return jnp.roll(block, shift, axis=0) - block

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
