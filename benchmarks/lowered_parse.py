"""What reading each lowered program once saves the style rules, without changing what they say.

    python benchmarks/lowered_parse.py [--before REV] [--assignments warmup problem1 problem2]
                                       [--repeats 5] [--designs tests/submissions/problem1/x.py ...]

The style rules (`assignments.style_rules`) read a graded function's lowered program. Before
`assignments.lowered.LoweredProgram`, each question they asked of it (its operations, the work
outside its shard_map, its collectives, its shard_map's inputs) parsed the text again and built
its own data flow. This lowers the solution's graded functions (and those of --designs, each of
the assignment its folder names: trusted files only, since they run here, unsandboxed) on each
hidden case of each part that has style rules, then
runs those rules over every case, as a judge does, twice in each repeat, in alternating order
(these machines are noisy): once reading the program through the module as it was at REV (by
default the last commit before it), once through `lowered_program`. Caches are emptied before
each run. It prints the seconds of each, their ratio, and whether every message is the same.
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("KIT_GRADING_SECRET", "benchmark")
BEFORE = "dfb03f6"
"""The last commit whose style rules parsed a program once per question."""


def load_before(rev: str):
    """`assignments/lowered.py` as it was at `rev`, as a module of the package (its relative
    imports resolve to today's `assignments.contract` and `assignments.hlo`)."""
    source = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:assignments/lowered.py"],
                            capture_output=True, text=True, check=True).stdout
    spec = importlib.util.spec_from_loader("assignments._lowered_before", loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "assignments"
    exec(compile(source, f"{rev}:assignments/lowered.py", "exec"), module.__dict__)
    return module


class Before:
    """A lowered program read as the style rules read it at `BEFORE`: each question is a
    function of the text, which parses it (each memoized on its own)."""

    def __init__(self, module, text: str):
        self.module, self.text = module, text

    @property
    def ops(self):
        return self.module.program_ops(self.text)

    @property
    def uses_shard_map(self):
        return self.module.uses_shard_map(self.text)

    @property
    def work_outside_shard_map(self):
        return self.module.work_outside_shard_map(self.text)

    def written_collectives(self, mesh_shape, narrower_than=0):
        return self.module.written_collectives(self.text, tuple(mesh_shape), narrower_than)

    @property
    def shard_map_inputs(self):
        return self.module.shard_map_inputs(self.text)


def programs(names: list[str], designs: list[str]) -> list[tuple]:
    """(part, case, lowered text) for each case of each part with style rules, of the solution,
    cases of one program next to each other; and of each of `designs` (in the folder of its
    assignment), its functions that differ from the solution's and lower, on the first case of
    each mesh where a shard_map shows (`style_shows`)."""
    import inspect

    import jax

    import assignments
    from assignments.contract import style_shows
    from assignments.contracts import get_assignment
    from assignments.evaluate import make_mesh, place
    from graders.hidden import case_seed, hidden_cases, hidden_inputs

    assignments.setup_devices(8)
    found = []
    for name in names:
        a = get_assignment(name)
        cases = hidden_cases(a)
        files = [os.path.join(ROOT, "solutions", name + ".py")]
        files += [d for d in designs if os.path.basename(os.path.dirname(os.path.abspath(d))) == name]
        solution = None
        for path in files:
            spec = importlib.util.spec_from_file_location(f"design_{name}_{len(found)}", path)
            design = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(design)
            except Exception:
                continue
            solution = solution or design
            for p in a.parts:
                if p.eager or not p.style_rules or not callable(getattr(design, p.name, None)):
                    continue
                meshes: set = set()
                if design is not solution:
                    try:
                        if inspect.getsource(getattr(design, p.name)) == inspect.getsource(getattr(solution, p.name)):
                            continue
                    except (OSError, TypeError):
                        pass
                for i, c in enumerate(cases[p.name]):
                    if design is not solution and (c.mesh in meshes or not style_shows(c.mesh)):
                        continue
                    meshes.add(c.mesh)
                    try:
                        mesh = make_mesh(c.mesh, p.axis_types)
                        arrays = hidden_inputs(a, p, c, case_seed(name, p.name, i))
                        f = jax.jit(functools.partial(getattr(design, p.name), **p.call_kwargs(mesh, c.statics)))
                        found.append((p, c, f.lower(*place(arrays, p, mesh)).as_text()))
                    except Exception:  # a design that does not lower on this case: nothing to read
                        continue
    return found


def run(cases: list[tuple], read) -> tuple[float, list]:
    """Seconds to run every case's style rules in their declared order (the first that fails
    says why, as `style_problems` runs them), reading each program by `read(text)`, and what
    they said."""
    from assignments.rules import Program

    said = []
    started = time.perf_counter()
    for part, case, text in cases:
        program = Program(part, None, read(text))
        found = []
        for rule in part.style_rules:
            found = rule.problems(program, case)
            if found:
                break
        said.append(found)
    return time.perf_counter() - started, said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE)
    parser.add_argument("--assignments", nargs="+", default=["warmup", "problem1", "problem2"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--designs", nargs="*", default=[])
    args = parser.parse_args()

    from assignments import lowered

    before = load_before(args.before)
    caches = [before.program_ops, before.work_outside_shard_map, before.written_collectives,
              before.shard_map_inputs]
    cases = programs(args.assignments, args.designs)
    print(f"{len(cases)} cases of {len({t for _, _, t in cases})} lowered programs "
          f"({', '.join(args.assignments)}{f', {len(args.designs)} designs' if args.designs else ''})")

    def old():
        for f in caches:
            f.cache_clear()
        return run(cases, lambda text: Before(before, text))

    def new():
        lowered.lowered_program.cache_clear()
        return run(cases, lowered.lowered_program)

    times: dict[str, list[float]] = {"before": [], "after": []}
    same = True
    for r in range(args.repeats):
        order = [("before", old), ("after", new)] if r % 2 == 0 else [("after", new), ("before", old)]
        said = {}
        for label, f in order:
            seconds, said[label] = f()
            times[label].append(seconds)
        same = same and said["before"] == said["after"]
        print(f"repeat {r + 1}: before {times['before'][-1]:.2f} s, after {times['after'][-1]:.2f} s, "
              f"after/before {times['after'][-1] / times['before'][-1]:.2f}")
    b, a = statistics.median(times["before"]), statistics.median(times["after"])
    failing = sum(1 for s in said["after"] if s)
    print(f"median: before {b:.2f} s, after {a:.2f} s; after/before {a / b:.2f} ({b / a:.1f}x faster); "
          f"every message the same: {same} ({failing} of {len(cases)} cases fail a style rule)")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
