"""The scaffold (`python -m assignments.scaffold`) and its guide, ADDING.md, in a copy of the kit.

The guide's worked example is done end to end in a copy of the kit's working tree (a git
repository of its own, so `git status` says what changed): `col_roll_diff` scaffolded into
problem1, its placeholders filled in as a maintainer would (here by text substitution), the
release and solutions rebuilt, and the function graded. Before the placeholders are filled in,
the function earns nothing and its own test fails; after, the solution earns every point and
the released stub none. The files changed are exactly those the guide lists: the ones the
scaffold writes (by hand) and the ones `graders.build` regenerates. A new assignment is started
the same way. The refusals (an existing function, an existing assignment) write nothing.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import nbformat
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.stack_neutral]  # runs nbgrader; code generation is the same on any stack

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COPIED = ("assignments", "graders", "source", "solutions", "release", "tests/conftest.py", "tests/grading.py",
          "tests/older_stack.py", "nbgrader_config.py", "grading_config.py", "pyproject.toml", "ADDING.md",
          ".gitignore")
"""What the scaffold, the build and the function's test need of the kit."""
FUNCTION, ASSIGNMENT = "col_roll_diff", "problem1"
TODO = f"TODO(scaffold: {FUNCTION})"


def guide_files(label: str) -> list[str]:
    """The paths ADDING.md lists on its line that starts with `**label**`."""
    with open(os.path.join(REPO_ROOT, "ADDING.md")) as f:
        line = next(line for line in f if line.startswith(f"**{label}**"))
    return [path for path in re.findall(r"`([^`\s]+)`", line) if "/" in path]


