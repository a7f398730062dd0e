"""The schedule, drawn: which device sends what to whom, step by step, and how long it takes.

`show_schedule(fn, *args, baseline=...)` compiles a function (and, beside it, the plain
`jax.jit` version) and draws what the compiled program communicates:

- for every step (`assignments.steps`: a loop's iterations, the code around them), the mesh
  as a grid of devices, each collective-permute as arrows from source to target coloured by
  their direction around the ring (-1: to the previous device, the first wrapping round to the
  last; +1: to the next), the other collectives as outlines around the groups of devices that
  act together, and the bytes each device sends. On a ring (a mesh axis with a wraparound
  link, `assignments.costs.axis_links`) the wrapped pair is one arc, "wraparound link"; on a
  line (none) every pair is drawn link by link in the colour of its way of travel, the wrapped
  pair (dashed) through every link, with the bytes each link carries each way beside it, so a
  one-way ring shows both directions of a line's links busy;
- a loop of many iterations as its first few, then one box for the rest;
- a timeline on one time scale for all programs: when the links and the matrix units are busy,
  step by step, from the cost model (`assignments.costs`: the book's figures for a chip);
- a legend of what is drawn, and only that: each ring direction with one of its arrows and
  its wrap-around one (on a line, each way of travel and a routed pair), the links' bytes,
  each kind of outline, the timeline's two lanes.

In a notebook it is one SVG picture, its text at the notebook's body size in the page's own
colour and its lines in JupyterLab's theme colours (light and dark); anywhere else, the same
content as a list of steps. `draw_schedule` draws analyses you already have
(`assignments.analyze`, or the graders' JSON).
"""
from __future__ import annotations

import dataclasses
import html
import math
from typing import NamedTuple

import numpy as np

from .display import FONT
from .hlo import Collective, ProgramAnalysis
from .steps import TimedStage, Timeline, timeline

UNROLL = 3
"""Iterations of a loop drawn one by one; the rest become one box (all of them when only one
more would be left)."""
WIDTH = 560
"""The picture's width in pixels: what a notebook's output area has at a 1024 px wide window
with the file browser open (572 px in JupyterLab 4), so that its text is drawn at `SIZE` there
and wherever there is more room (a narrower window shrinks the whole picture)."""
SIZE = 13
"""Every text's size in pixels: the body text of where the picture is shown (a notebook's
outputs, `--jp-code-font-size`, and the feedback page's messages)."""
LINE = SIZE + 4
"""From one line of text to the next."""

# Text is drawn in the page's own colour (currentColor): JupyterLab's light and dark themes,
# the feedback page, the class report and any other front end alike; secondary text and faint
# lines are that colour, less opaque. Coloured lines are JupyterLab's theme colours (3:1 against
# the page in both themes), and their fallbacks, for pages without the theme's variables, have
# 3:1 against white and against a dark page (#111) both.
TEXT = "currentColor"
SECONDARY = 0.78
"""Opacity of secondary text (what a collective moves, the timeline's lanes and ticks): 11:1
against white and against #111, where JupyterLab's grey (--jp-content-font-color2) has 4.6:1."""
MINUS = "var(--jp-brand-color1, #1976d2)"
"""Arrows of a permute in the -1 direction of its ring (to the previous device, and the first to the last)."""
PLUS = "var(--jp-mirror-editor-string-color, #d32f2f)"
"""Arrows in the +1 direction (to the next device, and the last to the first)."""
ACROSS = TEXT
"""Arrows between devices that differ along both mesh axes: no ring direction."""
GREEN = "var(--jp-success-color1, #388e3c)"
PURPLE = "var(--jp-mirror-editor-operator-color, #ab47bc)"
ORANGE = "var(--jp-warn-color0, #e65100)"
NETWORK_FILL = "var(--jp-info-color1, #00838f)"
GROUP_COLORS = {"all-gather": ORANGE, "reduce-scatter": GREEN, "all-reduce": GREEN,
                "all-to-all": PURPLE, "ragged-all-to-all": PURPLE}
CHAR = 0.6
"""Width of a monospace character, in units of its font size."""


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def _time(s: float, digits: str = ",.1f") -> str:
    if s == 0:
        return "0"
    for unit, size in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= size:
            return f"{s / size:{digits}} {unit}"
    return f"{s * 1e9:{digits}} ns"


def _esc(text: str) -> str:
    return html.escape(str(text), quote=True)


def _label(c: Collective, short: bool = False) -> str:
    """e.g. "collective-permute over Y (-1)" ("permute ..." when `short`) or "all-gather over Y"."""
    kind = "permute" if short and c.kind == "collective-permute" else c.priced_kind
    kind += "*" if c.accelerator_kind else ""
    axes = "+".join(c.axes) or "no axis"
    ways = f" ({', '.join(f'{d:+d}' for d in c.directions)})" if c.directions else ""
    return f"{kind} over {axes}{ways}"


def _moves(c: Collective) -> str:
    """What each device sends (and, for an all-gather, ends with)."""
    if c.kind == "all-gather":
        return f"{_bytes(c.bytes)} in, {_bytes(sum(r.bytes for r in c.results))} out per device"
    return f"{_bytes(c.bytes)} from each device"


# ---------------------------------------------------------------------------------------
# The steps to draw


@dataclasses.dataclass(frozen=True)
class Tile:
    """One panel: a step of a program, or a box standing for the iterations not drawn."""

    program: str
    stage: TimedStage
    step: int
    """The step's index within its stage; -1 for a box of the iterations not drawn, -2 for a
    stretch of matmuls with no communication (listed in the text form only)."""
    first: int
    """Number of the (first) step it shows, counted from 1 over the whole execution."""
    iteration: int
    """The loop iteration shown (from 1), or the first of those a box stands for."""
    more: int | None = 0
    """Iterations a box stands for (None: as many as the run decides); 0 for a step."""


def _tiles(name: str, tl: Timeline, compact: bool, with_compute: bool = False) -> list[Tile]:
    """The steps drawn for one program: every step of straight-line code; a loop's first
    `UNROLL` iterations and a box for the rest (compact: one iteration, standing for all).
    With `with_compute`, a stretch of matmuls with no communication gets a tile too."""
    tiles, number = [], 1
    for stage in tl.stages:
        per_run, runs = len(stage.steps), stage.runs
        if not per_run:
            if with_compute and stage.step_seconds("compute") > 0:
                tiles.append(Tile(name, stage, -2, number, 1))
            continue
        shown = 1 if compact or runs is None else runs if runs <= UNROLL + 1 else UNROLL
        for it in range(min(shown, runs or 1)):
            tiles += [Tile(name, stage, k, number + it * per_run + k, it + 1) for k in range(per_run)]
        if not compact and (runs is None or runs > shown):
            tiles.append(Tile(name, stage, -1, number + shown * per_run, shown + 1,
                              None if runs is None else runs - shown))
        number += per_run * (runs or 1)
    return tiles


