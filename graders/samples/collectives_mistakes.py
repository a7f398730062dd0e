"""A typical first attempt at collectives: the reduce-scatter as a psum of the whole partial sum
then a slice (jax.lax's collective, and more bytes), the all-to-all as a ring that passes whole
rows round and keeps its columns (bigger permutes than the direct exchange), the other three
right."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def ring_all_gather(A, *, mesh):
    def local(a):                         # a: [B/nX, D/nY], this device's block
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        cols = a.shape[1]
        right = [(j, (j + 1) % n) for j in range(n)]   # each device sends to the next one

        def step(s, carry):
            out, block = carry
            block = jax.lax.ppermute(block, 'Y', right)    # now block (idx - s) % n
            out = jax.lax.dynamic_update_slice_in_dim(out, block, ((idx - s) % n) * cols, axis=1)
            return out, block

        out = jnp.zeros((a.shape[0], n * cols), a.dtype)
        out = jax.lax.dynamic_update_slice_in_dim(out, a, idx * cols, axis=1)
        out, _ = jax.lax.fori_loop(1, n, step, (out, a))
        return out

    # Every device of a row ends with the same values, but JAX cannot prove it without a
    # psum: check_vma=False lets the result be declared replicated over Y.
    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', None),
                         check_vma=False)(A)


def ring_reduce_scatter(A, *, mesh):
    # Mistake: jax.lax.psum adds every device's whole partial sum, then each keeps its block.
    def local(a):                         # a: [1, B/nX, D]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        total = jax.lax.psum(a[0], 'Y')
        cols = total.shape[1] // n
        return jax.lax.dynamic_slice_in_dim(total, idx * cols, cols, axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=P('Y', 'X', None), out_specs=P('X', 'Y'))(A)


def ring_all_reduce(A, *, mesh):
    def local(a):                         # a: [1, B/nX, D]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        cols = a.shape[2] // n
        left = [(j, (j - 1) % n) for j in range(n)]

        def share(b):
            return jax.lax.dynamic_slice_in_dim(a[0], b * cols, cols, axis=1)

        # 1. reduce-scatter: device idx ends with block idx summed over the ring
        def reduce(s, acc):
            return jax.lax.ppermute(acc, 'Y', left) + share((idx + s + 1) % n)

        mine = jax.lax.fori_loop(1, n, reduce, share((idx + 1) % n))

        # 2. all-gather of the summed blocks, the same way round
        def gather(s, carry):
            out, block = carry
            block = jax.lax.ppermute(block, 'Y', left)      # now block (idx + s) % n
            return jax.lax.dynamic_update_slice_in_dim(out, block, ((idx + s) % n) * cols, axis=1), block

        out = jax.lax.dynamic_update_slice_in_dim(jnp.zeros_like(a[0]), mine, idx * cols, axis=1)
        out, _ = jax.lax.fori_loop(1, n, gather, (out, mine))
        return out

    return jax.shard_map(local, mesh=mesh, in_specs=P('Y', 'X', None), out_specs=P('X', None),
                         check_vma=False)(A)


def direct_all_to_all(A, *, mesh):
    # Mistake: a ring that passes each device's whole [B/nY, D] rows on, nY-1 times, and keeps
    # the columns it owns: the right values, but every permute is nY blocks, not one.
    def local(a):                         # a: [B/nY, D]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        rows, cols = a.shape[0], a.shape[1] // n
        right = [(j, (j + 1) % n) for j in range(n)]
        mine = lambda r: jax.lax.dynamic_slice_in_dim(r, idx * cols, cols, axis=1)  # noqa: E731
        out = jax.lax.dynamic_update_slice_in_dim(jnp.zeros((n * rows, cols), a.dtype), mine(a), idx * rows, axis=0)
        passed = a
        for s in range(1, n):
            passed = jax.lax.ppermute(passed, 'Y', right)   # the rows of device idx - s
            out = jax.lax.dynamic_update_slice_in_dim(out, mine(passed), ((idx - s) % n) * rows, axis=0)
        return out

    return jax.shard_map(local, mesh=mesh, in_specs=P('Y', None), out_specs=P(None, 'Y'))(A)


def bidirectional_all_gather(A, *, mesh):
    def local(a):                         # a: [B/nX, D/nY]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        cols = a.shape[1]
        half = cols // 2                  # the first half's columns (one fewer when odd)
        left = [(j, (j - 1) % n) for j in range(n)]
        right = [(j, (j + 1) % n) for j in range(n)]

        def place(out, lo, hi, s):        # lo: first half of block idx + s; hi: second half of idx - s
            out = jax.lax.dynamic_update_slice_in_dim(out, lo, ((idx + s) % n) * cols, axis=1)
            return jax.lax.dynamic_update_slice_in_dim(out, hi, ((idx - s) % n) * cols + half, axis=1)

        def step(s, carry):
            out, lo, hi = carry
            lo = jax.lax.ppermute(lo, 'Y', left)
            hi = jax.lax.ppermute(hi, 'Y', right)
            return place(out, lo, hi, s), lo, hi

        lo, hi = a[:, :half], a[:, half:]
        out = place(jnp.zeros((a.shape[0], n * cols), a.dtype), lo, hi, 0)
        out, _, _ = jax.lax.fori_loop(1, n, step, (out, lo, hi))
        return out

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', None),
                         check_vma=False)(A)
