"""An estimate of how long a compiled program would take on a real slice of chips.

The kit runs on a CPU, where timings say nothing about a TPU or a GPU. Instead, this model
takes what the compiled program does (its matmuls, its inputs and outputs, every collective
from the HLO analysis, `assignments.hlo`) and prices it with the chip figures and collective
costs of *How To Scale Your Model* (https://jax-ml.github.io/scaling-book/): Part 2 ("How to
Think About TPUs": the chip table, the ICI links, which slices wrap around), Part 3 ("Sharded
Matrices and How to Multiply Them": the cost of each collective) and Part 12 ("How to Think
About GPUs": the H100, NVLink within a node). Every figure it prints is an estimate, and
labelled so.

**The slice.** Each mesh axis is laid on one axis of the slice's physical topology
(`slice_for`), and is a *ring* only where the hardware has a wraparound link (Part 2):
TPU v5e and v6e wrap around only on a full 16-chip axis; TPU v4 and v5p only in slices made
of full 4x4x4 cubes (64 chips, or multiples: the optical switches close each axis of 4k chips;
"a 2x2x4 won't have any wraparounds"), so a mesh of fewer than 64 devices lies on lines. A
smaller mesh can still use a wrapped axis when it is laid inside a full cube, one of its
axes on one of the cube's 4-chip axes (`cube_slice`). Anything else is a *line*. The 8 GPUs
of an H100 node all reach one NVLink switch: every GPU sends through its own port (`switch`).
Every estimate prints the mapping.

**A collective**, one axis of n devices, one-way link bandwidth W (ICI links carry W each way
at once); V is the whole gathered (all-gather) or reduced (reduce-scatter, all-reduce) array
as one device holds it, O a device's all-to-all operand, b a permute's block. The time is the
bytes on the busiest link direction divided by W (`link bytes` below; Part 3's costs), or, when
that is shorter, its hops at about 1 us each (`HOP_SECONDS`, `hops`; Part 3's "note on ICI
latency": a hop takes max(1 us, its bytes / W)), so that a collective of a few kB shows as
latency-bound:

| collective | ring (wraparound) | line (no wraparound) | switch (H100 node) |
|---|---|---|---|
| all-gather, reduce-scatter | (n-1)/n V / 2 (both ways) | (n-1)/n V (the end link) | (n-1)/n V |
| all-reduce | 2 (n-1)/n V / 2 | 2 (n-1)/n V | 2 (n-1)/n V |
| all-to-all | n O / 8, the book's V/(4 W_ici) of the whole array nO | n O / 4 (the middle link) | (n-1)/n O |
| permute by k places | k b one way | routed along the line | b per permute, all through one port |

(For odd n the all-to-all uses floor(n/2) ceil(n/2) / n in place of n/4.) The program is
priced step by step, as the timeline (`assignments.steps`) groups its collectives: permutes of
one step on one axis share its links (their loads add up per link direction, and the busiest
direction sets the step's time), so permutes in opposite directions of one step overlap on a
ring but not on a line, where the wrapped pair of each ring (device 0 to device n-1) crosses
every link the other way; steps, and other collectives, run one after the other. A collective
over several axes uses the links of each: its single-axis price divided by the number of axes
(Part 3).

**What an accelerator runs.** XLA:CPU writes a reduce-scatter as an all-reduce whose result
only feeds a dynamic-slice of one device's share; the analysis marks it
(`Collective.accelerator_kind`) and it is priced as the reduce-scatter a GPU or TPU runs.
All-reduces that XLA's combiner merged into one tuple are priced as one all-reduce of all their
bytes, as a combined collective runs on an accelerator too.

**Compute** is the larger of the matmul time (the program's dot FLOPs, by operand dtype and
the precision each dot asks for, at the chip's peak for them: `Chip.peak`) and the memory time (the program's own HBM
traffic: inputs read once, outputs written once, XLA's temporaries written and read once, at
the HBM bandwidth). XLA:CPU's own FLOP and byte counts describe the CPU program (a loop body
counted once, CPU-specific copies), so they are not used.

**Estimated time** (`program_seconds`, the tables' *estimated* column) runs the program's
matmuls and collectives in the order its compiled program does (`assignments.steps`): a
collective overlaps the matmuls that do not need its result and holds up those that do, so
two programs with the same collectives and FLOPs differ when one waits where the other
overlaps. `Estimate.serialized_s` and `overlapped_s` are the two bounds of it.

**float32 matmuls run at the precision the program asks for** (JAX's `jax.lax.Precision`
docs; the compiled HLO carries it, `assignments.hlo.matmul_type`). A plain `a @ w` asks for
none, JAX's default: on a TPU one bf16 pass of the matrix units (the bf16 peak), on an H100
TF32 tensor cores. `precision="high"` takes 3 bf16 passes on a TPU, `"highest"` 6 (true
float32 on a GPU); a named algorithm (`jax.lax.DotAlgorithmPreset`, e.g. `BF16_BF16_F32_X3`)
is priced by its input type and passes. `jax.default_matmul_precision` changes the default.
"""
from __future__ import annotations

