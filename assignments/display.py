"""Pictures and tables for students: the communication table, mesh and sharding pictures.

Everything is shown through `console.print`, which fits where it is shown:
- in a Jupyter kernel, as HTML whose width follows the notebook (tables and panels wrap
  like text, nothing is cut to a column count) and whose colours are JupyterLab's own
  theme variables, so it reads in the light and the dark theme alike; a plain-text form
  rides along for other front ends;
- anywhere else (a terminal, a grading log), as rich text at the terminal's width.
"""
from __future__ import annotations

import html
import sys

import numpy as np
from rich import box
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .hlo import ProgramAnalysis

# JupyterLab's theme variables (light and dark define each), with fallbacks for pages
# without them (nbconvert's HTML, feedback).
COLORS = {
    "red": "var(--jp-error-color1, #c62828)",
    "green": "var(--jp-success-color1, #2e7d32)",
    "yellow": "var(--jp-warn-color1, #e65100)",
    "cyan": "var(--jp-info-color1, #00838f)",
    "blue": "var(--jp-brand-color1, #1565c0)",
}
DIM = "var(--jp-content-font-color2, #616161)"
BORDER = "var(--jp-border-color1, #bdbdbd)"
FONT = "var(--jp-code-font-family, monospace)"


def in_notebook() -> bool:
    """Whether output goes to a Jupyter front end (an IPython kernel)."""
    shell = sys.modules.get("IPython") and getattr(sys.modules["IPython"], "get_ipython", lambda: None)()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def _text(value) -> Text:
    if isinstance(value, Text):
        return value
    return Text.from_markup(value) if isinstance(value, str) else Text(str(value))


def _css(style) -> str:
    if style is None:
        return ""
    from rich.style import Style

    style = Style.parse(style) if isinstance(style, str) else style
    css = []
    if style.color is not None and style.color.name in COLORS:
        css.append(f"color:{COLORS[style.color.name]}")
    elif style.color is not None and style.color.triplet is not None:
        css.append(f"color:{style.color.triplet.hex}")
    if style.dim:
        css.append(f"color:{DIM}")
    if style.bold:
        css.append("font-weight:bold")
    if style.italic:
        css.append("font-style:italic")
    return ";".join(css)


def text_html(value) -> str:
    """Rich text (or markup) as HTML spans, coloured with the theme's variables."""
    text = _text(value)
    out = []
    segments = list(Console(width=10**6, color_system=None).render(text))
    if segments and segments[-1].text == "\n":
        segments.pop()
    for segment in segments:
        css = _css(segment.style)
        piece = html.escape(segment.text).replace("\n", "<br>")
        out.append(f'<span style="{css}">{piece}</span>' if css else piece)
    return "".join(out)


def table_html(table: Table) -> str:
    """A rich Table as an HTML table that wraps its cells to the notebook's width: text cells
    break between words only, numbers (right-aligned columns) and `no_wrap` columns never (an
    opcode split at its hyphen, "collective- / permute", reads as two words), and a table still
    too wide for a narrow window scrolls sideways rather than splitting a name or a number.
    A row keeps its style (`add_row(..., style="bold")`, as the profile's collectives)."""
    grid = table.box in (box.SQUARE, box.ROUNDED, box.HEAVY, box.DOUBLE)  # a picture: draw its cells
    cell = ("padding:1px 10px 1px 0;border:none;" if not grid else
            f"padding:1px 8px;border:1px solid {BORDER};") + ("text-align:{align};vertical-align:top;background:none;"
                                                              "overflow-wrap:normal;word-break:normal")
    head = "".join(
        f'<th style="{cell.format(align=c.justify if c.justify in ("left", "right", "center") else "left")};'
        f'border-bottom:1px solid {BORDER};font-weight:bold">{text_html(c.header)}</th>'
        for c in table.columns)
    rows = []
    n = max((len(c._cells) for c in table.columns), default=0)
    for i in range(n):
        # a row's own style (`add_row(..., style="bold")`: the profile's collectives), on each cell
        row = _css(table.rows[i].style) if i < len(table.rows) else ""
        tds = "".join(
            f'<td style="{cell.format(align=c.justify if c.justify in ("left", "right", "center") else "left")}'
            f'{";white-space:nowrap" if c.justify == "right" or c.no_wrap else ""}{";" + row if row else ""}">'
            f'{text_html(c._cells[i]) if i < len(c._cells) else ""}</td>' for c in table.columns)
        rows.append(f"<tr style='background:none'>{tds}</tr>")
    title = (f'<div style="font-weight:bold;margin-bottom:2px">{text_html(table.title)}</div>'
             if table.title else "")
    caption = (f'<div style="color:{DIM};margin-top:2px">{text_html(table.caption)}</div>'
               if table.caption else "")
    return (f'<div style="font-family:{FONT};font-size:var(--jp-code-font-size, 13px);margin:4px 0;'
            f'max-width:100%;overflow-wrap:anywhere">{title}'
            f'<div style="overflow-x:auto;max-width:100%">'
            f'<table style="border-collapse:collapse;margin:0;table-layout:auto;font-size:inherit">'
            f"<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table></div>{caption}</div>")


