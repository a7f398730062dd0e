"""transformer_block with relu in place of gelu: right communication, wrong values wherever
gelu's input is negative or near zero (the hidden inputs keep it roughly in [-3, 3]).

Broken part: transformer_block (values only).
"""

import jax


def transformer_block(In, Win, Wout, *, mesh):
    hidden = jax.nn.relu(allgather_matmul(In, Win, mesh=mesh))
    return reducescatter_matmul(hidden, Wout, mesh=mesh)