import dataclasses
import math
import re

from rich import box
from rich.table import Table

from .hlo import Collective, ProgramAnalysis

BOOK_PART2 = "How To Scale Your Model, Part 2 (TPUs), chip and ICI tables"
BOOK_PART12 = "How To Scale Your Model, Part 12 (GPUs), H100 SXM"

# The book's Part 10 worked example: an int32 matmul of 2 x 512 x 2048 x 2048 FLOPs per chip
# (B, D, F = 1024, 2048, 8192 on a 2x4 TPU v5e, no sharding on the contracting dimension)
# measured at 224 us. TPU matrix units take no int32 (the book says so): this is the only
# int32 rate published for a TPU, and the kit's int32 price for every TPU scales it with
# the chip's bf16 peak (an assumption, said so in Chip.peak_source).
BOOK_INT32_FLOPS = 2 * 512 * 2048 * 2048
BOOK_INT32_SECONDS = 224e-6
V5E_INT32_FLOPS_PER_S = BOOK_INT32_FLOPS / BOOK_INT32_SECONDS   # 1.92e13
INT32_SHARE_OF_BF16 = V5E_INT32_FLOPS_PER_S / 1.97e14              # 0.097
# float32 on a TPU: the matrix units take bf16. JAX's docs for jax.lax.Precision: DEFAULT
# computes float32 in bfloat16 (one pass, the inputs rounded to bf16), HIGH in 3 bf16 passes,
# HIGHEST in 6. A dot that names no precision gets DEFAULT.
TPU_F32_PASSES = {"default": 1, "high": 3, "highest": 6}
PRECISION_NAMES = {"default": "JAX's default precision", "high": "Precision.HIGH",
                   "highest": "Precision.HIGHEST"}


@dataclasses.dataclass(frozen=True)
class Chip:
    """Published figures for one accelerator chip (per chip)."""

    name: str
    flops_per_s: float
    """Peak bf16 matrix FLOP/s (dense)."""
    hbm_bytes_per_s: float
    """HBM bandwidth."""
    link_bytes_per_s: float
    """One-way bandwidth of one link to a neighbour along a mesh axis (ICI for TPUs; for the
    H100 a GPU's NVLink bandwidth into the node's switch, one way)."""
    source: str
    wraparound: str = "16"
    """Which axes close into rings: "16" (only a full 16-chip axis: v5e, v6e), "cube" (axes of
    4k chips of a slice made of full 4x4x4 cubes: v4, v5p) or "switch" (all GPUs of a node on
    one NVLink switch)."""
    peaks: tuple[tuple[str, float], ...] = ()
    """Matmul FLOP/s by HLO operand dtype other than float32 (bf16 is `flops_per_s`)."""
    peak_source: str = ""
    node_size: int = 0
    """For a switch: devices per node (NVLink reaches no further)."""
    precisions: tuple[tuple[str, float, str], ...] = ()
    """float32 matmuls at each `jax.lax.Precision` level: (level, FLOP/s, how the chip runs
    it), for "default" (what a dot that names none gets), "high" and "highest"."""

    def f32_peak(self, level: str = "default") -> float:
        """float32 matmul FLOP/s at a precision level ("default", "high", "highest")."""
        rates = {name: rate for name, rate, _ in self.precisions}
        return rates.get(level, rates.get("highest", self.flops_per_s))

    def peak(self, dtype: str) -> float:
        """Matmul FLOP/s for a dot's `assignments.hlo.matmul_type`: the HLO operand dtype (bf16,
        f32, s32, s8, ...), with the precision the dot asks for after a slash (``f32/highest``,
        ``f32/dot_bf16_bf16_f32_x3``)."""
        base, _, precision = dtype.partition("/")
        if precision.startswith("dot_"):
            return self.algorithm_peak(precision)
        table = dict(self.peaks)
        if base == "f32":
            return self.f32_peak(precision or "default")
        if base in table:
            return table[base]
        if base in ("f16", "bf16"):
            return self.flops_per_s
        if base in ("f64", "s64", "u64", "c64", "c128"):
            return self.f32_peak("highest") / 4   # no chip here has fast 64-bit matmuls
        return table["s32"] if base.startswith(("s", "u")) and "s32" in table else self.f32_peak("highest")

    def algorithm_peak(self, algorithm: str) -> float:
        """FLOP/s of a named dot algorithm (HLO ``dot_<lhs>_<rhs>_<accumulation>[_x<passes>]``,
        `jax.lax.DotAlgorithmPreset`): its input type's rate, divided by its passes."""
        words = [w for w in algorithm.removeprefix("dot_").split("_") if w != "any"]
        passes = next((int(w[1:]) for w in words if re.fullmatch(r"x\d+", w)), 1)
        kind = words[0] if words else "f32"
        rates = {name: rate for name, rate, _ in self.precisions}
        if kind in ("bf16", "f16"):
            rate = self.flops_per_s
        elif kind == "tf32":   # TF32 tensor cores on a GPU; a TPU has none (priced as 3 bf16 passes)
            rate = rates.get("tf32", self.f32_peak("high"))
        elif kind.startswith("f8"):
            rate = self.peak("s8")
        else:
            rate = self.f32_peak("highest")
        return rate / passes

    def precision_text(self, dtype: str) -> str:
        """How a dot of `matmul_type` `dtype` is priced, e.g. "f32 at JAX's default precision:
        1 bf16 pass, 1.97e+14 FLOP/s"."""
        base, _, precision = dtype.partition("/")
        if precision.startswith("dot_"):
            return f"{base} by algorithm {precision.removeprefix('dot_').upper()}: {self.peak(dtype):.3g} FLOP/s"
        if base != "f32":
            return f"{base}: {self.peak(dtype):.3g} FLOP/s"
        level = precision or "default"
        how = next((h for name, _, h in self.precisions if name == level), "")
        return f"f32 at {PRECISION_NAMES.get(level, level)}: {how}, {self.peak(dtype):.3g} FLOP/s"


