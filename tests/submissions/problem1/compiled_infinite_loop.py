"""A program that never ends once compiled: a while_loop whose condition is always true.
Tracing and exporting it is quick; running it hangs. Only the cases of shard_average_jit
that the grader runs may be lost, never the grader or the other functions."""
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def shard_average_jit(A, *, mesh):
    nX = mesh.shape['X']
    S, D = A.shape

    def average(a):
        i = jax.lax.while_loop(lambda i: i < jnp.inf, lambda i: i + 1.0, a[0, 0])
        return a.reshape(nX, S // nX, D).mean(axis=1) + 0 * i

    return jax.jit(average, out_shardings=NamedSharding(mesh, P('X', 'Y')))(A)


def shard_average_shard_map(A, *, mesh):
    return jax.shard_map(lambda a: a.mean(axis=0, keepdims=True), mesh=mesh,
                         in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
