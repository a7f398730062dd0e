"""Sample submissions bundled with the kit, for the demonstration and the kit's tests.

Each sample is a `.py` file defining some of an assignment's functions; `notebook_from`
puts them into the released notebook's solution cells, as a student would.
"""
from __future__ import annotations

import ast
import os

import nbformat

HERE = os.path.dirname(os.path.abspath(__file__))


def sample_path(name: str) -> str:
    return os.path.join(HERE, name)


def functions_in(source: str) -> dict[str, str]:
    """{function name: its source} for the top-level functions of a module."""
    tree = ast.parse(source)
    lines = source.splitlines()
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            out[node.name] = "\n".join(lines[start - 1: node.end_lineno])
    return out


def notebook_from(release_notebook: str, module_source: str):
    """The released notebook with each solution cell replaced by the module's function of
    the same name (cells whose function the module lacks keep the stub)."""
    nb = nbformat.read(release_notebook, as_version=4)
    functions = functions_in(module_source)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        name = meta.get("grade_id", "").removesuffix("_solution")
        if cell.cell_type == "code" and meta.get("solution") and name in functions:
            cell.source = functions[name]
    return nb