def _tpu(name, bf16, int8, hbm, link, wraparound):
    passes = TPU_F32_PASSES
    return Chip(name, bf16, hbm, link, BOOK_PART2, wraparound,
                peaks=(("bf16", bf16), ("s32", bf16 * INT32_SHARE_OF_BF16), ("s8", int8), ("u8", int8)),
                precisions=tuple((level, bf16 / n, f"{n} bf16 pass{'es' if n > 1 else ''}")
                                 for level, n in passes.items()),
                peak_source=("bf16 and int8: the book's Part 2; f32: 1, 3 or 6 bf16 passes at JAX's "
                             "default, HIGH and HIGHEST precision (JAX docs, jax.lax.Precision); int32: "
                             "the book's Part 10 v5e measurement (224 us for 2*512*2048*2048 FLOPs), "
                             "scaled by the bf16 peak"))


CHIPS: dict[str, Chip] = {c.name: c for c in (
    _tpu("TPU v4", 2.75e14, 2.75e14, 1.2e12, 4.5e10, "cube"),
    _tpu("TPU v5e", 1.97e14, 3.94e14, 8.1e11, 4.5e10, "16"),
    _tpu("TPU v5p", 4.59e14, 9.18e14, 2.8e12, 9.0e10, "cube"),
    _tpu("TPU v6e", 9.20e14, 1.84e15, 1.6e12, 9.0e10, "16"),
    Chip("H100", 9.9e14, 3.35e12, 4.5e11, BOOK_PART12 + " (NVLink 4: 900 GB/s per GPU, 450 GB/s one way)",
         "switch", peaks=(("bf16", 9.9e14), ("s32", 3.35e13), ("s8", 1.98e15)),
         precisions=(("default", 4.95e14, "TF32 tensor cores"), ("high", 4.95e14, "TF32 tensor cores"),
                     ("highest", 6.7e13, "float32 CUDA cores"), ("tf32", 4.95e14, "TF32 tensor cores")),
         peak_source="bf16, int8: the book's Part 12; f32 (HIGHEST) 67 TFLOP/s without tensor cores and "
                     "TF32 (JAX's default and HIGH on a GPU) 495 TFLOP/s dense (NVIDIA H100 SXM datasheet); "
                     "int32 half the f32 rate (NVIDIA Hopper whitepaper, 64 INT32 lanes per SM against 128 FP32)",
         node_size=8),
)}


def chip(name: str) -> Chip:
    try:
        return CHIPS[name]
    except KeyError:
        raise KeyError(f"unknown chip {name!r}; known: {', '.join(CHIPS)}") from None


# ---------------------------------------------------------------------------------------
# The slice: which mesh axes are rings


@dataclasses.dataclass(frozen=True)
class AxisLinks:
    """How one mesh axis is wired on the slice."""

    name: str
    size: int
    topology: str
    """"ring" (wraparound link), "line" (no wraparound) or "switch" (NVLink switch)."""
    why: str

    def __str__(self) -> str:
        return f"{self.name} = {self.size} {'GPUs' if self.topology == 'switch' else 'chips'}, {self.topology} ({self.why})"


@dataclasses.dataclass(frozen=True)
class Slice:
    """A chip and how each mesh axis lies on its links."""

    chip: Chip
    axes: tuple[AxisLinks, ...]
    within: str = ""
    """Where the mesh lies when it is part of a larger slice, e.g. "inside a 4x4x4 cube"."""

    @property
    def name(self) -> str:
        shape = 'x'.join(str(a.size) for a in self.axes) or '1'
        return f"{self.chip.name} {shape}" + (f" ({self.within})" if self.within else "")

    def axis(self, name: str) -> AxisLinks | None:
        return next((a for a in self.axes if a.name == name), None)

    def describe(self) -> str:
        return f"{self.name} slice: " + "; ".join(map(str, self.axes))


