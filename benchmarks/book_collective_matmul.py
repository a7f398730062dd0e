"""The cost model against the book's own measurements of its collective matmul example.

    python benchmarks/book_collective_matmul.py

How To Scale Your Model, Part 10, times its worked example on a TPU v5e-8 used as a 2x4
mesh, B, D, F = 1024, 2048, 8192, with arrays from jnp.arange (int32, which the matrix
units do not run): 311 us for plain jax.jit, 244 us for the collective matmul, and 224 us
for the same matmul with no sharding on the contracting dimension.

The model is calibrated on that 224 us only: it sets the int32 matmul rate
(`assignments.costs.V5E_INT32_FLOPS_PER_S`), and every other figure comes from the book's
Part 2 and Part 3 on the slice's links. This compiles the three programs here (on the CPU,
from abstract inputs) and prices them on a 2x4 TPU v5e slice, where neither axis wraps
around (Part 2: v5e wraps only a full 16-chip axis), so the 4-chip Y axis is a line:
- plain jax.jit: its matmul waits for the all-gather of A over Y; the times add up;
- collective matmul: 4 steps, each chunk's matmul hiding the next permute
  (`pipelined_seconds`).
"""
from __future__ import annotations

import functools
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import assignments  # noqa: E402

assignments.setup_devices(8)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

from assignments.costs import estimate, pipelined_seconds, slice_for  # noqa: E402
from solutions.problem3 import allgather_matmul  # noqa: E402

BOOK = {"plain jax.jit": 311e-6, "collective matmul": 244e-6, "no contracting sharding": 224e-6}
SIZES = dict(B=1024, D=2048, F=8192)


def compile_abstract(fn, mesh, a_spec, B, D, F):
    a = jax.ShapeDtypeStruct((B, D), jnp.int32, sharding=NamedSharding(mesh, a_spec))
    w = jax.ShapeDtypeStruct((D, F), jnp.int32, sharding=NamedSharding(mesh, P(None, "Y")))
    return assignments.analyze(jax.jit(fn).lower(a, w).compile(), mesh)


def predictions(chip: str = "TPU v5e") -> dict:
    """{program: (predicted seconds, analysis)} and the slice assumed."""
    mesh = assignments.make_mesh((2, 4))
    tpu = slice_for(chip, (2, 4), ("X", "Y"))
    out_spec = NamedSharding(mesh, P("X", "Y"))
    plain = jax.jit(lambda a, w: a @ w, out_shardings=out_spec)
    collective = functools.partial(allgather_matmul, mesh=mesh)
    analyses = {
        "no contracting sharding": compile_abstract(plain, mesh, P("X", None), **SIZES),
        "plain jax.jit": compile_abstract(plain, mesh, P("X", "Y"), **SIZES),
        "collective matmul": compile_abstract(collective, mesh, P("X", "Y"), **SIZES),
    }
    e = {name: estimate(a, tpu) for name, a in analyses.items()}
    predicted = {
        "no contracting sharding": e["no contracting sharding"].serialized_s,
        "plain jax.jit": e["plain jax.jit"].serialized_s,      # the gather blocks the matmul
        "collective matmul": pipelined_seconds(e["collective matmul"].compute_s, e["collective matmul"].comm_s,
                                               steps=mesh.shape["Y"]),
    }
    return {"slice": tpu, "predicted": predicted, "analyses": analyses, "estimates": e}


def main() -> None:
    result = predictions()
    tpu, predicted, analyses = result["slice"], result["predicted"], result["analyses"]
    print("The book's worked example (Part 10): B, D, F = 1024, 2048, 8192, int32, 2x4 mesh")
    print(f"assumed: {tpu.describe()}")
    print(f"calibrated on the book's 224 us unsharded matmul only (the int32 matmul rate); JAX {jax.__version__}\n")
    print(f"{'program':24s} {'communication (from the compiled HLO)':44s} {'predicted':>10s} "
          f"{'book':>8s} {'ratio':>6s}")
    for name in ("no contracting sharding", "plain jax.jit", "collective matmul"):
        comm = "; ".join(f"{c.priced_kind} over {'+'.join(c.axes)} {c.shape} x{c.count}"
                         for c in analyses[name].collectives) or "none"
        print(f"{name:24s} {comm[:44]:44s} {predicted[name] * 1e6:8.0f}us {BOOK[name] * 1e6:6.0f}us "
              f"{predicted[name] / BOOK[name]:6.2f}")
    model = predicted["plain jax.jit"] / predicted["collective matmul"]
    book = BOOK["plain jax.jit"] / BOOK["collective matmul"]
    print(f"speed-up of the collective matmul: predicted {model:.2f}x, book {book:.2f}x, ratio {model / book:.2f}")


if __name__ == "__main__":
    main()
