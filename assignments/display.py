"""Pictures and tables for students: the communication table, mesh and sharding pictures."""
from __future__ import annotations

import jax
import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table

from .hlo import ProgramAnalysis

console = Console()


def communication_table(analysis: ProgramAnalysis, title: str = "Communication") -> Table:
    """One row per collective: kind, mesh axes, per-device shape, bytes, times run."""
    table = Table(title=title, box=box.SIMPLE_HEAVY, title_justify="left")
    for col, justify in (("collective", "left"), ("mesh axes", "left"), ("per-device operand", "left"),
                         ("bytes", "right"), ("times run", "right"), ("total bytes", "right")):
        table.add_column(col, justify=justify)
    for c in analysis.collectives:
        count = "?" if c.count is None else str(c.count)
        total = "?" if c.count is None else f"{c.bytes * c.count:,}"
        kind = c.kind + (f" ({c.pieces} pieces)" if c.pieces > 1 else "")
        axes = "+".join(c.axes) or "-"
        if c.directions:  # which way around the ring a permute goes
            axes += " (" + ", ".join(f"{d:+d}" for d in c.directions) + ")"
        table.add_row(kind, axes, c.shape, f"{c.bytes:,}", count, total)
    if not analysis.collectives:
        table.add_row("[green]none[/green]", "", "no communication", "0", "", "0")
    if analysis.temp_bytes is not None:
        table.caption = f"temporary memory per device: {analysis.temp_bytes:,} bytes"
    return table


def show_mesh(mesh) -> None:
    """Draw the mesh: which device sits at each (X, Y) position."""
    table = Table(title=f"mesh {dict(mesh.shape)}", box=box.SQUARE, show_header=True)
    names = mesh.axis_names
    devices = np.asarray(mesh.devices)
    if devices.ndim == 1:
        devices = devices[None, :]
    table.add_column(f"{names[0]} \\ {names[-1]}")
    for j in range(devices.shape[1]):
        table.add_column(f"{names[-1]}={j}", justify="center")
    for i in range(devices.shape[0]):
        table.add_row(f"{names[0]}={i}", *[f"device {d.id}" for d in devices[i]])
    console.print(table)


def show_sharding(x, title: str | None = None) -> None:
    """Draw which device holds which block of a 1-D or 2-D array."""
    if title:
        console.print(f"[bold]{title}[/bold]: shape {tuple(x.shape)}, {getattr(x.sharding, 'spec', x.sharding)}")
    jax.debug.visualize_array_sharding(x)