CUBE = 64
"""Chips in a full 4x4x4 cube of a TPU v4 or v5p: the smallest slice with wraparound links."""


def axis_links(on: Chip, name: str, size: int, wraparound: bool | None = None,
               chips: int | None = None) -> AxisLinks:
    """The book's Part 2 rule for one mesh axis of `size` devices laid on one axis of a slice of
    `chips` chips (unknown: a slice no larger than the axis needs)."""
    if on.wraparound == "switch":
        return AxisLinks(name, size, "switch", "NVLink switch within a node")
    if wraparound is not None:
        return AxisLinks(name, size, "ring" if wraparound else "line", "as asked")
    if on.wraparound == "16":
        ring = size == 16
        why = "a full 16-chip axis wraps around" if ring else "v5e/v6e wrap around only on a full 16-chip axis"
    else:
        chips = size if chips is None else chips
        cubes = chips % CUBE == 0
        ring = cubes and size % 4 == 0
        why = ("an axis of a slice of full 4x4x4 cubes wraps around" if ring
               else "v4/v5p wrap around only on an axis of 4k chips of a slice of full 4x4x4 cubes"
               if cubes else f"a slice of fewer than {CUBE} chips (less than a full 4x4x4 cube) has no wraparound")
    return AxisLinks(name, size, "ring" if ring else "line", why)


def slice_for(on: Chip | str, mesh_shape, axis_names, wraparound: dict | None = None) -> Slice:
    """Lay a mesh on a slice of `on`: each mesh axis on its own axis of the slice (a 2x4 mesh
    on a 2x4 slice). `wraparound={"Y": True}` overrides the book's rule for an axis."""
    on = chip(on) if isinstance(on, str) else on
    if on.wraparound == "switch" and math.prod(mesh_shape) > on.node_size:
        raise ValueError(f"{on.name}: the model covers one NVLink node of {on.node_size} GPUs, "
                         f"not {math.prod(mesh_shape)}")
    wraparound = wraparound or {}
    chips = math.prod(int(n) for n in mesh_shape)
    return Slice(on, tuple(axis_links(on, a, int(n), wraparound.get(a), chips)
                           for a, n in zip(axis_names, mesh_shape)))


def cube_slice(on: Chip | str, mesh_shape, axis_names, ring: str) -> Slice:
    """A mesh of fewer than 64 devices laid inside one full 4x4x4 cube of a TPU v4 or v5p (the
    smallest slice whose axes wrap around, Part 2): mesh axis `ring`, of 4 devices, on one of
    the cube's 4-chip axes, which the cube's wraparound closes into a ring; every other mesh axis
    on part of another cube axis, a line. The rest of the cube runs other work (say, other
    replicas of the model) and is not priced."""
    on = chip(on) if isinstance(on, str) else on
    if on.wraparound != "cube":
        raise ValueError(f"{on.name} is not built of 4x4x4 cubes")
    sizes = dict(zip(axis_names, (int(n) for n in mesh_shape)))
    if sizes.get(ring) != 4 or any(n > 4 for a, n in sizes.items() if a != ring) \
            or math.prod(sizes.values()) > CUBE:
        raise ValueError(f"a {'x'.join(map(str, sizes.values()))} mesh with {ring} of 4 does not fit one "
                         f"4x4x4 cube that way")
    return Slice(on, tuple(
        AxisLinks(a, n, "ring", "a full 4-chip axis of a 4x4x4 cube: its wraparound closes it") if a == ring
        else AxisLinks(a, n, "line", f"{n} chip{'s' if n != 1 else ''} of a 4-chip cube axis: no wraparound between them")
        for a, n in sizes.items()), within="inside a 4x4x4 cube")


def _slice_of(analysis: ProgramAnalysis, on: Chip | Slice | str) -> Slice:
    if isinstance(on, Slice):
        return on
    on = chip(on) if isinstance(on, str) else on
    if analysis.mesh_shape:
        return slice_for(on, analysis.mesh_shape, analysis.axis_names)
    # No mesh recorded (an old analysis): each axis as long as the groups that run over it.
    sizes = {}
    for c in analysis.collectives:
        if len(c.axes) == 1:
            sizes[c.axes[0]] = c.group_size
    return Slice(on, tuple(axis_links(on, a, n) for a, n in sorted(sizes.items())))


# ---------------------------------------------------------------------------------------
# Prices


@dataclasses.dataclass(frozen=True)
class Price:
    """One collective, one execution, on one slice."""

    kind: str
    """What the accelerator runs (may differ from the CPU program's `Collective.kind`)."""
    topology: str
    """e.g. "Y: line of 4"."""
    sent_bytes: float
    """Bytes each device sends (all its links together)."""
    link_bytes: float
    """Bytes on the busiest link direction."""
    seconds: float
    """max(link_bytes / W, hops x `HOP_SECONDS`): bandwidth- or latency-bound."""
    note: str = ""
    hops: int = 0
    """Link hops its data takes one after the other (`hops`); 0 on an NVLink switch."""

    @property
    def latency_bound(self) -> bool:
        """Its hops take longer than its bytes (`seconds` is then hops x `HOP_SECONDS`)."""
        return self.hops > 0 and self.seconds == self.hops * HOP_SECONDS