def _tile_heading(t: Tile, compact: bool) -> str:
    runs = t.stage.runs
    if t.step < 0:
        return f"x {t.more} more like this" if t.more is not None else "repeats as the run decides"
    if not t.stage.stage.loop or runs == 1:
        return f"step {t.first}"
    per_run = len(t.stage.steps)
    if compact:
        if runs is None:  # no last step to name: the run decides how many there are
            span = f"steps {t.first}.." if per_run == 1 else f"steps {t.first}, {t.first + per_run}.."
            return f"{span} (loop x?)"
        last = t.first + per_run * (runs - 1)
        span = f"steps {t.first}-{last}" if per_run == 1 else f"steps {t.first}, {t.first + per_run}.. {last}"
        return f"{span} (loop x{runs})"
    return f"step {t.first} (loop {t.iteration}/{runs if runs is not None else '?'})"


class Line(NamedTuple):
    """A line of text under a tile or in the legend."""

    text: str
    dim: bool = False
    """Secondary text (what a collective moves, the times' comment)."""
    mark: str = ""
    """A swatch drawn before the text: "arrow+", "arrow-" (an arrow pointing right, left),
    "outline", "bar:network", "bar:compute" (a timeline bar of that lane); "" for none."""
    colour: str = TEXT
    """The swatch's colour: the arrows' or outlines' it names."""
    indent: bool = False
    """Set under the swatch's text (what that collective moves), though it has none itself."""


def _tile_lines(analysis: ProgramAnalysis, t: Tile) -> list[Line]:
    """The lines under a tile: each collective (with a swatch of its arrows or outlines) and
    what it moves, then the step's times."""
    if t.step < 0:
        per_run = len(t.stage.steps)
        if t.more is None:
            return [Line(f"steps {t.first}..", True), Line("as many as the run decides", True)]
        return [Line(f"steps {t.first}-{t.first + t.more * per_run - 1}", True), Line("the same as above", True)]
    lines = []
    for i in t.stage.steps[t.step]:
        c = analysis.collectives[i]
        if c.kind == "collective-permute":
            # the colour of its arrows: one ring direction's, or the text's for a mix
            grid = Grid.of(analysis)
            signs = {(v > 0) - (v < 0) for v in (_ring_step(grid, s, d) for s, d in pairs_of(analysis, c))}
            step = signs.pop() if len(signs) == 1 else 0
            mark, colour = "arrow-" if step < 0 else "arrow+", _direction_colour(step)
        else:
            mark, colour = "outline", GROUP_COLORS.get(c.priced_kind, ACROSS)
        lines.append(Line(_label(c, short=True), mark=mark, colour=colour))
        lines.append(Line(_moves(c), True, indent=True))
    comm = t.stage.step_seconds("network", t.step)
    compute = t.stage.step_compute(t.step)
    if not compute:
        return lines + [Line(f"links {_time(comm)}"), Line("no matmul in this step", True)]
    together = "at the same time" if t.stage.step_overlaps(t.step) else "one after the other"
    return lines + [Line(f"links {_time(comm)}, matmul {_time(compute)}"), Line(together, True)]


# ---------------------------------------------------------------------------------------
# The mesh, with arrows and groups


LINK_LABEL = 7
"""Characters of a link's bytes label ("512 KiB") that the gap beside a line's link makes room for."""


@dataclasses.dataclass(frozen=True)
class Grid:
    """Where each device sits in a tile: rows along the mesh's first axis, columns along
    its last (as `assignments.show_mesh` draws it), and how the slice wires each."""

    rows: int
    cols: int
    cell: int = 26
    """A device's square: wide enough for its name ("d7") at `SIZE`."""
    bulge: int = 10
    gap: int = 22
    """Between neighbours, for their arrows (arcs of longer jumps need more)."""
    topology: tuple[str, str] = ("ring", "ring")
    """How the slice wires the rows' axis (moving from row to row) and the columns' axis:
    "ring" (a wraparound link closes it), "line" (none: a pair from one end to the other
    crosses every link between), or "switch" (`assignments.costs.AxisLinks.topology`).
    Without a slice, or for rows that merge several mesh axes, "ring": every pair drawn
    as its own arrow."""
    moves: tuple[bool, bool] = (False, False)
    """Whether some permute moves data from row to row, and along a row: only then does the
    grid make room for the labels of that axis's links (or arcs)."""

    @classmethod
    def of(cls, analysis: ProgramAnalysis, on=None) -> "Grid":
        """The grid of an analysis's mesh; `on`, an `assignments.costs.Slice`, says which of
        its two axes are lines."""
        shape = analysis.mesh_shape or (1, analysis.num_devices)
        rows, cols = int(np.prod(shape[:-1], dtype=int)) if len(shape) > 1 else 1, int(shape[-1])
        small = max(rows, cols) > 4   # 8 in a line: narrower gaps, so that two tiles fit a row
        topology = ("ring", "ring")
        if on is not None and analysis.axis_names and len(analysis.axis_names) == len(shape) <= 2:
            wired = [on.axis(name) for name in analysis.axis_names]
            wired = [w.topology if w is not None else "ring" for w in wired]
            topology = ("ring", wired[0]) if len(wired) == 1 else (wired[0], wired[1])
        grid = cls(rows, cols, cell=26, gap=12 if small else 22, topology=topology)
        pairs = [p for c in analysis.collectives if c.kind == "collective-permute" for p in pairs_of(analysis, c)]
        places = [(grid.place(s), grid.place(t)) for s, t in pairs if s != t]
        moves = (any(c1 == c2 for (_, c1), (_, c2) in places), any(r1 == r2 for (r1, _), (r2, _) in places))
        return dataclasses.replace(grid, moves=moves)

    def line(self, horizontal: bool) -> bool:
        """Whether pairs along a row (`horizontal`) or a column are routed link by link."""
        return self.topology[1 if horizontal else 0] == "line"

    @property
    def _label_gap(self) -> int:
        """A gap wide enough for the bytes labels of two neighbouring links."""
        return math.ceil(LINK_LABEL * CHAR * SIZE) - self.cell + 8

    @property
    def gap_x(self) -> int:
        gap = max(2 * self.bulge + 8, self.gap) if self.rows > 2 else self.gap
        if self.line(True) and self.moves[1] or self.line(False) and self.moves[0]:
            gap = max(gap, self._label_gap)   # labels above and below a row's links, or beside a column's
        return gap

    @property
    def gap_y(self) -> int:
        gap = max(2 * self.bulge + 10, self.gap) if self.cols > 2 else self.gap
        if self.line(True) and self.moves[1]:
            gap = max(gap, 2 * SIZE + 10)     # one row's labels below its links, the next row's above
        return gap

    @property
    def pad(self) -> int:
        # room for "wraparound link" over the outermost wrap-around arcs
        return self.bulge + 8 + (10 if self.topology[1] == "ring" and self.cols > 2 and self.moves[1] else 0)

    @property
    def width(self) -> int:
        return 2 * self.pad + self.cols * self.cell + (self.cols - 1) * self.gap_x

    @property
    def height(self) -> int:
        return 2 * self.pad + self.rows * self.cell + (self.rows - 1) * self.gap_y

    def place(self, device: int) -> tuple[int, int]:
        return divmod(device, self.cols) if 0 <= device < self.rows * self.cols else (0, 0)

    def center(self, device: int) -> tuple[float, float]:
        r, c = self.place(device)
        return (self.pad + c * (self.cell + self.gap_x) + self.cell / 2,
                self.pad + r * (self.cell + self.gap_y) + self.cell / 2)


