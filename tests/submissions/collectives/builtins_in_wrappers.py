"""Cheat: jax.lax's own collectives hidden where a reader of the compiled program might not
look: in a lax.cond branch never taken (the other branch a ring), a custom_vjp, a
jax.checkpoint, a nested shard_map and a scan body. The lowered program holds each call: S006
on every case."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _ring(a, n, idx):
    cols = a.shape[1]
    right = [(j, (j + 1) % n) for j in range(n)]
    out, block = jax.lax.dynamic_update_slice_in_dim(jnp.zeros((a.shape[0], n * cols), a.dtype), a, idx * cols,
                                                     axis=1), a
    for s in range(1, n):
        block = jax.lax.ppermute(block, 'Y', right)
        out = jax.lax.dynamic_update_slice_in_dim(out, block, ((idx - s) % n) * cols, axis=1)
    return out


def ring_all_gather(A, *, mesh):
    def local(a):
        n, idx = jax.lax.axis_size('Y'), jax.lax.axis_index('Y')
        return jax.lax.cond(idx < 0, lambda b: jax.lax.all_gather(b, 'Y', axis=1, tiled=True),
                            lambda b: _ring(b, n, idx), a)

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', None), check_vma=False)(A)


@jax.custom_vjp
def _scatter(x):
    return jax.lax.psum_scatter(x, 'Y', scatter_dimension=1, tiled=True)


_scatter.defvjp(lambda x: (_scatter(x), None), lambda _, g: (g,))


def ring_reduce_scatter(A, *, mesh):
    return jax.shard_map(lambda a: _scatter(a[0]), mesh=mesh, in_specs=P('Y', 'X', None), out_specs=P('X', 'Y'))(A)


def ring_all_reduce(A, *, mesh):
    summed = jax.checkpoint(lambda x: jax.lax.psum(x, 'Y'))
    return jax.shard_map(lambda a: summed(a[0]), mesh=mesh, in_specs=P('Y', 'X', None), out_specs=P('X', None))(A)


def direct_all_to_all(A, *, mesh):
    def local(a):
        def body(c, _):
            return c, jax.lax.all_to_all(c, 'Y', 1, 0, tiled=True)
        return jax.lax.scan(body, a, length=1)[1][0]

    return jax.shard_map(local, mesh=mesh, in_specs=P('Y', None), out_specs=P(None, 'Y'))(A)


def bidirectional_all_gather(A, *, mesh):
    def rows(a):                          # a: [B/nX, D], still split over Y: a shard_map over Y alone
        return jax.shard_map(lambda b: jax.lax.all_gather(b, 'Y', axis=1, tiled=True),
                             mesh=jax.sharding.get_abstract_mesh(), in_specs=P(None, 'Y'), out_specs=P(),
                             axis_names={'Y'}, check_vma=False)(a)

    return jax.shard_map(rows, mesh=mesh, in_specs=P('X'), out_specs=P('X'), axis_names={'X'}, check_vma=False)(A)
