"""Build what is generated from source/: release/ (nbgrader), solutions/, graders/setup_cells.py,
the solutions branch.

    python -m graders.build all [-a NAME]    # regenerate release/ and solutions/
    python -m graders.build check            # exit 1 if anything generated is stale
    python -m graders.build solutions-branch # git branch 'solutions': release/ holds solved notebooks
    python -m graders.build handout -a NAME  # dist/handout-NAME.zip: what students receive (graders/handout.py)
"""
from __future__ import annotations

import argparse
import filecmp
import os
import subprocess
import sys
import tempfile

import nbformat

from .settings import KIT_ROOT

SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def assignment_names(root: str = KIT_ROOT) -> list[str]:
    source = os.path.join(root, "source")
    return sorted(d for d in os.listdir(source)
                  if os.path.exists(os.path.join(source, d, f"{d}.ipynb")))


def nbgrader(args: list[str], cwd: str = KIT_ROOT, check: bool = True) -> subprocess.CompletedProcess:
    """Run an nbgrader command with this Python; raise with its log on failure."""
    # nbgrader runs helper commands (alembic) from PATH: use this environment's.
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd,
                          capture_output=True, text=True, env=env)
    if check and proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def build_releases(names: list[str], release_dir: str) -> list[str]:
    """`nbgrader generate_assignment` into release_dir; returns the assignments' folders.
    Every assignment at once is one nbgrader command (its assignment id "*"), not one each."""
    for assignment_id in ["*"] if sorted(names) == assignment_names() else names:
        with tempfile.TemporaryDirectory() as tmp:
            nbgrader(["generate_assignment", assignment_id, "--force",
                      f"--CourseDirectory.release_directory={release_dir}",
                      f"--CourseDirectory.db_url=sqlite:///{tmp}/gradebook.db"])
    return [os.path.join(release_dir, name) for name in names]


def _strip_solution_markers(source: str) -> str:
    lines = source.split("\n")
    kept, hidden = [], False
    for line in lines:
        if HIDDEN_BEGIN in line:
            hidden = True
            continue
        if HIDDEN_END in line:
            hidden = False
            continue
        if hidden or any(m in line for m in SOLUTION_MARKERS):
            continue
        kept.append(line)
    return "\n".join(kept).rstrip("\n")


def solved_notebook(source_path: str):
    """The source notebook with solutions in place and no hidden tests or outputs."""
    nb = nbformat.read(source_path, as_version=4)
    for cell in nb.cells:
        cell.source = _strip_solution_markers(cell.source)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def solution_module(nb, name: str) -> str:
    """An importable .py form of the solutions: the setup cell and every solution cell."""
    chunks = [f'"""Solutions to {name}, generated from source/{name}/{name}.ipynb '
              f'by `python -m graders.build`. Do not edit."""']
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and (meta.get("solution") or is_setup_cell(cell)):
            chunks.append(cell.source)
    return "\n\n\n".join(chunks) + "\n"


def build_solutions(name: str, out_dir: str) -> list[str]:
    nb = solved_notebook(os.path.join(KIT_ROOT, "source", name, f"{name}.ipynb"))
    os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    nb_path = os.path.join(out_dir, name, f"{name}.ipynb")
    nbformat.write(nb, nb_path)
    py_path = os.path.join(out_dir, f"{name}.py")
    with open(py_path, "w") as f:
        f.write(solution_module(nb, name))
    return [nb_path, py_path]


SETUP_CELLS = os.path.join("graders", "setup_cells.py")


def is_setup_cell(cell) -> bool:
    """A locked set-up cell (grade_id 'setup' or 'setup_...'): the graders run the course's own copy."""
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and meta.get("locked") and str(meta.get("grade_id", "")).startswith("setup")


def setup_cells_module() -> str:
    """`graders/setup_cells.py`: every assignment's locked set-up cells, as released."""
    cells = {}
    for name in assignment_names():
        nb = nbformat.read(os.path.join(KIT_ROOT, "source", name, f"{name}.ipynb"), as_version=4)
        cells[name] = {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells if is_setup_cell(c)}
    lines = ['"""The locked set-up cells of each assignment\'s notebook, as released (generated from source/',
             'by `python -m graders.build`; do not edit). Every route grades a notebook with these in place',
             'of the student\'s copies, as nbgrader\'s autograde restores locked cells: a set-up cell the',
             'student changed never changes the grade."""', "", "SETUP_CELLS: dict[str, dict[str, str]] = {"]
    for name, by_id in cells.items():
        lines.append(f"    {name!r}: {{")
        lines += [f"        {grade_id!r}: {source!r}," for grade_id, source in by_id.items()]
        lines.append("    },")
    return "\n".join(lines + ["}", ""])