def _ring_step(grid: Grid, s: int, t: int) -> int:
    """The signed ring step of one pair along the axis it runs on (0 if it runs across both):
    d0 -> d3 on a ring of 4 is -1, the first device wrapping round to the last."""
    (r1, c1), (r2, c2) = grid.place(s), grid.place(t)
    if r1 == r2:
        n, d = grid.cols, c2 - c1
    elif c1 == c2:
        n, d = grid.rows, r2 - r1
    else:
        return 0
    d %= n
    return d if d <= n // 2 else d - n


def _wraps(grid: Grid, s: int, t: int) -> bool:
    """Whether a pair goes round the end of its ring (d0 -> d3 at -1, d3 -> d0 at +1)."""
    (r1, c1), (r2, c2) = grid.place(s), grid.place(t)
    step = _ring_step(grid, s, t)
    return step != 0 and (c2 - c1 if r1 == r2 else r2 - r1) != step


def _direction_colour(step: int) -> str:
    """The colour of a ring direction's arrows, the wrap-around arc included."""
    return ACROSS if step == 0 else MINUS if step < 0 else PLUS


def _arrow_head(x: float, y: float, dx: float, dy: float, colour: str) -> str:
    norm = math.hypot(dx, dy) or 1.0
    ux, uy = dx / norm, dy / norm
    size = 6.0
    points = [(x, y), (x - size * ux + size * 0.5 * uy, y - size * uy - size * 0.5 * ux),
              (x - size * ux - size * 0.5 * uy, y - size * uy + size * 0.5 * ux)]
    return (f'<polygon points="{" ".join(f"{px:.1f},{py:.1f}" for px, py in points)}" '
            f'style="fill:{colour};stroke:none"/>')


def _arrow(grid: Grid, c: Collective, s: int, t: int) -> str:
    """A pair's path: straight between neighbours (the -1 direction above the centre line, or
    left of it, +1 below or right), an arc past the devices in between for longer jumps and
    for the wrap-around (on the same side as its direction's other arrows)."""
    (r1, c1), (r2, c2) = grid.place(s), grid.place(t)
    (x1, y1), (x2, y2) = grid.center(s), grid.center(t)
    step, half = _ring_step(grid, s, t), grid.cell / 2
    colour = _direction_colour(step)
    side = cy = 0                                        # an arc's side and control point
    if r1 == r2 and abs(c2 - c1) == 1 or c1 == c2 and abs(r2 - r1) == 1:
        horizontal = r1 == r2
        sign = (c2 - c1) if horizontal else (r2 - r1)
        off = 5 * sign                                   # -1: up (or left)
        if horizontal:
            x1, x2, y1, y2 = x1 + sign * half, x2 - sign * half, y1 + off, y2 + off
        else:
            x1, x2, y1, y2 = x1 + off, x2 + off, y1 + sign * half, y2 - sign * half
        path, tangent = f"M{x1:.1f},{y1:.1f} L{x2:.1f},{y2:.1f}", (x2 - x1, y2 - y1)
    elif r1 == r2 or c1 == c2:
        side = -1 if step < 0 else 1                      # above (left of) the row for -1
        span = abs(c2 - c1) if r1 == r2 else abs(r2 - r1)
        depth = half + 2 * grid.bulge * min(1.0, 0.55 + 0.15 * span)
        if r1 == r2:
            x1, x2 = x1 + 3 * side, x2 + 3 * side
            y1, y2 = y1 + side * half, y2 + side * half
            cx, cy = (x1 + x2) / 2, y1 - side * half + side * depth
        else:
            y1, y2 = y1 + 3 * side, y2 + 3 * side
            x1, x2 = x1 + side * half, x2 + side * half
            cx, cy = x1 - side * half + side * depth, (y1 + y2) / 2
        path, tangent = f"M{x1:.1f},{y1:.1f} Q{cx:.1f},{cy:.1f} {x2:.1f},{y2:.1f}", (x2 - cx, y2 - cy)
    else:                                                # across both axes: a straight line
        dx, dy = x2 - x1, y2 - y1
        k = half / max(abs(dx), abs(dy), 1e-9)
        x1, y1, x2, y2 = x1 + k * dx, y1 + k * dy, x2 - k * dx, y2 - k * dy
        path, tangent = f"M{x1:.1f},{y1:.1f} L{x2:.1f},{y2:.1f}", (dx, dy)
    direction = f"{step:+d}" if step else "across"
    wraps = _wraps(grid, s, t)
    how = f"{direction}, over the wraparound link" if wraps else direction
    label = ""
    if wraps and r1 == r2 and side and (side < 0 and r1 == 0 or side > 0 and r1 == grid.rows - 1):
        # the outermost arcs (above the first row, below the last) carry their name
        peak = (y1 + cy) / 2
        label = ('<g data-label="wraparound">' + _text_at((x1 + x2) / 2, peak - 4 if side < 0 else peak + SIZE + 1,
                                                          "wraparound link", anchor="middle", dim=True) + "</g>")
    return (f'<g class="arrow" data-pair="{s}-{t}" data-direction="{direction}"'
            f'{" data-wraparound=" + chr(34) + "1" + chr(34) if wraps else ""}>'
            f'<title>d{s} -&gt; d{t} ({how}): {_esc(_bytes(c.bytes))}</title>'
            f'<path d="{path}" style="fill:none;stroke:{colour};stroke-width:1.6"/>'
            f'{_arrow_head(x2, y2, *tangent, colour)}{label}</g>')


def _along_line(grid: Grid, s: int, t: int) -> list[int] | None:
    """The devices a pair passes on a line, `s` to `t` (both included), when it runs along an
    axis that is a line; None for a pair on a ring, a switch, or across both axes."""
    (r1, c1), (r2, c2) = grid.place(s), grid.place(t)
    if s == t or not (r1 == r2 and grid.line(True) or c1 == c2 and grid.line(False)):
        return None
    if r1 == r2:
        return [r1 * grid.cols + c for c in range(c1, c2 + (1 if c2 > c1 else -1), 1 if c2 > c1 else -1)]
    return [r * grid.cols + c1 for r in range(r1, r2 + (1 if r2 > r1 else -1), 1 if r2 > r1 else -1)]


def _travel(grid: Grid, s: int, t: int) -> int:
    """The way a pair moves along a line: -1 towards the row's (column's) first device, +1 away."""
    (r1, c1), (r2, c2) = grid.place(s), grid.place(t)
    return (c2 > c1) - (c2 < c1) if r1 == r2 else (r2 > r1) - (r2 < r1)