def panel_html(panel: Panel) -> str:
    """A rich Panel as a bordered box, its left edge in the title's colour."""
    title = _text(panel.title) if panel.title is not None else Text()
    accent = next((COLORS[s.style.color.name] for s in title.spans
                   if hasattr(s.style, "color") and s.style.color and s.style.color.name in COLORS), None)
    if accent is None:
        accent = next((COLORS[n] for n in ("red", "green") if f"[{n}]" in str(panel.title)), BORDER)
    body = panel.renderable
    inner = table_html(body) if isinstance(body, Table) else text_html(body)
    return (f'<div style="font-family:{FONT};font-size:var(--jp-code-font-size, 13px);'
            f'border:1px solid {BORDER};border-left:4px solid {accent};border-radius:3px;'
            f'padding:4px 10px;margin:4px 0;max-width:100%;overflow-wrap:anywhere;white-space:pre-wrap">'
            f'<div style="font-weight:bold;margin-bottom:2px">{text_html(title)}</div>{inner}</div>')


def to_html(obj) -> str:
    if hasattr(obj, "_repr_html_"):  # a picture that draws itself (e.g. assignments.schedule)
        return obj._repr_html_()
    if isinstance(obj, Table):
        return table_html(obj)
    if isinstance(obj, Panel):
        return panel_html(obj)
    return (f'<div style="font-family:{FONT};font-size:var(--jp-code-font-size, 13px);'
            f'white-space:pre-wrap;overflow-wrap:anywhere">{text_html(obj)}</div>')


def to_text(obj, width: int = 100) -> str:
    """The plain-text form (no colours), wide enough that tables keep whole names."""
    if isinstance(obj, (Table, Panel)):  # as wide as the table wants: nothing cut to "…"
        width = max(width, min(400, Console(width=400).measure(obj).maximum))
    plain = Console(width=width, color_system=None, force_terminal=False, force_jupyter=False,
                    soft_wrap=isinstance(obj, (str, Text)))
    with plain.capture() as captured:
        plain.print(obj)
    return captured.get().rstrip("\n")


class StudentConsole:
    """`console.print(...)`: HTML in a notebook, rich text in a terminal."""

    def __init__(self):
        self._terminal = None

    @property
    def terminal(self) -> Console:
        if self._terminal is None:
            self._terminal = Console(force_jupyter=False)
        return self._terminal

    def print(self, *objects, **kwargs) -> None:
        if not in_notebook():
            self.terminal.print(*objects, **kwargs)
            return
        from IPython.display import display

        for obj in objects:
            display({"text/html": to_html(obj), "text/plain": to_text(obj)}, raw=True)


console = StudentConsole()


def communication_table(analysis: ProgramAnalysis, title: str = "Communication") -> Table:
    """One row per collective: kind, mesh axes, per-device shape, bytes, times run."""
    table = Table(title=title, box=box.SIMPLE_HEAVY, title_justify="left")
    for col, justify in (("collective", "left"), ("mesh axes", "left"), ("per-device operand", "left"),
                         ("bytes", "right"), ("times run", "right"), ("total bytes", "right")):
        table.add_column(col, justify=justify, overflow="fold")
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
    notes = []
    if analysis.temp_bytes is not None:
        notes.append(f"temporary memory per device: {analysis.temp_bytes:,} bytes")
    if any(c.directions for c in analysis.collectives):
        notes.append("(+1): each device sends to the next one along the axis (j to j+1, wrapping around); "
                     "(-1): to the previous one; times run counts every run of a loop")
    if notes:
        table.caption = "\n".join(notes)
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
    import jax  # here, so that drawing analyses (as a grader's feedback may) does not load JAX

    if title:
        console.print(f"[bold]{title}[/bold]: shape {tuple(x.shape)}, {getattr(x.sharding, 'spec', x.sharding)}")
    jax.debug.visualize_array_sharding(x)
