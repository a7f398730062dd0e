"""A realistic class: notebooks as students hand them in, built from the kit's own material.

    python benchmarks/realistic_class.py -a problem1 [--students 40] [--seed 0] [--identical] OUT

writes `OUT/student000.ipynb`, ... (a folder `graders.batch` grades as it is). Each student's
notebook is the released notebook with, for every graded function, the solution's cell or
the function from the sample mistakes (`graders/samples/<assignment>_mistakes.py`), chosen
at random; then touched the way students touch their notebooks:
- scratch cells (prints, small arrays, a helper of their own) between the exercises;
- nested helper functions renamed (`local` -> `per_shard`, ...);
- comments and blank lines inside the functions (every line number moves);
- a graded function's cell moved to the end of the notebook.
With `identical`, the same class without the touches: every student's function is
byte-identical to the variant it came from, which is what a verdict cache keyed on the
source text would need. Both are deterministic given the seed.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import random
import re
import sys

import nbformat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

MISTAKE_SHARE = 0.35
"""Chance that a student's function is the sample mistake's version rather than the solution's."""
SCRATCH_CELLS = [
    "x = jnp.arange(24.0).reshape(4, 6)\nprint(x.shape, x.dtype)",
    "# trying things out\nnp.random.seed(0)\ny = np.random.randn(8, 4)\ny.mean(axis=0)",
    "def show(a):\n    print(a.shape, a.dtype, getattr(a, 'sharding', None))\n\nshow(jnp.ones((8, 8)))",
    "print(len(jax.devices()), 'devices')",
    "z = jnp.linspace(0.0, 1.0, 16).reshape(4, 4)\nfloat((z @ z.T).sum())",
    "# TODO: ask about this in office hours\nshapes = [(2, 4), (4, 2), (1, 8)]\nfor s in shapes:\n    print(s, s[0] * s[1])",
]
COMMENTS = ["# first try", "# TODO clean up", "# shapes: see the picture above",
            "# this took a while", "# per-device view", "# careful with the axis"]
HELPER_NAMES = ["per_shard", "body", "kernel", "inner", "my_block", "f", "work", "helper_fn"]
NESTED_DEF = re.compile(r"^[ \t]+def (\w+)\(", re.M)


@dataclasses.dataclass
class Student:
    name: str
    path: str
    variants: dict[str, str]
    """Graded function -> "solution" or "mistake": where the student's version came from."""


def variants(assignment: str) -> dict[str, dict[str, str]]:
    """{graded function: {"solution": its solution cell's source, "mistake": the sample
    mistakes' version}} (functions the mistakes module lacks have only a solution)."""
    from assignments.contracts import get_assignment
    from graders.samples import functions_in, sample_path

    solved = nbformat.read(os.path.join(ROOT, "solutions", assignment, f"{assignment}.ipynb"), as_version=4)
    cells = {c.metadata.get("nbgrader", {}).get("grade_id", ""): c.source for c in solved.cells}
    mistakes_path = sample_path(f"{assignment}_mistakes.py")
    with open(mistakes_path) as f:
        mistakes = functions_in(f.read())
    out = {}
    for part in get_assignment(assignment).parts:
        out[part.name] = {"solution": cells[f"{part.name}_solution"]}
        if part.name in mistakes:
            out[part.name]["mistake"] = mistakes[part.name]
    return out


def touched(source: str, rng: random.Random) -> str:
    """A function's cell as a student leaves it: nested helpers maybe renamed, a few
    comment and blank lines added (Python ignores both; every later line moves)."""
    for old in sorted(set(NESTED_DEF.findall(source))):
        if rng.random() < 0.5:
            new = rng.choice([n for n in HELPER_NAMES if not re.search(rf"\b{n}\b", source)])
            source = re.sub(rf"\b{old}\b", new, source)
    lines = source.splitlines()
    for _ in range(rng.randint(1, 3) if len(lines) > 1 else 0):
        at = rng.randint(1, len(lines) - 1)
        indent = re.match(r"[ \t]*", lines[at]).group()
        lines.insert(at, rng.choice(["", indent + rng.choice(COMMENTS)]))
    return "\n".join(lines)


def student_notebook(assignment: str, options: dict, choice: dict[str, str], rng: random.Random | None):
    """The released notebook with the chosen variant (of `options`, from `variants`) in each
    graded function's cell, and (with `rng`) a student's touches."""
    solved = nbformat.read(os.path.join(ROOT, "solutions", assignment, f"{assignment}.ipynb"), as_version=4)
    nb = nbformat.read(os.path.join(ROOT, "release", assignment, f"{assignment}.ipynb"), as_version=4)
    solutions = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in solved.cells}
    graded = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("solution"):
            continue
        name = meta.get("grade_id", "").removesuffix("_solution")
        cell.source = options[name][choice[name]] if name in choice else solutions[meta["grade_id"]]
        if name in choice:
            graded.append(cell)
            if rng is not None:
                cell.source = touched(cell.source, rng)
    if rng is not None:
        _scatter(nb, graded, rng)
    return nb


def _scatter(nb, graded: list, rng: random.Random) -> None:
    """Scratch cells at random places after the set-up cell; maybe one graded cell moved
    to the end (functions are only called when graded, so order does not matter)."""
    first = 1 + next((i for i, c in enumerate(nb.cells)
                      if c.metadata.get("nbgrader", {}).get("grade_id") == "setup"), 0)
    for _ in range(rng.randint(1, 4)):
        nb.cells.insert(rng.randint(first, len(nb.cells)), nbformat.v4.new_code_cell(rng.choice(SCRATCH_CELLS)))
    if graded and rng.random() < 0.3:
        cell = rng.choice(graded)
        nb.cells.remove(cell)
        nb.cells.append(cell)


def write_class(assignment: str, students: int, folder: str, seed: int = 0,
                identical: bool = False) -> list[Student]:
    """Write `students` notebooks into `folder`; the class's students, in order."""
    os.makedirs(folder, exist_ok=True)
    options = variants(assignment)
    out = []
    for k in range(students):
        rng = random.Random(f"{seed}/{assignment}/{k}")
        choice = {name: ("mistake" if "mistake" in kinds and rng.random() < MISTAKE_SHARE else "solution")
                  for name, kinds in options.items()}
        nb = student_notebook(assignment, options, choice, None if identical else rng)
        path = os.path.join(folder, f"student{k:03d}.ipynb")
        nbformat.write(nb, path)
        out.append(Student(f"student{k:03d}", path, choice))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--assignment", "-a", required=True)
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--identical", action="store_true", help="no touches: each function byte-identical to its variant")
    args = parser.parse_args()
    for s in write_class(args.assignment, args.students, args.out, args.seed, args.identical):
        print(s.name, " ".join(f"{k}={v[0]}" for k, v in s.variants.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