def _segment(grid: Grid, a: int, b: int, colour: str, dashed: bool) -> str:
    """One link crossed from neighbour `a` to neighbour `b`, on the side of its way of travel
    (-1 above the row's centre line, or left of the column's; +1 below, or right), a routed
    pair's (`dashed`) further out than a neighbour's, so that a link carrying both shows both."""
    (r1, c1), (r2, c2) = grid.place(a), grid.place(b)
    (x1, y1), (x2, y2) = grid.center(a), grid.center(b)
    half, horizontal = grid.cell / 2, r1 == r2
    sign = (c2 - c1) if horizontal else (r2 - r1)
    off = (9 if dashed else 4) * sign
    if horizontal:
        x1, x2, y1, y2 = x1 + sign * half, x2 - sign * half, y1 + off, y2 + off
    else:
        x1, x2, y1, y2 = x1 + off, x2 + off, y1 + sign * half, y2 - sign * half
    dash = ";stroke-dasharray:4 2" if dashed else ""
    return (f'<path data-link="{a}-{b}" d="M{x1:.1f},{y1:.1f} L{x2:.1f},{y2:.1f}" '
            f'style="fill:none;stroke:{colour};stroke-width:1.6{dash}"/>{_arrow_head(x2, y2, x2 - x1, y2 - y1, colour)}')


def _routed(grid: Grid, c: Collective, s: int, t: int, path: list[int]) -> str:
    """A pair on a line, drawn link by link along its way, each link in the colour of its way
    of travel: a ring's wrapped pair (d3 -> d0 of a ring of 4) crosses every link, the other
    way from its neighbours, dashed."""
    travel = _travel(grid, s, t)
    colour, dashed = _direction_colour(travel), len(path) > 2
    step = _ring_step(grid, s, t)
    how = (f"ring step {step:+d}, on a line: through {', '.join(f'd{d}' for d in path[1:-1])}"
           if dashed else f"{travel:+d}")
    return (f'<g class="arrow" data-pair="{s}-{t}" data-direction="{travel:+d}" data-route="line">'
            f'<title>d{s} -&gt; d{t} ({how}): {_esc(_bytes(c.bytes))}</title>'
            + "".join(_segment(grid, a, b, colour, dashed) for a, b in zip(path, path[1:])) + "</g>")


def _link_labels(grid: Grid, loads: dict[tuple[int, int], float]) -> str:
    """The bytes each line link carries each way in the step, `loads[(a, b)]` for a link
    crossed from `a` to its neighbour `b`: beside the link, on the side its arrows are drawn
    (above a row's link for -1, below for +1; left of a column's for -1, right for +1)."""
    out = []
    for (a, b), n in sorted(loads.items()):
        (r1, c1), (r2, c2) = grid.place(a), grid.place(b)
        (x1, y1), (x2, y2) = grid.center(a), grid.center(b)
        half = grid.cell / 2
        if r1 == r2:
            travel = (c2 > c1) - (c2 < c1)
            x, y, anchor = (x1 + x2) / 2, (y1 - half - 3 if travel < 0 else y1 + half + SIZE - 1), "middle"
        else:
            travel = (r2 > r1) - (r2 < r1)
            x, y, anchor = (x1 - half - 2 if travel < 0 else x1 + half + 2), (y1 + y2) / 2 + SIZE * 0.35, \
                ("end" if travel < 0 else "start")
        out.append(f'<g data-link-bytes="{n:.0f}" data-link="{min(a, b)}-{max(a, b)}" data-travel="{travel:+d}">'
                   f'{_text_at(x, y, _bytes(n), anchor=anchor, dim=True)}</g>')
    return "".join(out)


def _group(grid: Grid, c: Collective, members: tuple[int, ...], ring: int) -> str:
    """An outline around one group: a rounded box when its devices fill a rectangle of the
    grid, else a dashed loop through them. `ring` moves it outwards (several collectives)."""
    colour = GROUP_COLORS.get(c.priced_kind, ACROSS)
    places = [grid.place(d) for d in members]
    rows, cols = {r for r, _ in places}, {c_ for _, c_ in places}
    title = f"<title>{_esc(_label(c))}: {' '.join(f'd{d}' for d in members)}</title>"
    data = f'class="group" data-group="{",".join(map(str, members))}"'
    if len(set(places)) == len(rows) * len(cols) and max(rows) - min(rows) + 1 == len(rows) \
            and max(cols) - min(cols) + 1 == len(cols):
        (x1, y1), (x2, y2) = grid.center(members[0]), grid.center(members[0])
        for d in members:
            x, y = grid.center(d)
            x1, y1, x2, y2 = min(x1, x), min(y1, y), max(x2, x), max(y2, y)
        pad = grid.cell / 2 + 4 + 3 * ring
        return (f'<g {data}>{title}<rect x="{x1 - pad:.1f}" y="{y1 - pad:.1f}" width="{x2 - x1 + 2 * pad:.1f}" '
                f'height="{y2 - y1 + 2 * pad:.1f}" rx="7" style="fill:none;stroke:{colour};stroke-width:2"/></g>')
    points = " ".join(f"{x:.1f},{y:.1f}" for x, y in map(grid.center, members))
    return (f'<g {data}>{title}<polygon points="{points}" style="fill:none;stroke:{colour};'
            f'stroke-width:2;stroke-dasharray:4 3"/></g>')


def pairs_of(analysis: ProgramAnalysis, c: Collective) -> tuple[tuple[int, int], ...]:
    """A permute's (source, target) pairs; for an analysis that did not record them (older
    JSON), rebuilt from its one ring offset along its one axis."""
    if c.pairs or len(c.axes) != 1 or len(c.shifts) != 1 or c.axes[0] not in analysis.axis_names:
        return c.pairs
    ids = np.arange(int(np.prod(analysis.mesh_shape))).reshape(analysis.mesh_shape)
    axis = analysis.axis_names.index(c.axes[0])
    targets = np.roll(ids, -c.shifts[0], axis=axis)   # targets[j] = ids[j + shift]
    return tuple((int(s), int(t)) for s, t in zip(ids.flat, targets.flat))


def groups_of(analysis: ProgramAnalysis, c: Collective) -> tuple[tuple[int, ...], ...]:
    """The groups a collective acts on; for an analysis that did not record them (older
    JSON), the devices that differ only along its axes."""
    if c.groups or not analysis.mesh_shape or not set(c.axes) <= set(analysis.axis_names):
        return c.groups or (tuple(range(analysis.num_devices)),)
    ids = np.arange(int(np.prod(analysis.mesh_shape))).reshape(analysis.mesh_shape)
    moved = [analysis.axis_names.index(a) for a in c.axes]
    ids = np.moveaxis(ids, moved, list(range(ids.ndim - len(moved), ids.ndim)))
    return tuple(tuple(int(d) for d in g) for g in ids.reshape(-1, c.group_size))


