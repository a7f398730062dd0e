"""Solutions to training, generated from source/training/training.ipynb by `python -m graders.build`. Do not edit."""


# Run this cell first. It asks JAX for 8 simulated CPU devices, which must happen
# before anything else touches JAX (if it complains, restart the kernel and run it first).
import assignments
assignments.setup_devices(8, announce=True)

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from assignments import check, compare, make_mesh, report, show_mesh, show_sharding


def problem3_allgather_matmul(A, W, *, mesh):
    def local(a, w):                      # a: [B/nX, D/nY], w: [D, F/nY]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]

        def w_rows(i):                    # the rows of w that meet the chunk held at step i
            return jax.lax.dynamic_slice_in_dim(w, ((idx + i) % n) * chunk, chunk, axis=0)

        def step(i, carry):
            acc, a = carry
            acc = acc + a @ w_rows(i)
            a = jax.lax.ppermute(a, 'Y', [(j, (j - 1) % n) for j in range(n)])
            return acc, a

        acc = jax.lax.pcast(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), ('X', 'Y'), to='varying')
        acc, a = jax.lax.fori_loop(0, n - 1, step, (acc, a))
        return acc + a @ w_rows(n - 1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)


def allgather_matmul_grads(A, W, dOut, *, mesh):
    def local(a, w, g):                   # a: [B/nX, D/nY], w: [D, F/nY], g: [B/nX, F/nY]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]
        back = [(j, (j - 1) % n) for j in range(n)]

        def w_rows(block):                # the rows of w that meet A's column block `block`
            return jax.lax.dynamic_slice_in_dim(w, block * chunk, chunk, axis=0)

        # dA: a reduce-scatter ring. Each step passes the partial sum on and adds this device's
        # term of the block it now holds; after n-1 steps the block that arrives is its own.
        def da_step(s, acc):
            acc = jax.lax.ppermute(acc, 'Y', back)
            return acc + g @ w_rows((idx + s + 1) % n).T

        dA = jax.lax.fori_loop(1, n, da_step, g @ w_rows((idx + 1) % n).T)

        # dW: A's blocks travel round the ring; block j gives rows j of dW, a_j.T @ g, summed
        # over X by one psum per block.
        def dw_step(s, carry):
            dw, a = carry
            piece = jax.lax.psum(a.T @ g, 'X')
            dw = jax.lax.dynamic_update_slice_in_dim(dw, piece, ((idx + s) % n) * chunk, axis=0)
            return dw, jax.lax.ppermute(a, 'Y', back)

        dw = jax.lax.pcast(jnp.zeros(w.shape, w.dtype), 'Y', to='varying')
        dw, a = jax.lax.fori_loop(0, n - 1, dw_step, (dw, a))
        last = jax.lax.psum(a.T @ g, 'X')
        dw = jax.lax.dynamic_update_slice_in_dim(dw, last, ((idx + n - 1) % n) * chunk, axis=0)
        return dA, dw

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y'), P('X', 'Y')),
                         out_specs=(P('X', 'Y'), P(None, 'Y')))(A, W, dOut)


def fsdp_train_step(W1, W2, x, y, *, mesh, lr):
    elements = x.shape[0] * x.shape[1]    # the loss is a mean over all B*D elements

    def local(w1, w2, xb, yb):            # w1: [D/nX, H], w2: [H/nX, D], xb, yb: [B/nX, D]
        def loss(w1, w2):
            W1 = jax.lax.all_gather(w1, 'X', axis=0, tiled=True)
            W2 = jax.lax.all_gather(w2, 'X', axis=0, tiled=True)
            out = jax.nn.gelu(xb @ W1) @ W2
            return jnp.sum((out - yb) ** 2) / elements

        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)   # psum_scatter'd: own rows, summed
        return w1 - lr * g1, w2 - lr * g2

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None),) * 4,
                         out_specs=(P('X', None), P('X', None)))(W1, W2, x, y)


def fsdp_train_step_jit(W1, W2, x, y, *, mesh, lr):
    whole = NamedSharding(mesh, P())
    owner = NamedSharding(mesh, P('X', None))

    def loss(W1, W2, x, y):
        W1 = jax.lax.with_sharding_constraint(W1, whole)     # gathered for use
        W2 = jax.lax.with_sharding_constraint(W2, whole)
        return jnp.mean((jax.nn.gelu(x @ W1) @ W2 - y) ** 2)

    @functools.partial(jax.jit, out_shardings=(owner, owner))
    def step(W1, W2, x, y):
        g1, g2 = jax.grad(loss, argnums=(0, 1))(W1, W2, x, y)
        g1 = jax.lax.with_sharding_constraint(g1, owner)     # each gradient to its owner
        g2 = jax.lax.with_sharding_constraint(g2, owner)
        return W1 - lr * g1, W2 - lr * g2

    return step(W1, W2, x, y)
