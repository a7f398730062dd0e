"""Cheat: jax.lax's own collectives, called directly. Right values, every rule half lost."""
import jax
from jax.sharding import PartitionSpec as P


def ring_all_gather(A, *, mesh):
    return jax.shard_map(lambda a: jax.lax.all_gather(a, 'Y', axis=1, tiled=True), mesh=mesh,
                         in_specs=P('X', 'Y'), out_specs=P('X', None), check_vma=False)(A)


def ring_reduce_scatter(A, *, mesh):
    return jax.shard_map(lambda a: jax.lax.psum_scatter(a[0], 'Y', scatter_dimension=1, tiled=True), mesh=mesh,
                         in_specs=P('Y', 'X', None), out_specs=P('X', 'Y'))(A)


def ring_all_reduce(A, *, mesh):
    return jax.shard_map(lambda a: jax.lax.psum(a[0], 'Y'), mesh=mesh,
                         in_specs=P('Y', 'X', None), out_specs=P('X', None))(A)


def direct_all_to_all(A, *, mesh):
    return jax.shard_map(lambda a: jax.lax.all_to_all(a, 'Y', 1, 0, tiled=True), mesh=mesh,
                         in_specs=P('Y', None), out_specs=P(None, 'Y'))(A)


def bidirectional_all_gather(A, *, mesh):
    return ring_all_gather(A, mesh=mesh)