def _paint(prop: str, colour: str, opacity: float = 1.0) -> str:
    """A fill or a stroke, e.g. "fill:currentColor;fill-opacity:0.78"."""
    return f"{prop}:{colour}" + (f";{prop}-opacity:{opacity:g}" if opacity < 1 else "")


FAINT = _paint("stroke", TEXT, 0.3)
"""A tile's frame, the timeline's grid: the text's colour, faint, on any page."""


def _mesh(analysis: ProgramAnalysis, grid: Grid, collectives: tuple[int, ...]) -> str:
    """The devices of one tile, then each collective of its step drawn over them."""
    parts = []
    for d in range(grid.rows * grid.cols):
        x, y = grid.center(d)
        parts.append(f'<rect x="{x - grid.cell / 2:.1f}" y="{y - grid.cell / 2:.1f}" width="{grid.cell}" '
                     f'height="{grid.cell}" rx="3" style="{_paint("fill", TEXT, 0.08)};{_paint("stroke", TEXT, 0.5)}"/>'
                     f'<text x="{x:.1f}" y="{y + SIZE * 0.35:.1f}" text-anchor="middle" '
                     f'style="font-size:{SIZE}px;fill:{TEXT}">d{d}</text>')
    for ring, i in enumerate(collectives):
        c = analysis.collectives[i]
        if c.kind == "collective-permute":
            body = [_arrow(grid, c, s, t) if (path := _along_line(grid, s, t)) is None
                    else _routed(grid, c, s, t, path) for s, t in pairs_of(analysis, c)]
        else:
            body = [_group(grid, c, g, ring) for g in groups_of(analysis, c) if g]
        parts.append(f'<g class="collective" data-collective="{i}" data-kind="{_esc(c.kind)}">{"".join(body)}</g>')
    return "".join(parts) + _link_labels(grid, _line_loads(analysis, grid, collectives))


def _line_loads(analysis: ProgramAnalysis, grid: Grid, collectives) -> dict[tuple[int, int], float]:
    """{(a, b): bytes}: what the permutes of one step put on each link of a line, crossed
    from device `a` to its neighbour `b` (a pair crosses every link between its ends)."""
    loads: dict[tuple[int, int], float] = {}
    for i in collectives:
        c = analysis.collectives[i]
        for s, t in pairs_of(analysis, c) if c.kind == "collective-permute" else ():
            path = _along_line(grid, s, t)
            for link in zip(path, path[1:]) if path else ():
                loads[link] = loads.get(link, 0.0) + c.bytes
    return loads


# ---------------------------------------------------------------------------------------
# Text, swatches and the legend


def _text_at(x: float, y: float, text: str, size: int = SIZE, weight: str = "normal", anchor: str = "start",
             dim: bool = False, cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return (f'<text{c} x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" style="font-size:{size}px;'
            f'font-weight:{weight};{_paint("fill", TEXT, SECONDARY if dim else 1.0)}">{_esc(text)}</text>')


def _fit(text: str, width: float, size: int = SIZE) -> str:
    """One line cut to `width` (a name in a heading)."""
    most = max(4, int(width / (CHAR * size)))
    return text if len(text) <= most else text[: most - 1] + "\u2026"


def _wrap(text: str, width: float, size: int = SIZE) -> list[str]:
    """Lines of at most `width` pixels, broken between words (a longer word where it must)."""
    most = max(4, int(width / (CHAR * size)))
    lines, line = [], ""
    for word in text.split(" "):
        while len(word) > most:
            if line:
                lines, line = lines + [line], ""
            lines, word = lines + [word[:most]], word[most:]
        if line and len(line) + 1 + len(word) > most:
            lines, line = lines + [line], word
        else:
            line = f"{line} {word}" if line else word
    return lines + [line] if line or not lines else lines


SWATCH = 24
"""Room for a swatch before a line's text."""


def _swatch(x: float, y: float, mark: str, colour: str) -> str:
    """A sample of what a line names, beside its text (baseline y): an arrow pointing the way
    most of its direction's arrows do, an outline, a timeline bar."""
    mid = y - SIZE * 0.35
    if mark.startswith("arrow"):
        x1, x2 = (x + 17, x + 1) if mark == "arrow-" else (x + 1, x + 17)
        return (f'<path d="M{x1:.1f},{mid:.1f} L{x2:.1f},{mid:.1f}" style="fill:none;{_paint("stroke", colour)};'
                f'stroke-width:1.6"/>{_arrow_head(x2, mid, x2 - x1, 0.0, colour)}')
    if mark == "outline":
        return (f'<rect x="{x + 1:.1f}" y="{mid - 6:.1f}" width="16" height="12" rx="3" '
                f'style="fill:none;{_paint("stroke", colour)};stroke-width:2"/>')
    return f'<rect x="{x + 1:.1f}" y="{mid - 5:.1f}" width="16" height="10" style="{_bar_style(mark[4:])}"/>'


def _indent(line: Line) -> int:
    return SWATCH if line.mark or line.indent else 0


def _line_count(lines: list[Line], width: float) -> int:
    return sum(len(_wrap(line.text, width - _indent(line))) for line in lines)


def _lines_svg(lines: list[Line], x: float, y: float, width: float, weight: str = "normal") -> tuple[str, int]:
    """Lines of text from baseline `y` down, each wrapped to `width`, its swatch before it.
    Returns the SVG and the number of lines drawn."""
    out, k = [], 0
    for line in lines:
        if line.mark:
            out.append(_swatch(x, y + k * LINE, line.mark, line.colour))
        for piece in _wrap(line.text, width - _indent(line)):
            out.append(_text_at(x + _indent(line), y + k * LINE, piece, weight=weight, dim=line.dim))
            k += 1
    return "".join(out), k


def _direction_text(step: int, plain: tuple[int, int] | None, wrap: tuple[int, int] | None,
                    routed: tuple[int, int] | None = None, line: bool = False) -> str:
    """A direction in the legend, with one of its arrows and its wrap-around one, e.g.
    "(-1) to the previous device: d1→d0, and d0→d3 over the wraparound link"; on a line, the
    way of travel, with a wrapped pair routed link by link, e.g. "(-1) along the line, to lower
    devices: d1→d0, and dashed, d3→d0 through every link between"."""
    arrow = "d{}\u2192d{}".format
    if step == 0:
        return f"across both mesh axes: {arrow(*(plain or wrap or routed))}"
    if line:   # a way of travel along a line, not a ring direction
        where = "along the line, to lower devices" if step < 0 else "along the line, to higher devices"
    else:
        where = {1: "to the next device", -1: "to the previous device"}.get(
            step, f"{abs(step)} devices {'on' if step > 0 else 'back'}")
    examples = [arrow(*plain)] if plain else []
    if wrap:
        examples.append(f"{'and ' if examples else ''}{arrow(*wrap)} over the wraparound link")
    if routed:
        examples.append(f"{'and ' if examples else ''}dashed, {arrow(*routed)} through every link between")
    return f"({step:+d}) {where}: " + ", ".join(examples)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One entry of a legend: what it stands for (`key`, e.g. "direction=-1", "kind=all-reduce",
    "lane=network"), drawn as a line with its swatch."""

    key: str
    line: Line


def _legend_svg(entries: list[Entry], y: float, width: float) -> tuple[str, float]:
    """Entries side by side from baseline `y`, on a new row when the next does not fit.
    Returns the SVG and the height used."""
    out, x, row = [], 0.0, 0
    for entry in entries:
        wide = SWATCH + len(entry.line.text) * CHAR * SIZE
        if x > 0 and x + wide > width:
            x, row = 0.0, row + 1
        name, value = entry.key.split("=", 1)
        drawn, lines = _lines_svg([entry.line], x, y + row * LINE, width - x)
        out.append(f'<g data-legend="{_esc(name)}" data-{_esc(name)}="{_esc(value)}">{drawn}</g>')
        if lines > 1:  # wrapped: the next entry starts a row of its own (x = width sends it there)
            x, row = width, row + lines - 1
        else:
            x += wide + 18
    return "".join(out), (row + 1) * LINE if entries else 0


# ---------------------------------------------------------------------------------------
# The picture


@dataclasses.dataclass(frozen=True)
class _Box:
    """A tile's size."""

    width: int
    height: int
    lines: int


TOP = 26
"""A tile's heading, above its mesh."""
GAP = 10
"""Between tiles."""


def _tile_svg(analysis: ProgramAnalysis, grid: Grid, t: Tile, x: float, y: float, box: _Box, compact: bool) -> str:
    out = [f'<g class="tile" data-program="{_esc(t.program)}" data-step="{t.first}" '
           f'data-more="{"" if t.step >= 0 else (t.more if t.more is not None else "?")}" '
           f'transform="translate({x:.1f},{y:.1f})">',
           f'<rect width="{box.width}" height="{box.height}" rx="5" style="fill:none;{FAINT}'
           f'{";stroke-dasharray:5 4" if t.step < 0 else ""}"/>',
           _text_at(8, SIZE + 4, _fit(_tile_heading(t, compact), box.width - 12), weight="bold")]
    if t.step >= 0:
        out.append(f'<g transform="translate({(box.width - grid.width) / 2:.1f},{TOP})">'
                   f'{_mesh(analysis, grid, t.stage.steps[t.step])}</g>')
    else:
        out.append(_text_at(box.width / 2, TOP + grid.height / 2 + 6, "\u22ee", 20, anchor="middle", dim=True))
    out.append(_lines_svg(_tile_lines(analysis, t), 8, TOP + grid.height + SIZE, box.width - 14)[0])
    return "".join(out) + "</g>"


def _layout(groups: list[tuple[str, list[Tile]]], boxes: dict[str, _Box], width: int) -> tuple[list[tuple], int]:
    """Tiles flow left to right and wrap; a program starts a new row unless all its tiles fit
    beside the last one's, and carries its name above its first tile (a row with no name
    starting in it has no room for one). Returns ((kind, item, x, y), ...) and the height used."""
    rows: list[list[tuple]] = [[]]   # per row: (kind, item, x)
    x = 0
    for name, tiles in groups:
        if not tiles:
            continue
        box = boxes[name]
        if x > 0 and x + len(tiles) * (box.width + GAP) - GAP > width:
            rows, x = rows + [[]], 0
        rows[-1].append(("name", name, x))
        for t in tiles:
            if x > 0 and x + box.width > width:
                rows, x = rows + [[]], 0
            rows[-1].append(("tile", t, x))
            x += box.width + GAP
    placed, y = [], 0
    for row in rows:
        head = LINE + 4 if any(kind == "name" for kind, _, _ in row) else 0
        tall = max((boxes[item.program].height for kind, item, _ in row if kind == "tile"), default=0)
        placed += [(kind, item, x, y + SIZE if kind == "name" else y + head) for kind, item, x in row]
        y += head + tall + GAP
    return placed, max(y - GAP, 0)


def _ticks(total: float) -> list[float]:
    if total <= 0:
        return [0.0]
    raw = total / 4
    base = 10 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= raw)
    return [k * step for k in range(int(total / step + 1e-9) + 1)]


