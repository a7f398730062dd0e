"""Assignment problem3: collective matmuls, graded on what the compiled program communicates.

The book's worked example and Problem 3 (How To Scale Your Model, Part 10): a matmul whose
input is sharded along the contracting dimension can overlap its communication with its
compute by moving chunks around a ring (Wang et al., 2023, as cited by the book).
"""
from __future__ import annotations

import numpy as np

from ..contract import Arg, Assignment, Case, Part, WrittenPart
from ..rules import (UNEVEN, AllOf, RingDirections, Exactly, Forbid, LargestMatmul, MatmulsInTheRing, MaxTotalBytes, NeighbourSteps,
                     OnlyKinds, PiecesMultipliedApart, SplitReduction)

VISIBLE = Case(mesh=(2, 4), sizes={"B": 8, "D": 16, "F": 32})
VISIBLE_SPLIT = Case(mesh=(2, 4), sizes={"B": 8, "D": 16, "F": 18})
"""allreduce_matmul's visible case: F even but a multiple of neither 4 nor nY, where a design
that pads F up to equal pieces (or to a multiple of the ring) sends more than the byte rule allows."""
BOOK = Case(mesh=(2, 4), sizes={"B": 1024, "D": 2048, "F": 8192})
"""The book's worked example: a TPU v5e-8 as a 2x4 mesh, B, D, F = 1024, 2048, 8192."""
F32 = 4


