"""An estimate of how long a compiled program would take on a real chip.

The kit runs on a CPU, where timings say nothing about a TPU or a GPU. Instead, this
model takes what the compiled program does (FLOPs and memory traffic from XLA's
`cost_analysis`, every collective from the HLO analysis) and prices it with the chip
constants and ring formulas of *How To Scale Your Model*: Part 2 ("How to Think About
TPUs", the chip table), Part 3 ("Sharded Matrices", the collective costs) and Part 12
("How to Think About GPUs"). Every figure it prints is an estimate, and labelled so.

The collective model, per device, on one mesh axis of n devices joined in a ring with
one-way link bandwidth W (both directions usable at once):
- all-gather of a result of V bytes: (n - 1)/n * V / (2 W)   (a bidirectional ring)
- reduce-scatter of an operand of V bytes: the same
- all-reduce of V bytes: twice that (a reduce-scatter, then an all-gather)
- all-to-all of V bytes: a quarter of the all-gather of V (the book's rule of thumb)
- collective-permute of B bytes to a neighbour: B / W per direction; permutes that go
  opposite ways share no link, so their times overlap (this is why bidirectional
  collective matmuls are faster: each direction carries half the bytes).
Compute time is the larger of FLOPs / peak FLOP/s and bytes accessed / HBM bandwidth.
"""
from __future__ import annotations

import dataclasses

from rich import box
from rich.table import Table

from .hlo import Collective, ProgramAnalysis


@dataclasses.dataclass(frozen=True)
class Chip:
    """Published figures for one accelerator chip (per chip)."""

    name: str
    flops_per_s: float
    """Peak bf16 matrix FLOP/s (dense)."""
    hbm_bytes_per_s: float
    """HBM bandwidth."""
    link_bytes_per_s: float
    """One-way bandwidth of one link to a neighbour along a mesh axis (ICI for TPUs,
    NVLink per GPU for the H100, treating a node's NVLink switch as one ring)."""
    source: str


CHIPS: dict[str, Chip] = {c.name: c for c in (
    Chip("TPU v5e", 1.97e14, 8.1e11, 4.5e10, "How To Scale Your Model, Part 2, TPU specs table"),
    Chip("TPU v5p", 4.59e14, 2.8e12, 9.0e10, "How To Scale Your Model, Part 2, TPU specs table"),
    Chip("TPU v6e", 9.20e14, 1.6e12, 9.0e10, "How To Scale Your Model, Part 2, TPU specs table"),
    Chip("H100", 9.9e14, 3.35e12, 4.5e11, "How To Scale Your Model, Part 12, GPU specs (NVLink 4: 450 GB/s one way)"),
)}


def chip(name: str) -> Chip:
    try:
        return CHIPS[name]
    except KeyError:
        raise KeyError(f"unknown chip {name!r}; known: {', '.join(CHIPS)}") from None


def collective_seconds(c: Collective, on: Chip) -> float:
    """Time for one run of collective `c` on chip `on` (see the module's formulas)."""
    n, w = max(c.group_size, 1), on.link_bytes_per_s
    if c.kind == "collective-permute":
        return c.bytes / w
    if c.kind == "all-gather":
        volume = sum(r.bytes for r in c.results)
    else:
        volume = c.bytes
    ring = (n - 1) / n * volume / (2 * w)
    if c.kind == "all-reduce":
        return 2 * ring
    if c.kind in ("all-to-all", "ragged-all-to-all"):
        return ring / 4
    return ring  # all-gather, reduce-scatter, collective-broadcast


def communication_seconds(analysis: ProgramAnalysis, on: Chip) -> float:
    """All collectives, in sequence, except that permutes in opposite ring directions overlap."""
    total, permutes = 0.0, {}
    for c in analysis.collectives:
        seconds = collective_seconds(c, on) * (c.count or 1)
        if c.kind == "collective-permute" and len(c.shifts) == 1:
            key = (c.axes, "forward" if c.shifts[0] <= c.group_size // 2 else "backward")
            permutes[key] = permutes.get(key, 0.0) + seconds
        else:
            total += seconds
    by_axis: dict = {}
    for (axes, _), seconds in permutes.items():
        by_axis[axes] = max(by_axis.get(axes, 0.0), seconds)
    return total + sum(by_axis.values())


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Estimated time of one compiled program on one chip, per device (all in seconds)."""

    chip: str
    flops: float
    """FLOPs per device (from XLA's cost analysis, or given)."""
    compute_s: float
    """max(FLOPs / peak, bytes accessed / HBM bandwidth)."""
    comm_s: float
    """Every collective priced by the ring formulas."""
    comm_bytes: int | None
    """Bytes each device sends (None when a loop's trip count is unknown)."""

    @property
    def serialized_s(self) -> float:
        """Communication and compute one after the other."""
        return self.compute_s + self.comm_s

    @property
    def overlapped_s(self) -> float:
        """Communication entirely hidden behind compute (or the reverse): the best case."""
        return max(self.compute_s, self.comm_s)


def estimate(analysis: ProgramAnalysis, on: Chip | str, *, compute_s: float | None = None) -> Estimate:
    """Price a program's analysis on a chip. `compute_s` overrides the compute estimate
    (e.g. with a measured time, as the book's worked example does)."""
    on = chip(on) if isinstance(on, str) else on
    flops = analysis.flops or 0.0
    if compute_s is None:
        compute_s = max(flops / on.flops_per_s, (analysis.bytes_accessed or 0.0) / on.hbm_bytes_per_s)
    return Estimate(on.name, flops, compute_s, communication_seconds(analysis, on), analysis.total_bytes)


def pipelined_seconds(compute_s: float, comm_s: float, steps: int) -> float:
    """A ring of `steps` steps in which each step's transfer hides behind one step's compute:
    (steps - 1) overlapped steps, then the last chunk's compute alone. The collective
    matmul's own schedule (the book's worked example)."""
    if steps <= 1:
        return compute_s
    return (steps - 1) * max(compute_s / steps, comm_s / (steps - 1)) + compute_s / steps


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f}"


def comparison_table(programs: dict[str, ProgramAnalysis], on: Chip | str = "TPU v5e",
                     title: str | None = None) -> Table:
    """Side by side: collectives, bytes and estimated times of several programs on one chip."""
    on = chip(on) if isinstance(on, str) else on
    table = Table(title=title or f"estimated on {on.name} (an estimate from the book's model, not a measurement)",
                  box=box.SIMPLE_HEAVY, title_justify="left")
    for col in ("program", "collectives", "bytes sent / device", "compute (us)", "comm (us)",
                "serialized (us)", "overlapped (us)"):
        table.add_column(col, justify="left" if col in ("program", "collectives") else "right")
    for name, analysis in programs.items():
        e = estimate(analysis, on)
        kinds: dict[str, int] = {}
        for c in analysis.collectives:
            kinds[c.kind] = kinds.get(c.kind, 0) + (c.count or 1)
        listed = ", ".join(f"{k} x{v}" for k, v in kinds.items()) or "none"
        sent = "?" if e.comm_bytes is None else f"{e.comm_bytes:,}"
        table.add_row(name, listed, sent, _us(e.compute_s), _us(e.comm_s),
                      _us(e.serialized_s), _us(e.overlapped_s))
    table.caption = f"{on.name}: {on.flops_per_s:.3g} FLOP/s, HBM {on.hbm_bytes_per_s:.3g} B/s, " \
                    f"link {on.link_bytes_per_s:.3g} B/s one way ({on.source})"
    return table