def _bar_style(lane: str) -> str:
    """A timeline bar: the links' in the network colour, the matrix units' in the text's, both
    light enough that a step's number (in the text's colour) reads on them."""
    colour = NETWORK_FILL if lane == "network" else TEXT
    stroke = _paint("stroke", colour, 1.0 if lane == "network" else 0.6)
    return f"{_paint('fill', colour, 0.35)};{stroke};stroke-width:0.75"


def _bar(bar, x: float, y: float, scale: float, lane_h: int, number: int | None) -> str:
    """One bar of the timeline; a network bar carries its step's number when it fits."""
    w = max(bar.seconds * scale, 1.0)
    out = (f'<rect class="bar" data-lane="{bar.lane}" x="{x:.2f}" y="{y:.1f}" width="{w:.2f}" height="{lane_h}" '
           f'style="{_bar_style(bar.lane)}"/>')
    if number is not None and w >= len(str(number)) * CHAR * SIZE + 4:
        out += _text_at(x + w / 2, y + lane_h - 4, str(number), anchor="middle")
    return out


def _stage_bars(stage: TimedStage, t0: float, first: int, x0: float, y: float, scale: float, lane_h: int) -> str:
    """Every run of one stage (the first 200 of a longer loop), from time t0."""
    out = []
    if (stage.runs or 1) > 1 or stage.runs is None:
        out.append(_text_at(x0 + t0 * scale, y - 4, f"x{stage.runs if stage.runs else '?'}", dim=True))
    for r in range(min(stage.runs or 1, 200)):
        for bar in stage.bars:
            lane = 0 if bar.lane == "network" else 1
            number = first + r * len(stage.steps) + bar.step if bar.step >= 0 else None
            out.append(_bar(bar, x0 + (t0 + r * stage.run_s + bar.start_s) * scale, y + lane * (lane_h + 3),
                            scale, lane_h, number))
    return "".join(out)