HOP_SECONDS = 1e-6
"""Time one hop over an ICI link takes whatever the bytes: about 1 us (the book's Part 3, "A note
on ICI latency"). The book prices a hop at max(1 us, its bytes / W), so a collective of h hops in
a row takes at least h us: gathering or sending a few kB is latency-bound (on a v5e, anything
under 4.5e10 B/s x 1 us = 45 kB a hop). The kit prices no latency for NVLink."""


def hops(kind: str, topology: str, n: int, shift: int | None = None) -> int:
    """Link hops the farthest data of one collective crosses, one after the other, on an axis of
    n devices: an all-gather, reduce-scatter or all-to-all on a ring reaches the farthest device
    in n // 2 hops each way (the book's |X| / 2), on a line from end to end in n - 1; an
    all-reduce is a reduce-scatter and an all-gather, twice that; a permute by k places, min(k,
    n - k) hops on a ring, and on a line the longest of its straight routes, max(k, n - k) (the
    wrapped pairs cross the line)."""
    if topology == "switch" or n <= 1:
        return 0
    if kind == "collective-permute":
        if shift is None:
            return 1
        k = shift % n
        if k == 0:
            return 0
        return min(k, n - k) if topology == "ring" else max(k, n - k)
    one = n // 2 if topology == "ring" else n - 1
    return 2 * one if kind == "all-reduce" else one


def _seconds(link_bytes: float, w: float, hop_count: int) -> float:
    return max(link_bytes / w, hop_count * HOP_SECONDS)


def _topology_of(c: Collective, s: Slice) -> tuple[str, int, str]:
    """(topology, n, label) of the links collective `c` runs over."""
    links = [s.axis(a) for a in c.axes]
    if not links or any(l is None for l in links):
        topo = "switch" if s.chip.wraparound == "switch" else "ring"
        return topo, max(c.group_size, 1), f"{'+'.join(c.axes) or '?'}: {topo} of {c.group_size}"
    topo = ("switch" if links[0].topology == "switch"
            else "ring" if all(l.topology == "ring" for l in links) else "line")
    return topo, max(c.group_size, 1), f"{'+'.join(c.axes)}: {topo} of {c.group_size}"


def _permute_loads(topology: str, n: int, shift: int, block: float) -> dict:
    """Bytes each link direction carries when every device of an n-axis sends `block` bytes
    `shift` places on (mod n). Keys: (link i between positions i and i+1 or i and (i+1) % n,
    +1 or -1)."""
    loads: dict = {}
    shift %= n
    if shift == 0:
        return loads
    if topology == "switch":
        return {("port", +1): float(block)}
    for j in range(n):
        t = (j + shift) % n
        if topology == "ring":
            fwd, back = shift, n - shift
            routes = [(+1, fwd, 1.0)] if fwd < back else [(-1, back, 1.0)] if back < fwd else \
                [(+1, fwd, 0.5), (-1, back, 0.5)]
            for direction, hops, share in routes:
                for h in range(hops):
                    link = (j + h) % n if direction > 0 else (j - h - 1) % n
                    loads[(link, direction)] = loads.get((link, direction), 0.0) + share * block
        else:  # a line: straight from j to t
            direction = 1 if t > j else -1
            for link in range(min(j, t), max(j, t)):
                loads[(link, direction)] = loads.get((link, direction), 0.0) + block
    return loads