def build_all(root: str = KIT_ROOT, only: list[str] | None = None) -> None:
    names = only or assignment_names()
    build_releases(names, os.path.join(root, "release"))
    for name in names:
        build_solutions(name, os.path.join(root, "solutions"))
    with open(os.path.join(root, SETUP_CELLS), "w") as f:
        f.write(setup_cells_module())


def stale_files() -> list[str]:
    """Generated files that differ from what the generators make now."""
    stale = []
    with tempfile.TemporaryDirectory() as tmp:
        names = assignment_names()
        for name, fresh_release in zip(names, build_releases(names, os.path.join(tmp, "release"))):
            for fn in os.listdir(fresh_release):
                committed = os.path.join(KIT_ROOT, "release", name, fn)
                if not os.path.exists(committed) or not filecmp.cmp(
                        committed, os.path.join(fresh_release, fn), shallow=False):
                    stale.append(os.path.relpath(committed, KIT_ROOT))
            for fresh in build_solutions(name, os.path.join(tmp, "solutions")):
                committed = os.path.join(KIT_ROOT, os.path.relpath(fresh, tmp))
                if not os.path.exists(committed) or not filecmp.cmp(committed, fresh, shallow=False):
                    stale.append(os.path.relpath(committed, KIT_ROOT))
    try:
        with open(os.path.join(KIT_ROOT, SETUP_CELLS)) as f:
            current = f.read() == setup_cells_module()
    except OSError:
        current = False
    return stale + ([] if current else [SETUP_CELLS])


def solutions_branch(branch: str = "solutions") -> str:
    """Make git branch `branch`: HEAD with every release notebook replaced by its solved form.

    Built with git plumbing in a private index, so the working tree is not touched.
    """
    def git(*args, env=None, input=None):
        return subprocess.run(["git", *args], cwd=KIT_ROOT, check=True, capture_output=True,
                              text=True, env=env, input=input).stdout.strip()

    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git("read-tree", "HEAD", env=env)
        for name in assignment_names():
            solved = os.path.join(KIT_ROOT, "solutions", name, f"{name}.ipynb")
            blob = git("hash-object", "-w", solved)
            git("update-index", "--add", "--cacheinfo", f"100644,{blob},release/{name}/{name}.ipynb", env=env)
        tree = git("write-tree", env=env)
    commit = git("commit-tree", tree, "-p", "HEAD", "-m",
                 "Self-study: release notebooks with the solutions filled in")
    git("update-ref", f"refs/heads/{branch}", commit)
    return commit


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graders.build", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["all", "check", "solutions-branch", "handout"])
    parser.add_argument("--assignment", "-a", action="append", help="only this assignment (with 'all', 'handout')")
    parser.add_argument("--exchange", default=None, help="handout: the course's nbgrader exchange folder "
                        "(default: nbgrader_config.py's c.Exchange.root)")
    parser.add_argument("--out", default=None, help="handout: output folder (default dist/)")
    args = parser.parse_args(argv)
    if args.what == "all":
        build_all(only=args.assignment)
        print(f"release/, solutions/ and {SETUP_CELLS} regenerated from source/")
    elif args.what == "check":
        stale = stale_files()
        if stale:
            print("stale generated files (run `python -m graders.build all` and commit):")
            print("\n".join(f"  {s}" for s in stale))
            return 1
        print(f"release/, solutions/ and {SETUP_CELLS} are current")
    elif args.what == "handout":
        from graders.exchange import UnsafeExchange
        from graders.handout import build_handout

        for name in args.assignment or assignment_names():
            try:
                print(build_handout(name, args.out, exchange=args.exchange))
            except UnsafeExchange as e:
                print(f"no hand-out built: {e}", file=sys.stderr)
                return 1
    else:
        commit = solutions_branch()
        print(f"branch 'solutions' now at {commit[:12]}: check it out for self-study")
    return 0


if __name__ == "__main__":
    sys.exit(main())