def run(kit: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`python ARGS` in the copy, its verdicts cached beside it (never the session's cache: the
    copy's contract is not the kit's)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
           "KIT_VERDICT_CACHE": os.path.join(os.path.dirname(kit), "verdicts")}
    proc = subprocess.run([sys.executable, *args], cwd=kit, capture_output=True, text=True, timeout=600, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def git(kit: str, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=kit", "-c", "user.email=kit@localhost", *args], cwd=kit,
                          check=True, capture_output=True, text=True).stdout


def changed(kit: str) -> set[str]:
    """The files `git status` shows changed or new since the last commit."""
    return {line[3:] for line in git(kit, "status", "--porcelain", "--untracked-files=all").splitlines()}


def scaffolded(proc: subprocess.CompletedProcess) -> list[str]:
    return re.findall(r"^wrote (\S+)$", proc.stdout, re.M)


def score(kit: str, submission: str, tmp: str) -> float:
    """The function's score on `submission`, graded as a course grades (`python -m graders`)."""
    out = os.path.join(tmp, os.path.basename(submission) + ".json")
    run(kit, "-m", "graders", submission, "-a", ASSIGNMENT, "--only", FUNCTION, "-o", out, "--quiet")
    with open(out) as f:
        return json.load(f)["score"]


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> str:
    """A copy of the kit's working tree, committed in a git repository of its own."""
    kit = str(tmp_path_factory.mktemp("kit"))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.jaxexport")
    for rel in COPIED:
        source, target = os.path.join(REPO_ROOT, rel), os.path.join(kit, rel)
        if os.path.isdir(source):
            shutil.copytree(source, target, ignore=ignore)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(source, target)
    git(kit, "init", "-q")
    git(kit, "add", "-A")
    git(kit, "commit", "-q", "-m", "the kit")
    return kit


def fill_in(kit: str) -> None:
    """Replace every placeholder of col_roll_diff with the guide's worked example."""
    path = os.path.join(kit, "assignments", "contracts", f"{ASSIGNMENT}.py")
    with open(path) as f:
        text = f.read()
    text = re.sub(r"    return np\.full\(.*1e30\).*\n",
                  "    _, nY = mesh\n    S, D = A.shape\n    blocks = A.reshape(S, nY, D // nY)\n"
                  "    return (np.roll(blocks, shift, axis=2) - blocks).reshape(S, D)\n", text)
    text = re.sub(r'task="TODO[^"]*"', 'task="Inside each Y-shard, roll(columns, shift, axis=1) - columns, '
                                       'for any static shift."', text)
    text = re.sub(r'NoCommunication\(why="TODO[^"]*", to_try="TODO[^"]*"\)',
                  'NoCommunication(why="Each output column is a column of the same Y-shard.", '
                  'to_try="roll the local block along its columns.")', text)
    text = re.sub(rf" *# {re.escape(TODO)}: each line so marked.*\n.*\n", "", text)  # the two lines of advice
    text = re.sub(rf"  # {re.escape(TODO)}.*", "", text)
    with open(path, "w") as f:
        f.write(text)

    path = os.path.join(kit, "graders", "hidden", f"{ASSIGNMENT}.py")
    with open(path) as f:
        text = f.read()
    text = re.sub(r"    return \[part\.visible_case\]  # TODO.*\n",
                  "    chosen = [((2, 4), 16, 8, s) for s in (1, -2, 3, 5)] + [\n"
                  "        ((4, 2), 24, 6, 2), ((1, 8), 5, 16, -3), ((2, 2), 6, 10, 7), ((1, 3), 7, 9, 4), ((3, 1), 12, 5, -6)]\n"
                  '    return [Case(mesh, {"S": S, "D": D}, {"shift": shift}) for mesh, S, D, shift in chosen]\n', text)
    with open(path, "w") as f:
        f.write(text)

    path = os.path.join(kit, "source", ASSIGNMENT, f"{ASSIGNMENT}.ipynb")
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if TODO in cell.source and cell.cell_type == "markdown":
            cell.source = ("## Exercise 1f: a roll inside each Y-shard\n\n"
                           "Write `col_roll_diff(A, *, mesh, shift)`: inside each Y-shard, the shard's columns "
                           "rolled by `shift` along axis 1, minus the columns themselves.\n\n*Rule:* no communication.")
        elif TODO in cell.source:
            cell.source = re.sub(r"    raise NotImplementedError\(\)  # TODO.*",
                                 "    def local(block):\n        return jnp.roll(block, shift, axis=1) - block\n\n"
                                 "    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), "
                                 "out_specs=P('X', 'Y'))(A)", cell.source)
    nbformat.write(nb, path)


def test_the_guides_example_end_to_end(kit, tmp_path):
    """Does the scaffold write exactly the guide's hand-edited files, with placeholders that fail
    (no point earned, the function's own test red) until filled in; and once filled in and
    built, does the solution earn all of col_roll_diff's points and the stub none, with only the
    guide's files changed?"""
    by_hand, regenerated = guide_files("By hand"), guide_files("Regenerated")
    assert len(by_hand) == 4 and len(regenerated) == 3, (by_hand, regenerated)

    written = scaffolded(run(kit, "-m", "assignments.scaffold", ASSIGNMENT, FUNCTION, "--points", "2"))
    assert written == by_hand
    assert changed(kit) == set(by_hand)
    run(kit, "-m", "graders.build", "all", "-a", ASSIGNMENT)
    assert changed(kit) == set(by_hand) | set(regenerated)

    # Unfilled: the function imports and runs, but earns nothing, and its own test says why.
    assert score(kit, "solutions/problem1.py", str(tmp_path)) == 0
    unfinished = run(kit, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q", by_hand[-1], check=False)
    assert unfinished.returncode == 1 and "2 failed" in unfinished.stdout, unfinished.stdout
    assert "placeholders left to fill in" in unfinished.stdout and TODO in unfinished.stdout

    fill_in(kit)
    run(kit, "-m", "graders.build", "all", "-a", ASSIGNMENT)
    assert changed(kit) == set(by_hand) | set(regenerated)
    assert score(kit, "solutions/problem1.py", str(tmp_path)) == 2
    assert score(kit, "release/problem1/problem1.ipynb", str(tmp_path)) == 0
    finished = run(kit, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q", by_hand[-1], check=False)
    assert finished.returncode == 0 and "2 passed" in finished.stdout, finished.stdout
    rules = run(kit, "-m", "assignments.rules", ASSIGNMENT, FUNCTION).stdout
    assert "C001" in rules and "Inside each Y-shard" in rules, rules

    # Nothing is scaffolded twice, nor over a function another assignment grades.
    git(kit, "add", "-A")
    git(kit, "commit", "-q", "-m", "col_roll_diff")
    for assignment, function in ((ASSIGNMENT, FUNCTION), (ASSIGNMENT, "roll_diff"), ("problem3", "roll_diff")):
        refused = run(kit, "-m", "assignments.scaffold", assignment, function, check=False)
        assert refused.returncode == 1 and "exists already, nothing written" in refused.stderr, refused.stderr
    assert changed(kit) == set()


def test_a_new_assignment(kit):
    """Does `--assignment` write the guide's four files, refuse an existing assignment, take a
    first function, and build into the guide's generated files?"""
    git(kit, "add", "-A")
    git(kit, "commit", "-q", "--allow-empty", "-m", "before")
    started = scaffolded(run(kit, "-m", "assignments.scaffold", "--assignment", "problem5", "--title", "Problem 5"))
    assert started == guide_files("Starts with")
    for existing in ("problem5", "problem1"):
        refused = run(kit, "-m", "assignments.scaffold", "--assignment", existing, check=False)
        assert refused.returncode == 1 and "exists already, nothing written" in refused.stderr, refused.stderr
    first = scaffolded(run(kit, "-m", "assignments.scaffold", "problem5", "first_function"))
    assert first == [path.replace("col_roll_diff", "first_function").replace("problem1", "problem5")
                     for path in guide_files("By hand")]
    run(kit, "-m", "graders.build", "all", "-a", "problem5")
    assert changed(kit) == set(started) | set(first) | set(guide_files("Regenerated with it"))
    listed = run(kit, "-m", "assignments.rules", "problem5").stdout
    assert "first_function" in listed, listed
    with open(os.path.join(kit, "solutions", "problem5.py")) as f:
        solution = f.read()
    assert "def first_function(A, *, mesh):" in solution and "raise NotImplementedError()" in solution
