"""transformer_block with the erf form of gelu (approximate=False) where the contract asks for
jax.nn.gelu's default tanh form. The two differ by up to ~5e-4 inside [-3, 3], so the hidden
inputs keep gelu's input there (and tolerances are per element) to catch it: values wrong.

Broken part: transformer_block (values only).
"""

import jax


def transformer_block(In, Win, Wout, *, mesh):
    hidden = jax.nn.gelu(allgather_matmul(In, Win, mesh=mesh), approximate=False)
    return reducescatter_matmul(hidden, Wout, mesh=mesh)