def _block(s):
    """Elements of one [B/nX, D/nY] block: what each ring step moves."""
    return (s["B"] // s["nX"]) * (s["D"] // s["nY"])


NOTHING_CROSSES_X = "The rings run over Y; each row of devices holds its own rows of the result, so nothing crosses X."


def _step_flops(s):
    """FLOPs of one ring step's product, [B/nX, D/nY] @ [D/nY, F/nY] (or, reduce-scattering,
    [B/nX, F/nY] @ [F/nY, D/nY]): the most one matmul of a collective matmul does at once."""
    return 2 * (s["B"] // s["nX"]) * (s["D"] // s["nY"]) * (s["F"] // s["nY"])


ONE_STEP = LargestMatmul(_step_flops, "one ring step's block product, 2(B/nX)(D/nY)(F/nY) FLOPs")


def in_the_ring(rings: int = 1) -> MatmulsInTheRing:
    """Every ring's matmuls inside it, but for its first (or last) block's product, and one
    more block where a partly unrolled loop leaves a step outside it."""
    first = "the first (or last) block's product" if rings == 1 else f"each of the {rings} rings' first (or last) block"
    return MatmulsInTheRing("Y", _step_flops, blocks=rings + 1,
                            what=f"{rings + 1} block products: {first}, and one step a partly unrolled loop may "
                                 f"leave outside it")


PIECE_BY_PIECE = PiecesMultipliedApart(
    "Y", lambda s: int(UNEVEN * 2 * (s["B"] // s["nX"]) * (s["D"] // s["nY"]) * s["F"]),
    f"{UNEVEN:.0%} of the whole local product's 2(B/nX)(D/nY)F FLOPs, so that each piece is multiplied on its own",
    ring=MatmulsInTheRing("Y", lambda s: 2 * (s["B"] // s["nX"]) * (s["D"] // s["nY"]) * -(-s["F"] // s["nY"]),
                          blocks=2, what="2 ring steps' block products of 2(B/nX)(D/nY)(F/nY) FLOPs (F/nY rounded "
                                         "up): the first block's, and one step a partly unrolled loop may leave "
                                         "outside it"))
"""A split reduction overlaps the matmul only if each piece is multiplied on its own: the
whole product sliced into pieces after it is made has nothing left to overlap. Run as a ring
of permutes, each step's block is multiplied in the step that sends it, as the reduce-scatter
ring of reducescatter_matmul does."""


def ring_of_permutes(rings: int = 1, why: str = "") -> AllOf:
    """`rings` rings of nY-1 collective-permutes over Y, each moving one [B/nX, D/nY] block."""
    count = "nY-1" if rings == 1 else f"{rings}(nY-1) ({rings} rings of nY-1)"
    return AllOf((
        OnlyKinds(("collective-permute",), why=why),
        Exactly("collective-permute", lambda s: rings * (s["nY"] - 1), elements=_block, axes=("Y",),
                what=f"{count}, each of (B/nX)*(D/nY) elements, counted each time a loop runs them"),
        Forbid("collective-permute", axes=("X",), why=NOTHING_CROSSES_X),
        NeighbourSteps("Y"),
        ONE_STEP,
        in_the_ring(rings),
    ))


def gelu(x):
    """jax.nn.gelu's default (tanh) form, in float64."""
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def scaled_inputs(*args: Arg):
    """A generator of random floats for `args`: the first (the activations) N(0, 1), each
    weight matrix N(0, 1/rows), so every product's elements stay of order one. gelu's input
    In @ Win then lies roughly in [-3, 3], its curved region, where the tanh form differs
    from the erf form (and from relu)."""
    def generate(case: Case, rng) -> list[np.ndarray]:
        out = []
        for i, arg in enumerate(args):
            shape = arg.shape(case)
            out.append((rng.standard_normal(shape) / np.sqrt(shape[0] if i else 1)).astype(np.float32))
        return out
    return generate


def matmul(a, w, *, mesh):
    return a @ w


def block(x, w_in, w_out, *, mesh):
    return gelu(x @ w_in) @ w_out


def jit_matmul(*out_spec):
    """The plain jax.jit product, the baseline every collective matmul is compared with,
    its result sharded as PartitionSpec(*out_spec)."""
    def baseline(a, w, *, mesh):
        import jax

        out = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*out_spec))
        return jax.jit(lambda a, w: a @ w, out_shardings=out)(a, w)
    return baseline


def jit_block(x, w_in, w_out, *, mesh):
    import jax

    f = lambda x, wi, wo: jax.nn.gelu(x @ wi) @ wo  # noqa: E731
    out = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("X", "Y"))
    return jax.jit(f, out_shardings=out)(x, w_in, w_out)


A = Arg("A", ("B", "D"), ("X", "Y"))
T = Arg("T", ("B", "F"), ("X", "Y"))
W_COLS = Arg("W", ("D", "F"), (None, "Y"))
W_ROWS = Arg("W", ("D", "F"), ("Y", None))
W2 = Arg("W2", ("F", "D"), ("Y", None))
BLOCK_ARGS = (Arg("In", ("B", "D"), ("X", "Y")), Arg("Win", ("D", "F"), (None, "Y")),
              Arg("Wout", ("F", "D"), ("Y", None)))
NOT_GATHERED = ("A collective matmul never gathers the whole operand: it moves one block per "
                "step around the Y ring while the matmul of the previous block runs.")

ASSIGNMENT = Assignment(
    name="problem3",
    title="Problem 3: collective matmuls",
    book_url="https://jax-ml.github.io/scaling-book/jax-stuff/",
    parts=(
        Part(
            name="allgather_matmul", points=2,
            task="A[B_X, D_Y] @ W[D, F_Y] -> Out[B_X, F_Y] as a ring of collective-permutes "
                 "(the book's worked example, made to run on current JAX).",
            args=(A, W_COLS), result=Arg("out", ("B", "F"), ("X", "Y")), inputs=scaled_inputs(A, W_COLS),
            rules=(ring_of_permutes(why=NOT_GATHERED), RingDirections()), reference=matmul, visible_case=VISIBLE,
            baseline=jit_matmul("X", "Y"), cost_case=BOOK,
        ),
        Part(
            name="allreduce_matmul", points=3,
            task="A[B_X, D_Y] @ W[D_Y, F] -> Out[B_X, F], the reduction over Y split into pieces "
                 "over F so that it can overlap the matmul.",
            args=(A, W_ROWS), result=Arg("out", ("B", "F"), ("X", None)), inputs=scaled_inputs(A, W_ROWS),
            rules=(AllOf((
                Forbid("all-gather", why="Only the partial sums need reducing; nothing needs gathering."),
                SplitReduction("Y", pieces=2, whole=lambda s: s["B"] // s["nX"] * s["F"]),
                PIECE_BY_PIECE,
                MaxTotalBytes(lambda s: int(1.05 * 2 * (s["nY"] - 1) / s["nY"] * (s["B"] // s["nX"]) * s["F"] * F32),
                              what="one ring all-reduce of the [B/nX, F] result, +5%", ring=True),
            )), RingDirections()),
            reference=matmul, visible_case=VISIBLE_SPLIT, baseline=jit_matmul("X", None), cost_case=BOOK,
        ),
        Part(
            name="reducescatter_matmul", points=4,
            task="T[B_X, F_Y] @ W2[F_Y, D] -> Out[B_X, D_Y], permuting partial results as they "
                 "accumulate, moving the minimum.",
            args=(T, W2), result=Arg("out", ("B", "D"), ("X", "Y")), inputs=scaled_inputs(T, W2),
            rules=(ring_of_permutes(why="Send each partial [B/nX, D/nY] block on around the ring "
                                      "instead of reducing the whole product."), RingDirections()),
            reference=matmul, visible_case=VISIBLE, baseline=jit_matmul("X", "Y"), cost_case=BOOK,
        ),
        Part(
            name="transformer_block", points=1,
            task="gelu(In[B_X, D_Y] @ Win[D, F_Y]) @ Wout[F_Y, D] -> Out[B_X, D_Y], with both "
                 "matmuls' communication overlapped.",
            args=BLOCK_ARGS, result=Arg("out", ("B", "D"), ("X", "Y")), inputs=scaled_inputs(*BLOCK_ARGS),
            rules=(ring_of_permutes(rings=2, why=NOT_GATHERED), RingDirections()), reference=block, visible_case=VISIBLE,
            baseline=jit_block, cost_case=BOOK,
        ),
    ),
    written=(
        WrittenPart("written_vma", 2,
                    "Why does the book's collective matmul fail on current JAX, and what does "
                    "jax.lax.pcast change?"),
        WrittenPart("written_speed", 2,
                    "How much faster than plain jax.jit does the cost model say each collective "
                    "matmul is on a TPU v5e, and when does overlapping stop paying?"),
    ),
)
