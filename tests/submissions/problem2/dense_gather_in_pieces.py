"""moe_local that makes the dense W[B] gather in pieces: one [D, F] copy of its expert's matrix
for each token, all S of them live at once (held together by an optimization_barrier), then
each token multiplied by its own copy. Right values, and no one value is [S, D, F], but the
temporary memory holds S*D*F floats: the dense array in pieces."""
import jax
import jax.numpy as jnp


def moe_local(W, A, B):
    S = A.shape[0]
    copies = tuple(jax.lax.dynamic_index_in_dim(W, B[i], 0, keepdims=False) for i in range(S))  # S x [D, F]
    copies = jax.lax.optimization_barrier(copies)
    return jnp.concatenate([A[i][None] @ copies[i] for i in range(S)], 0)
