"""A submitted notebook is bounded before anything parses it: its size, how deeply its JSON
nests and how many JSON values it holds, measured on its raw bytes.

Parsing costs far more memory than the bytes parsed: a 0.6 MiB notebook holding 200,000 empty
objects (`{},` is three bytes) in its metadata took `nbgrader autograde`'s process from 125 MiB
to 627 MiB (nbformat's nodes, its validation, nbgrader's copies), and the kit's size cap alone
would have let such a notebook cost 26 GiB. Every value costs the same whatever its bytes, so
the values are counted, and a bound on them bounds what any parser of the notebook holds. The
nesting depth is bounded too: nbformat, jsonschema and `copy.deepcopy` recurse once per level.

`check_notebook` is the one check; every route of the trusted kit applies it before parsing a
submitted notebook: `graders.files.read_submission` (`python -m graders`, `graders.batch` and its
gradebook, Gradescope, Dask, nbgrader's `FillGradeCells`) and nbgrader's own reading of the
submitted notebook (`graders.nbgrader_bounds.BoundedNotebookExporter`). The limits are the
course's `Limits` (`submission_mib`, `notebook_depth`, `notebook_nodes`; `graders.settings`).

`scan` reads the bytes as a JSON parser would, without building anything: escaped backslashes
and quotes are dropped (`bytes.replace`), the parity of the quotes before each byte says whether
it lies inside a string, and the structural bytes outside strings give the depth (`[`/`{` open,
`]`/`}` close) and the values (1 + commas + containers that are not empty: exact for valid JSON,
never less than what a parser builds before it meets an error). A bracket, comma or escaped quote
inside a string counts for nothing. It is vectorized with NumPy over blocks of 4 MiB: 0.2 to
0.6 s for 32 MiB on a shared 2-core machine, whatever the bytes are (a Python loop over them,
or a regular expression matching each string, takes seconds on 32 MiB of short strings).
"""
from __future__ import annotations

from dataclasses import dataclass

from .files import NotASubmission

_BLOCK = 1 << 22
_QUOTE, _COMMA, _OPEN, _CLOSE, _OPEN_OBJECT, _CLOSE_OBJECT = (ord(c) for c in '",[]{}')


@dataclass(frozen=True)
class NotebookShape:
    """What parsing a notebook would build: `size` bytes, nested `depth` levels (a notebook
    `{"cells": []}` is 2), `nodes` JSON values (objects, arrays, strings, numbers, true, false
    and null; object keys not counted: each key has its value)."""

    size: int
    depth: int
    nodes: int


class NotebookTooLarge(NotASubmission):
    """A notebook beyond the course's bounds (`Limits`): its message names the limit and the fix."""


def scan(data: bytes) -> NotebookShape:
    """The size, nesting depth and number of JSON values of `data`, read as a JSON parser reads
    it, from its bytes (nothing is parsed). For valid JSON the counts are exact; for invalid JSON
    they are at least those of what a parser builds before it fails."""
    import numpy as np

    size = len(data)
    # Every backslash outside a string is an error where a parser stops; inside one, a run of
    # backslashes pairs up from its left, and what is left escapes the next byte, which matters
    # only when it is a quote.
    text = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    quotes = depth = deepest = 0
    nodes = 1
    previous = 0  # the last structural byte of the blocks before
    for start in range(0, len(text), _BLOCK):
        block = np.frombuffer(text, np.uint8, min(_BLOCK, len(text) - start), start)
        parity = np.cumsum(block == _QUOTE, dtype=np.int64)
        parity += quotes
        quotes = int(parity[-1])
        # Outside strings: an even number of quotes before (a closing quote is kept: a string
        # value between a bracket and its pair), and not white space (so `[ ]` is empty).
        outside = block[((parity & 1) == 0) & (block > 32)]
        if not len(outside):
            continue
        opens = (outside == _OPEN) | (outside == _OPEN_OBJECT)
        closes = (outside == _CLOSE) | (outside == _CLOSE_OBJECT)
        levels = np.cumsum(opens.view(np.int8) - closes.view(np.int8), dtype=np.int64)
        levels += depth
        deepest, depth = max(deepest, int(levels.max())), int(levels[-1])
        empty = int(np.count_nonzero(opens[:-1] & closes[1:])) + int(previous in (_OPEN, _OPEN_OBJECT) and closes[0])
        # Each container's values: one, and one more per comma, unless it is empty.
        nodes += int(np.count_nonzero(outside == _COMMA)) + int(np.count_nonzero(opens)) - empty
        previous = int(outside[-1])
    return NotebookShape(size, deepest, nodes)


FIX = ("clear the notebook's outputs (Edit > Clear Outputs of All Cells), remove large outputs "
       "and metadata it does not need, save it and hand it in again")


def check_notebook(data: bytes, limits, name: str = "the notebook") -> NotebookShape:
    """`data`'s shape if it is within `limits` (`graders.settings.Limits`: `submission_mib`,
    `notebook_depth`, `notebook_nodes`), else `NotebookTooLarge`, whose message says by how much,
    which limit, and what to do. Checked on the bytes: call it before anything parses them."""
    if len(data) > limits.submission_bytes:
        raise NotebookTooLarge(f"{name} is larger than {limits.submission_mib} MiB (c.Limits.submission_mib); {FIX}")
    shape = scan(data)
    if shape.depth > limits.notebook_depth:
        raise NotebookTooLarge(f"{name} nests its JSON {shape.depth:,} levels deep, more than the "
                               f"{limits.notebook_depth:,} allowed (c.Limits.notebook_depth; a notebook saved by "
                               f"Jupyter nests about 7): remove the deeply nested metadata or outputs, or {FIX}")
    if shape.nodes > limits.notebook_nodes:
        raise NotebookTooLarge(f"{name} has {shape.nodes:,} JSON nodes, more than the {limits.notebook_nodes:,} "
                               f"allowed (c.Limits.notebook_nodes): {FIX}")
    return shape