def _timeline_svg(timelines: dict[str, Timeline], y0: float, width: int) -> tuple[str, int]:
    """Two lanes per program (links, matrix units) on one time scale; loops repeat their runs.
    Returns the SVG and the height used."""
    x0, lane_h = round(len("compute") * CHAR * SIZE) + 12, SIZE + 4
    totals = {name: _time(tl.total_s) + (" +" if tl.unknown_runs else "") for name, tl in timelines.items()}
    right = max((len(t) for t in totals.values()), default=0) * CHAR * SIZE + 12
    end = max((tl.total_s for tl in timelines.values()), default=0.0) or 1e-12
    scale = (width - x0 - right) / end
    heading, n = _lines_svg([Line("timeline (estimate: each loop iteration starts when the last ends)")],
                            0, y0 + SIZE, width, weight="bold")
    top = y0 + n * LINE + 2
    tops, y = [], top
    for tl in timelines.values():  # each program: its name, its loops' "xN", its two lanes
        loops = any((s.runs or 1) > 1 or s.runs is None for s in tl.stages)
        tops.append(y)
        y += LINE + (LINE if loops else 0) + 2 + 2 * lane_h + 3 + 8
    out = [heading]
    for tick in _ticks(end):  # the grid first, behind the bars
        x = x0 + tick * scale
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{y}" style="{FAINT}"/>')
        out.append(_text_at(x, y + SIZE + 2, _time(tick, "g"), anchor="middle", dim=True))
    for (name, tl), y_name in zip(timelines.items(), tops):
        loops = any((s.runs or 1) > 1 or s.runs is None for s in tl.stages)
        bars = y_name + LINE + (LINE if loops else 0) + 2
        out.append(f'<g class="timeline" data-program="{_esc(name)}">')
        out.append(_text_at(x0, y_name + SIZE, _fit(name, width - x0), weight="bold"))
        for k, lane in enumerate(("links", "compute")):
            out.append(_text_at(x0 - 6, bars + k * (lane_h + 3) + lane_h - 4, lane, anchor="end", dim=True))
        t0, first = 0.0, 1
        for stage in tl.stages:
            out.append(_stage_bars(stage, t0, first, x0, bars, scale, lane_h))
            t0 += stage.total_s
            first += len(stage.steps) * (stage.runs or 1)
        out.append(_text_at(x0 + t0 * scale + 6, bars + lane_h + 2 + SIZE * 0.35, totals[name]) + "</g>")
    return "".join(out), int(y + SIZE + 8 - y0)


def _tile_text(analysis: ProgramAnalysis, grid: Grid, t: Tile, compact: bool) -> str:
    """One step as a line of text: what moves between which devices (on a line, the devices a
    longer pair passes through), and its times."""
    if t.step == -2:
        return f"then: matmul {_time(t.stage.step_seconds('compute'))}, no communication"
    if t.step < 0:
        return f"steps {t.first}..: {_tile_heading(t, compact)}"
    parts = []
    for i in t.stage.steps[t.step]:
        c = analysis.collectives[i]
        who = (" ".join(f"d{s}->d{d}" for s, d in pairs_of(analysis, c)) if c.kind == "collective-permute"
               else " ".join("{" + " ".join(f"d{d}" for d in g) + "}" for g in groups_of(analysis, c)))
        routes = [path for s, d in (pairs_of(analysis, c) if c.kind == "collective-permute" else ())
                  if (path := _along_line(grid, s, d)) is not None and len(path) > 2]
        if routes:
            who += " (along the line: " + ", ".join("->".join(f"d{d}" for d in p) for p in routes) + ")"
        parts.append(f"{_label(c)}, {_moves(c)}: {who}")
    times = ", ".join(line.text for line in _tile_lines(analysis, t)[-2:] if line.text)
    return f"{_tile_heading(t, compact)}: " + "; ".join(parts) + f"; {times}"