def _all_to_all_link_share(topology: str, n: int) -> float:
    """Busiest link direction of an all-to-all, as a share of one device's operand O."""
    if topology == "switch":
        return (n - 1) / n
    cut = (n // 2) * ((n + 1) // 2) / n        # blocks of O/n crossing the middle, each way
    return cut / 2 if topology == "ring" else cut


def price(c: Collective, on: Chip | Slice | str) -> Price:
    """The book's price of one execution of collective `c` (see the module's table)."""
    s = on if isinstance(on, Slice) else Slice(chip(on) if isinstance(on, str) else on, ())
    topology, n, label = _topology_of(c, s)
    w = s.chip.link_bytes_per_s
    kind = c.priced_kind
    note = ""
    if c.accelerator_kind:
        note = f"XLA:CPU wrote an {c.kind} + dynamic-slice; priced as the {kind} an accelerator runs"
    elif c.pieces > 1:
        note = f"{c.pieces} arrays combined into one {c.kind} by XLA's combiner; priced as one of all their bytes"
    both = 2 if topology == "ring" else 1       # a ring sends half each way
    axes = max(len(c.axes), 1)
    if kind == "collective-permute":
        block = float(c.bytes)
        if len(c.shifts) == 1 and len(c.axes) == 1:
            link = max(_permute_loads(topology, n, c.shifts[0], block).values(), default=0.0)
            h = hops(kind, topology, n, c.shifts[0])
        else:
            link, h = block, hops(kind, topology, n)
        return Price(kind, label, block, link, _seconds(link, w, h), _latency_note(note, link, w, h), h)
    if kind == "all-gather":
        volume = float(sum(r.bytes for r in c.results))
    else:
        volume = float(c.bytes)
    if kind in ("all-to-all", "ragged-all-to-all"):
        sent = (n - 1) / n * volume
        link = _all_to_all_link_share(topology, n) * volume
    else:
        sent = (n - 1) / n * volume * (2 if kind == "all-reduce" else 1)
        link = sent / both
    link /= axes
    h = hops(kind, topology, n)
    return Price(kind, label, sent, link, _seconds(link, w, h), _latency_note(note, link, w, h), h)


def _latency_note(note: str, link: float, w: float, h: int) -> str:
    """The price's note, with "latency-bound" when its hops take longer than its bytes."""
    if h * HOP_SECONDS <= link / w:
        return note
    bound = f"latency-bound: {h} hop{'s' if h != 1 else ''} x 1 us > {link:,.0f} bytes / link bandwidth"
    return f"{note}; {bound}" if note else bound


def collective_seconds(c: Collective, on: Chip | Slice | str) -> float:
    """Time for one run of collective `c`. On a `Slice` each axis is a ring or a line as the
    slice says; on a bare `Chip` the axis is laid on the chip's slice by the book's rule."""
    if not isinstance(on, Slice):
        on = chip(on) if isinstance(on, str) else on
        on = Slice(on, tuple(axis_links(on, a, c.group_size) for a in c.axes)) if len(c.axes) == 1 else Slice(on, ())
    return price(c, on).seconds


def _pooled(analysis: ProgramAnalysis, s: Slice, collectives, runs_of) -> tuple[float, float, float]:
    """(seconds, sent, busiest-link bytes) of `collectives` run together, each `runs_of(c)`
    times: the permutes of one axis share its links (their loads add up per link direction;
    the busiest direction sets the time, or their hops when those take longer: permutes that
    run together wait out their latency together), everything else one after the other."""
    w = s.chip.link_bytes_per_s
    seconds = sent = link = 0.0
    groups: dict = {}
    for c in collectives:
        p = price(c, s)
        runs = runs_of(c)
        sent += p.sent_bytes * runs
        if c.priced_kind == "collective-permute" and len(c.shifts) == 1 and len(c.axes) == 1:
            topology, n, _ = _topology_of(c, s)
            groups.setdefault(c.axes[0], (topology, n, []))[2].append(c)
        else:
            seconds += p.seconds * runs
            link += p.link_bytes * runs
    for topology, n, cs in groups.values():
        loads: dict = {}
        latency = 0.0
        for c in cs:
            for key, b in _permute_loads(topology, n, c.shifts[0], float(c.bytes)).items():
                loads[key] = loads.get(key, 0.0) + b * runs_of(c)
            latency = max(latency, hops(c.priced_kind, topology, n, c.shifts[0]) * runs_of(c) * HOP_SECONDS)
        busiest = max(loads.values(), default=0.0)
        seconds += max(busiest / w, latency)
        link += busiest
    return seconds, sent, link


def communication(analysis: ProgramAnalysis, on: Chip | Slice | str) -> tuple[float, float, float]:
    """(seconds, bytes each device sends, bytes on the busiest link direction) for a whole
    execution, priced step by step as the timeline runs them (`assignments.steps`): the
    collectives of one step run together (the permutes of one axis share its links: their
    loads add up per link direction, the busiest direction sets the step's time), and steps
    run one after the other, each as often as its collectives run. So a design that sends
    one way in one step and the other way in the next pays for both steps, as it does on the
    timeline. An analysis with no stages (or collectives no stage lists) is priced as one step."""
    s = _slice_of(analysis, on)
    count = lambda c: c.count or 1  # noqa: E731
    steps: list[list] = []
    listed: set[int] = set()
    if analysis.stages:
        from .steps import event_needs, group_steps

        for stage in analysis.stages:
            for step in group_steps(stage, event_needs(stage)):
                idx = [stage.events[i].collective for i in step
                       if 0 <= stage.events[i].collective < len(analysis.collectives)]
                idx = [k for k in idx if k not in listed]
                listed.update(idx)
                if idx:
                    steps.append([analysis.collectives[k] for k in idx])
    rest = [c for k, c in enumerate(analysis.collectives) if k not in listed]
    seconds = sent = link = 0.0
    for step in steps:
        # One run of the step, priced together, times the runs of the step (its collectives'
        # count; they run once per run of the stage, or of a loop inside it).
        runs = max(count(c) for c in step)
        t, b, l = _pooled(analysis, s, step, lambda c: count(c) / runs)
        seconds, sent, link = seconds + t * runs, sent + b * runs, link + l * runs
    t, b, l = _pooled(analysis, s, rest, count)
    return seconds + t, sent + b, link + l


def communication_seconds(analysis: ProgramAnalysis, on: Chip | Slice | str) -> float:
    """All collectives of a program (see `communication`)."""
    return communication(analysis, on)[0]


# ---------------------------------------------------------------------------------------
# Compute


def hbm_bytes(analysis: ProgramAnalysis) -> float:
    """The program's own HBM traffic per device: inputs read once, outputs written once, XLA's
    temporaries written and read once."""
    return float((analysis.argument_bytes or 0) + (analysis.output_bytes or 0) + 2 * (analysis.temp_bytes or 0))


def matmul_seconds(analysis: ProgramAnalysis, on: Chip) -> float:
    """The program's dot FLOPs at the chip's peak for each operand dtype."""
    if analysis.dot_flops is None:   # an analysis made before dot FLOPs were read: XLA's count at bf16
        return (analysis.flops or 0.0) / on.flops_per_s
    return sum(f / on.peak(dtype) for dtype, f in analysis.dot_flops)


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Estimated time of one compiled program on one slice, per device (all in seconds)."""

    chip: str
    flops: float
    """Matmul FLOPs per device."""
    compute_s: float
    """max(matmul time, memory time)."""
    comm_s: float
    """Every collective priced by the book's costs on the slice's links."""
    comm_bytes: float | None
    """Bytes each device sends over its links (None when a loop's trip count is unknown)."""
    link_bytes: float = 0.0
    """Bytes on the busiest link direction."""
    matmul_s: float = 0.0
    memory_s: float = 0.0
    slice: str = ""
    """The mesh-to-slice mapping the estimate assumed."""

    @property
    def serialized_s(self) -> float:
        """Communication and compute one after the other."""
        return self.compute_s + self.comm_s

    @property
    def overlapped_s(self) -> float:
        """Communication entirely hidden behind compute (or the reverse): the best case."""
        return max(self.compute_s, self.comm_s)


def estimate(analysis: ProgramAnalysis, on: Chip | Slice | str, *, compute_s: float | None = None) -> Estimate:
    """Price a program's analysis on a chip (its mesh laid on a slice by `slice_for`) or on a
    given `Slice`. `compute_s` overrides the compute estimate (e.g. with a measured time, as
    the book's worked example does)."""
    s = _slice_of(analysis, on)
    flops = sum(f for _, f in analysis.dot_flops) if analysis.dot_flops is not None else (analysis.flops or 0.0)
    mm = matmul_seconds(analysis, s.chip)
    mem = hbm_bytes(analysis) / s.chip.hbm_bytes_per_s
    if compute_s is None:
        compute_s = max(mm, mem)
    comm_s, sent, link = communication(analysis, s)
    known = all(c.count is not None for c in analysis.collectives)
    return Estimate(s.chip.name, flops, compute_s, comm_s, sent if known else None, link, mm, mem, s.describe())


def pipelined_seconds(compute_s: float, comm_s: float, steps: int) -> float:
    """A ring of `steps` steps in which each step's transfer hides behind one step's compute:
    (steps - 1) overlapped steps, then the last chunk's compute alone. The collective
    matmul's own schedule (the book's worked example)."""
    if steps <= 1:
        return compute_s
    return (steps - 1) * max(compute_s / steps, comm_s / (steps - 1)) + compute_s / steps


# ---------------------------------------------------------------------------------------
# Tables


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f}"


def _mb(n: float | None) -> str:
    return "?" if n is None else f"{n / 1e6:,.2f}"


def _listed(analysis: ProgramAnalysis) -> str:
    kinds: dict[str, int] = {}
    for c in analysis.collectives:
        label = c.priced_kind + ("*" if c.accelerator_kind else "")
        kinds[label] = kinds.get(label, 0) + (c.count or 1)
    return ", ".join(f"{k} x{v}" for k, v in kinds.items()) or "none"


def with_trip_counts(analysis: ProgramAnalysis) -> ProgramAnalysis:
    """The analysis with each loop whose trip count the compiler did not know (a `Stage` of
    `runs` None) run as many times as its collectives were counted, when a caller counted them
    (set `Collective.count`, as problem2 does for the rounds of its all-to-all loop).

    `communication` multiplies each collective by its count; the timeline runs a stage `runs`
    times and counts an unknown trip count once. Without this, the same program's estimated
    time would count the loop once while its communication counts every run, and could come
    out below its own communication time."""
    if not analysis.stages:
        return analysis
    stages, changed = [], False
    for stage in analysis.stages:
        counts = {analysis.collectives[e.collective].count for e in stage.events
                  if 0 <= e.collective < len(analysis.collectives)}
        if stage.runs is None and len(counts) == 1 and None not in counts:
            stage, changed = dataclasses.replace(stage, runs=counts.pop()), True
        stages.append(stage)
    return dataclasses.replace(analysis, stages=tuple(stages)) if changed else analysis


def program_seconds(analysis: ProgramAnalysis, on: Chip | Slice | str) -> float:
    """The program's estimated time with its work in the order it compiled to
    (`assignments.steps.timeline`): a collective overlaps the matmuls that do not need its
    result and holds up those that do; a loop's iterations run one after another, as many as
    its trip count, or as many as the caller counted for its collectives (`with_trip_counts`)."""
    from .steps import timeline

    analysis = with_trip_counts(analysis)
    return timeline(analysis, _slice_of(analysis, on)).total_s


def matmul_text(analysis: ProgramAnalysis, on: Chip) -> str:
    """How the program's matmuls are priced, e.g. "f32 at JAX's default precision: 1 bf16 pass,
    1.97e+14 FLOP/s"."""
    types = [t for t, f in (analysis.dot_flops or ()) if f > 0]
    return "; ".join(on.precision_text(t) for t in types) or "no matmuls"


def _matmuls_line(text: str) -> str:
    """The caption's line on how the programs' matmuls are priced (`matmul_text`), where they all
    price them alike."""
    return "no matmuls: compute is the HBM traffic alone" if text == "no matmuls" else f"matmuls: {text}"


def comparison_table(programs: dict[str, ProgramAnalysis], on: Chip | Slice | str = "TPU v5e",
                     title: str | None = None) -> Table:
    """Side by side: collectives, bytes and estimated times of several programs on one slice.
    "estimated" is each program's own schedule (`program_seconds`), so two programs with the
    same collectives and matmuls differ when one of them waits where the other overlaps."""
    first = next(iter(programs.values()), None)
    s = _slice_of(first, on) if first is not None else (on if isinstance(on, Slice) else Slice(chip(on), ()))
    table = Table(title=title or f"estimated on {s.chip.name} (an estimate from the book's model, not a measurement)",
                  box=box.SIMPLE_HEAVY, title_justify="left")
    for col in ("program", "collectives", "MB sent per device", "MB on busiest link", "compute us", "comm us",
                "estimated us"):
        table.add_column(col, justify="left" if col in ("program", "collectives") else "right")
    notes, matmuls = [], {}
    for name, analysis in programs.items():
        where = s if isinstance(on, Slice) else s.chip
        e = estimate(analysis, where)
        table.add_row(name, _listed(analysis), _mb(e.comm_bytes), _mb(e.link_bytes), _us(e.compute_s),
                      _us(e.comm_s), _us(program_seconds(analysis, where)))
        matmuls[name] = matmul_text(analysis, s.chip)
        for c in analysis.collectives:
            note = price(c, s).note
            if note and f"{name}: {note}" not in notes:
                notes.append(f"{name}: {note}")
    c = s.chip
    same = len(set(matmuls.values())) == 1
    table.caption = "\n".join([
        s.describe(),
        f"{c.name}: bf16 {c.flops_per_s:.3g} FLOP/s; HBM {c.hbm_bytes_per_s:.3g} B/s; link "
        f"{c.link_bytes_per_s:.3g} B/s one way ({c.source})",
        *([_matmuls_line(next(iter(matmuls.values())))] if same and matmuls else
          [f"matmuls of {name}: {text}" for name, text in matmuls.items()]),
        "compute = max(matmul FLOPs / peak at their dtype and precision, HBM bytes / HBM bandwidth); "
        "comm = bytes on the busiest link direction / link bandwidth, or 1 us per link hop when that is "
        "longer (the book's Part 3: a small collective is latency-bound), step by step; estimated = both in the order "
        "the compiled program runs them: a collective overlaps the matmuls that do not need its "
        "result and holds up those that do",
        *[("* " if "dynamic-slice" in n else "") + n for n in notes],
    ])
    return table


def collective_table(analysis: ProgramAnalysis, on: Chip | Slice | str = "TPU v5e", title: str | None = None) -> Table:
    """Each collective of a program with its price: bytes each device sends, bytes on the
    busiest link direction, time per run and in all."""
    s = _slice_of(analysis, on)
    table = Table(title=title or f"each collective on {s.name} (estimate)", box=box.SIMPLE_HEAVY, title_justify="left")
    for col in ("collective", "links", "per device", "runs", "bytes sent/device", "bytes busiest link", "hops",
                "us per run", "us in all"):
        table.add_column(col, justify="left" if col in ("collective", "links", "per device") else "right")
    for c in analysis.collectives:
        p = price(c, s)
        table.add_row(p.kind + ("*" if c.accelerator_kind else ""), p.topology, c.shape,
                      "?" if c.count is None else str(c.count), f"{p.sent_bytes:,.0f}", f"{p.link_bytes:,.0f}",
                      str(p.hops), _us(p.seconds) + (" (latency)" if p.latency_bound else ""),
                      "?" if c.count is None else _us(p.seconds * c.count))
    table.caption = (s.describe() + "\nus per run = bytes on the busiest link / link bandwidth, or 1 us per hop "
                     "when that is longer: (latency) marks a latency-bound run (the book's Part 3)")
    return table