@dataclasses.dataclass(frozen=True)
class Schedule:
    """The steps of one or more compiled programs on one slice, drawn (`svg`, in a notebook)
    or listed (`text`, anywhere else)."""

    analyses: dict[str, ProgramAnalysis]
    timelines: dict[str, Timeline]
    compact: bool = False
    """One iteration of each loop standing for all of them (the visible checks' form)."""
    title: str = "What each device sends, step by step"
    slices: dict = dataclasses.field(default_factory=dict)
    """{program: the `assignments.costs.Slice` its times are estimated on}: which mesh axes are
    lines, where a pair is drawn link by link (none given: every pair as its own arrow)."""

    def grid(self, name: str) -> Grid:
        return Grid.of(self.analyses[name], self.slices.get(name))

    def tiles(self, name: str, with_compute: bool = False) -> list[Tile]:
        return _tiles(name, self.timelines[name], self.compact, with_compute)

    def notes(self) -> list[str]:
        """What the picture simplifies, said under it."""
        notes = []
        for name, a in self.analyses.items():
            for c in a.collectives:
                note = (f"* XLA:CPU wrote an {c.kind} + dynamic-slice: drawn and priced as the "
                        f"{c.accelerator_kind} a GPU or TPU runs")
                if c.accelerator_kind and note not in notes:
                    notes.append(note)
            tl = self.timelines[name]
            if tl.compute_s > 0 and tl.placed_compute_s == 0:
                notes.append(f"{name}: no matmul, so its {_time(tl.compute_s)} of compute (memory traffic) "
                             f"is not on the timeline")
            if tl.unknown_runs:
                notes.append(f"{name}: a loop whose trip count the run decides is timed once: + marks "
                             f"a lower bound")
        return notes

    @property
    def slice(self) -> str:
        return next(iter(self.timelines.values())).slice if self.timelines else ""

    @property
    def slice_short(self) -> str:
        """e.g. "TPU v5e 2x4 slice: X a line of 2, Y a line of 4", or, for
        `cube_slice("TPU v5p", (2, 4), ("X", "Y"), ring="Y")`, "TPU v5p 2x4 (inside a 4x4x4
        cube) slice: X a line of 2, Y a ring of 4"."""
        return next(iter(self.timelines.values())).slice_short if self.timelines else ""

    def _boxes(self, width: int) -> dict[str, _Box]:
        """Each program's tile size: one width for all (as wide as the widest line, a heading,
        a collective or the times, but never so wide that two could not share a row, unless a
        mesh is), and each program's own height (its tiles' most lines)."""
        every = [(self.analyses[n], t) for n in self.analyses for t in self.tiles(n)]
        grids = [self.grid(n) for n in self.analyses] or [Grid(1, 1)]
        widest = max([len(_tile_heading(t, self.compact)) * CHAR * SIZE for _, t in every]
                     + [_indent(line) + len(line.text) * CHAR * SIZE for a, t in every for line in _tile_lines(a, t)],
                     default=0) + 16
        tile_w = int(max(max(g.width for g in grids) + 16, min(widest, (width - GAP) // 2), 180))
        boxes = {}
        for name, a in self.analyses.items():
            lines = max((_line_count(_tile_lines(a, t), tile_w - 14) for t in self.tiles(name)), default=1)
            boxes[name] = _Box(tile_w, TOP + max(g.height for g in grids) + LINE * lines + 4, lines)
        return boxes

    def legend(self) -> list[Entry]:
        """What the tiles draw, and nothing else: each direction of the arrows drawn (on a ring,
        by ring direction, the wrap-around arcs in their own direction's colour, one of them
        named; on a line, by way of travel, a wrapped pair routed along the line named), the
        bytes beside a line's links, each kind of outline drawn. (The timeline's lanes have a
        legend of their own, `lanes`.)"""
        directions: dict[int, list] = {}   # direction: [a neighbour's arrow, a wrap-around, a routed pair, on a line]
        kinds: dict[str, str] = {}
        labels: list[float] = []   # the bytes beside the first line link drawn
        for name, a in self.analyses.items():
            grid = self.grid(name)
            for t in self.tiles(name):
                for i in t.stage.steps[t.step] if t.step >= 0 else ():
                    c = a.collectives[i]
                    if c.kind != "collective-permute":
                        kinds.setdefault(c.priced_kind, GROUP_COLORS.get(c.priced_kind, ACROSS))
                        continue
                    for s, d in pairs_of(a, c):
                        path = _along_line(grid, s, d)
                        if path is None:
                            step, k = _ring_step(grid, s, d), int(_wraps(grid, s, d))
                        else:
                            step, k = _travel(grid, s, d), 2 if len(path) > 2 else 0
                            directions.setdefault(step, [None, None, None, False])[3] = True
                            labels = labels or [next(iter(_line_loads(a, grid, t.stage.steps[t.step]).values()))]
                        examples = directions.setdefault(step, [None, None, None, False])
                        examples[k] = examples[k] or (s, d)
        entries = [Entry(f"direction={step:+d}" if step else "direction=across",
                         Line(_direction_text(step, *directions[step]), mark="arrow-" if step < 0 else "arrow+",
                              colour=_direction_colour(step)))
                   for step in sorted(directions, key=lambda v: (v == 0, abs(v), v))]
        if labels:
            entries.append(Entry("label=link-bytes", Line(
                f"{_bytes(labels[0])} beside a link: the bytes crossing it that way in the step")))
        return entries + [Entry(f"kind={kind}", Line(f"{kind}: the devices in each outline act together",
                                                     mark="outline", colour=colour))
                          for kind, colour in kinds.items()]

    def lanes(self) -> list[Entry]:
        """The timeline's legend: the lanes that have a bar."""
        drawn = {b.lane for tl in self.timelines.values() for stage in tl.stages for b in stage.bars}
        return [Entry(f"lane={lane}", Line(text, mark=f"bar:{lane}"))
                for lane, text in (("network", "links busy"), ("compute", "matmuls")) if lane in drawn]

    def svg(self, width: int = WIDTH) -> str:
        """The picture: the tiles of every program and their legend, then their timelines on
        one scale and theirs, then what the picture simplifies."""
        boxes = self._boxes(width)
        title = _wrap(self.title, width, SIZE + 1)
        body = [_text_at(0, (SIZE + 2) * (k + 1), piece, SIZE + 1, weight="bold") for k, piece in enumerate(title)]
        y = (SIZE + 2) * len(title) + 4
        subtitle, n = _lines_svg([Line(f"times on a {self.slice_short} (the book's model, not a measurement)", True)],
                                 0, y + SIZE, width)
        body.append(subtitle)
        y += n * LINE + 8
        placed, height = _layout([(name, self.tiles(name)) for name in self.analyses], boxes, width)
        for kind, item, x, dy in placed:
            if kind == "name":
                body.append(_text_at(x, y + dy, _fit(item, width - x), weight="bold", cls="program"))
            else:
                body.append(_tile_svg(self.analyses[item.program], self.grid(item.program), item, x, y + dy,
                                      boxes[item.program], self.compact))
        y += height + 8
        legend, legend_h = _legend_svg(self.legend(), y + SIZE, width)
        lanes, lanes_h = _timeline_svg(self.timelines, y + legend_h + 8, width)
        y += legend_h + 8 + lanes_h
        key, key_h = _legend_svg(self.lanes(), y + SIZE, width)
        body += [legend, lanes, key]
        y += key_h + 4
        for note in self.notes():
            for piece in _wrap(note, width):
                body.append(_text_at(0, y + SIZE, piece, dim=True, cls="note"))
                y += LINE
        height = math.ceil(y + 4)
        return (f'<svg xmlns="http://www.w3.org/2000/svg" class="kit-schedule" viewBox="0 0 {width} {height}" '
                f'width="{width}" height="{height}" role="img" aria-label="{_esc(self.title)}" '
                f'style="max-width:100%;height:auto;font-family:{FONT}">{"".join(body)}</svg>')

    def text(self) -> str:
        """The same content as a list of steps, for a terminal or a log."""
        lines = [self.title, f"times: {self.slice} (the book's model, not a measurement)"]
        for name, tl in self.timelines.items():
            serialized = tl.compute_s + tl.comm_s
            lines.append(f"{name}: {'at least ' if tl.unknown_runs else ''}{_time(tl.total_s)} as its steps allow "
                         f"(compute {_time(tl.compute_s)}, communication {_time(tl.comm_s)}, "
                         f"{_time(serialized)} one after the other)")
            tiles = self.tiles(name, with_compute=True)
            lines += [f"  {_tile_text(self.analyses[name], self.grid(name), t, self.compact)}" for t in tiles]
            if not tiles:
                lines.append("  no communication, no matmul")
        return "\n".join(lines + self.notes())

    def __str__(self) -> str:
        return self.text()

    def __rich__(self):  # how `assignments.display.console` prints it outside a notebook
        from rich.text import Text

        return Text(self.text())

    def _repr_html_(self) -> str:
        return f'<div class="kit-schedule-figure" style="max-width:100%;margin:4px 0">{self.svg()}</div>'

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": self._repr_html_(), "text/plain": self.text()}


def draw_schedule(analyses: ProgramAnalysis | dict[str, ProgramAnalysis], chip="TPU v5e", *,
                  compact: bool = False, title: str | None = None) -> Schedule:
    """The schedule of one analysis, or of several ({name: analysis}) side by side, with
    times estimated on `chip` (a name in `assignments.costs.CHIPS`, or a `Slice`).
    Shown as a picture when it is a cell's value; `str()` gives the text form."""
    from .costs import Slice, slice_for

    if isinstance(analyses, ProgramAnalysis):
        analyses = {"program": analyses}
    timelines = {name: timeline(a, chip) for name, a in analyses.items()}
    slices = {name: chip if isinstance(chip, Slice) else slice_for(chip, a.mesh_shape, a.axis_names)
              for name, a in analyses.items() if a.mesh_shape}
    return Schedule(dict(analyses), timelines, compact, title or Schedule.title, slices)


def show_schedule(fn, *args, baseline=None, chip="TPU v5e", compact: bool = False, title: str | None = None,
                  **kwargs) -> dict:
    """Compile `jax.jit(fn)(*args, **kwargs)` and draw what it communicates, step by step.

    `fn` may be one function or {name: function}; `baseline` (e.g. the plain `jax.jit`
    version) is drawn beside it under the name "plain jax.jit". `args` may be arrays or
    `jax.ShapeDtypeStruct`s carrying shardings: nothing runs, so the book's sizes cost only
    compile time. Times are estimated on `chip`. Returns {name: ProgramAnalysis}.
    """
    from .checks import ShownAnalyses, compile_programs
    from .display import console

    programs = dict(fn) if isinstance(fn, dict) else {getattr(fn, "__name__", "program"): fn}
    if baseline is not None:
        programs["plain jax.jit"] = baseline
    analyses = compile_programs(programs, args, kwargs, "show_schedule")
    console.print(draw_schedule(analyses, chip, compact=compact, title=title))
    return ShownAnalyses(analyses)
