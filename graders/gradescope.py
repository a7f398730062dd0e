"""Gradescope: build an autograder bundle for an assignment, and run it inside Gradescope.

    python -m graders.gradescope build -a problem1 [-o dist/gradescope-problem1.zip]
        [--default-visibility visible] [--visibility roll_diff=after_published ...]
    python -m graders.gradescope run [--root /autograder]     (what run_autograder calls)

The zip holds what Gradescope asks for at its top level (`setup.sh`, `run_autograder`) and
the kit's student runtime (`assignments/`) and graders (`graders/`, without the nbgrader
glue or sample submissions: no solutions ever go in), `requirements.txt` pinning the JAX
this bundle was built and tested with, and `gradescope.json` (the assignment and the
visibility of each graded function: hidden, after_due_date, after_published or visible).

Gradescope unpacks the zip into `/autograder/source`, runs `setup.sh` once, and for each
submission runs `run_autograder`, which grades the file in `/autograder/submission` with the
same hidden graders as `python -m graders` and writes `/autograder/results/results.json`.
The root folder comes from the environment variable GRADESCOPE_AUTOGRADER_ROOT when set
(the kit's tests point it at a temporary folder laid out like `/autograder`).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import zipfile

from .results import SubmissionResult, write_results

from .settings import CONFIG_FILE, KIT_ROOT
ROOT_VARIABLE = "GRADESCOPE_AUTOGRADER_ROOT"
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
CONFIG = "gradescope.json"
SECRET_NAME = ".grading-secret"
# Trusted files only: the graders minus the nbgrader glue and the sample submissions.
LEFT_OUT = ("graders/preprocessors", "graders/samples", "graders/demo.py", "graders/build.py",
            "graders/handout.py", "graders/nbgrader_bounds.py", "graders/collect.py", "graders/exchange.py",
            "graders/release.py", "graders/html_safety.py")

SUPPORTED_PYTHONS = ("3.11", "3.12")
"""Python versions the kit supports (pyproject.toml's requires-python)."""
GRADING_REQUIREMENTS = ("jax", "jaxlib", "numpy", "rich", "flatbuffers", "pytest", "traitlets")
"""What grading imports, pinned in the bundle to the versions it was built (and tested) with:
the sandboxed workers need JAX; the graders run as pytest modules (`graders.run`), with
their settings as traitlets (`graders.settings`)."""

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Configure
# Autograder > Base image: Ubuntu 22.04, Gradescope's default, or 24.04). It makes a fresh
# environment in $ROOT/venv from requirements.txt only.
# This bundle was built and tested with Python {python} and JAX {jax}.
set -euo pipefail
cd "$(dirname "$0")"
ROOT="${{GRADESCOPE_AUTOGRADER_ROOT:-/autograder}}"
BUILT="{python_minor}"
SUPPORTED="{supported}"
say() {{ echo "setup.sh: $*" >&2; }}
apt_install() {{  # Gradescope's images are Ubuntu, and setup.sh runs as root
  command -v apt-get >/dev/null && [ "$(id -u)" -eq 0 ] || return 1
  apt-get update -qq >/dev/null 2>&1 || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1
}}
runs() {{  # an interpreter of version $2 that starts and can make a venv (a pyenv shim may not)
  command -v "$1" >/dev/null 2>&1 &&
    "$1" -c "import sys, ensurepip; sys.exit(sys.version_info[:2] != tuple(map(int, '$2'.split('.'))))" >/dev/null 2>&1
}}
PY=""
for version in $BUILT $SUPPORTED; do
  for candidate in "python$version" python3; do
    if runs "$candidate" "$version"; then PY=$(command -v "$candidate"); break 2; fi
  done
  # Installed without its venv module (Debian and Ubuntu split it off)?
  if command -v "python$version" >/dev/null 2>&1 && apt_install "python$version-venv" && runs "python$version" "$version"; then
    PY=$(command -v "python$version"); break
  fi
done
if [ -z "$PY" ]; then
  say "no Python $BUILT on this image; installing python$BUILT from the distribution"
  apt_install "python$BUILT" "python$BUILT-venv" || true
  runs "python$BUILT" "$BUILT" && PY=$(command -v "python$BUILT")
fi
if [ -z "$PY" ]; then
  say "no usable Python found: the kit needs Python $BUILT (or one of: $SUPPORTED) with its venv module."
  say "On Gradescope choose the base image Ubuntu 22.04 (setup.sh installs python3.11 from Ubuntu's"
  say "updates) or Ubuntu 24.04 (python3.12), or build the bundle from a Python 3.11 environment."
  exit 1
fi
echo "setup.sh: using $PY ($("$PY" --version 2>&1))"
# The sandbox student code runs in (graders.sandbox); without it, grading falls back to a
# dedicated uid, or build with --unsandboxed.
command -v bwrap >/dev/null || apt_install bubblewrap || say "bubblewrap could not be installed"
"$PY" -m venv --upgrade-deps "$ROOT/venv"  # a current pip resolves in half the time of the one Python ships
if ! "$ROOT/venv/bin/python" -m pip install --quiet -r requirements.txt; then
  say "pip could not install requirements.txt (the JAX this bundle pins, {jax}, may not support"
  say "$("$PY" --version 2>&1)); choose an image with Python $BUILT, or rebuild the bundle with this Python"
  exit 1
fi
"$ROOT/venv/bin/python" -c "import graders.run, graders.pytest_plugin, jax; print('autograder ready: Python', __import__('sys').version.split()[0], '| JAX', jax.__version__)"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission. It always writes results/results.json.
ROOT="${GRADESCOPE_AUTOGRADER_ROOT:-/autograder}"
PYTHON="$ROOT/venv/bin/python"
if [ ! -x "$PYTHON" ]; then
  mkdir -p "$ROOT/results"
  echo '{"score": 0, "tests": [], "output": "The autograder is not set up (setup.sh did not finish: see the autograder build log). This is not your fault: tell your instructor."}' > "$ROOT/results/results.json"
  exit 0
fi
cd "$ROOT/source" && exec "$PYTHON" -m graders.gradescope run --root "$ROOT"
"""


# --- building the bundle -------------------------------------------------------------------


def kit_files() -> list[str]:
    """The kit's files that go into the bundle, relative to the repository."""
    files = []
    for top in ("assignments", "graders"):
        for root, dirs, names in os.walk(os.path.join(KIT_ROOT, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                if not name.endswith(".py"):
                    continue
                rel = os.path.relpath(os.path.join(root, name), KIT_ROOT).replace(os.sep, "/")
                if not any(rel == x or rel.startswith(x + "/") for x in LEFT_OUT):
                    files.append(rel)
    return files


def requirements() -> str:
    import importlib.metadata as md

    pins = []
    for name in GRADING_REQUIREMENTS:
        try:
            pins.append(f"{name}=={md.version(name)}")
        except md.PackageNotFoundError:
            pins.append(name)
    return "\n".join(pins) + "\n"


def build_bundle(assignment: str, out: str, default_visibility: str = "visible",
                 visibility: dict[str, str] | None = None, sandbox: str = "auto") -> str:
    """Write the autograder zip for `assignment` to `out`; returns its path. The course's
    grading secret goes in too (`.grading-secret`), so Gradescope draws the same hidden
    inputs as the instructor's machine; the sandbox never sees it."""
    from .hidden import grading_secret

    import jax

    from assignments.contracts import get_assignment

    spec = get_assignment(assignment)
    visibility = dict(visibility or {})
    names = [p.name for p in spec.parts]
    for name, level in [("(default)", default_visibility), *visibility.items()]:
        if level not in VISIBILITIES:
            raise ValueError(f"visibility {level!r} for {name} is not one of {', '.join(VISIBILITIES)}")
    unknown = sorted(set(visibility) - set(names))
    if unknown:
        raise ValueError(f"{assignment} has no graded function {', '.join(unknown)}; "
                         f"it has {', '.join(names)}")
    config = {"assignment": assignment, "sandbox": sandbox,
              "visibility": {n: visibility.get(n, default_visibility) for n in names},
              "built_with": {"python": sys.version.split()[0], "jax": jax.__version__}}
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        def add(name: str, text: str, executable: bool = False) -> None:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text)

        python = config["built_with"]["python"]
        add("setup.sh", SETUP_SH.format(python=python, python_minor=".".join(python.split(".")[:2]),
                                        supported=" ".join(SUPPORTED_PYTHONS), jax=jax.__version__), True)
        add("run_autograder", RUN_AUTOGRADER, True)
        add("requirements.txt", requirements())
        add(CONFIG, json.dumps(config, indent=2) + "\n")
        add(SECRET_NAME, grading_secret().decode() + "\n")
        if os.path.isfile(os.path.join(KIT_ROOT, CONFIG_FILE)):  # the course's limits
            with open(os.path.join(KIT_ROOT, CONFIG_FILE), encoding="utf-8") as f:
                add(CONFIG_FILE, f.read())
        for rel in kit_files():
            with open(os.path.join(KIT_ROOT, rel), encoding="utf-8") as f:
                add(rel, f.read())
    return out


# --- running inside Gradescope ----------------------------------------------------------


def find_submission(folder: str, assignment: str) -> tuple[str | None, str]:
    """The file to grade in Gradescope's submission folder (see `graders.batch._pick`); links
    are candidates too, so that one is refused rather than passed over for another file."""
    from .batch import _pick, _student_files

    return _pick(_student_files(folder), assignment)


def run(root: str) -> SubmissionResult | None:
    """Grade `root/submission`, write `root/results/results.json`; returns the result (None
    when the bundle itself is broken: then results.json says so)."""
    started = time.perf_counter()
    source = os.path.join(root, "source")
    try:
        with open(os.path.join(source, CONFIG)) as f:
            config = json.load(f)
        assignment, visibility = config["assignment"], config.get("visibility", {})
    except (OSError, ValueError, KeyError) as e:
        _write_broken(root, f"the autograder bundle is incomplete ({CONFIG}: {e}); rebuild it with "
                            f"python -m graders.gradescope build")
        return None
    try:
        result = _grade(root, source, assignment, config.get("sandbox", "auto"))
    except Exception as e:  # the graders failed: say so, and let the instructor rerun
        traceback.print_exc()
        result = SubmissionResult.failed(assignment, "", f"the autograder failed ({type(e).__name__}: {e}); this "
                                         f"is not your fault: ask your instructor to rerun it", graders_fault=True)
    result.execution_time = time.perf_counter() - started
    write_results(os.path.join(root, "results", "results.json"), result, visibility)
    return result


def _grade(root: str, source: str, assignment: str, sandbox: str) -> SubmissionResult:
    from .files import NotASubmission, check_submission
    from .run import grade
    from .settings import Limits, load_config

    folder = os.path.join(root, "submission")
    path, note = find_submission(folder, assignment)
    if path is None:
        message = (f"no notebook or Python file was found in your submission; upload "
                   f"{assignment}.ipynb (the notebook you worked in)")
        return SubmissionResult.failed(assignment, "", message, graders_fault=False)
    try:
        check_submission(path, trusted=folder)
    except NotASubmission as e:
        return SubmissionResult.failed(assignment, os.path.basename(path), f"{e}; upload the notebook itself",
                                       graders_fault=False)
    os.environ.setdefault("KIT_GRADING_SECRET_FILE", os.path.join(source, SECRET_NAME))
    limits = Limits(config=load_config(os.path.join(source, CONFIG_FILE)))
    limits.sandbox = sandbox
    result = grade(path, assignment, limits=limits, trusted_folder=folder)
    if note:
        result.provenance.note = note
    print(f"isolation: {result.isolation}")
    return result


def _write_broken(root: str, message: str) -> None:
    from .files import write_atomic

    data = {"score": 0, "output": message, "tests": [], "stdout_visibility": "hidden"}
    write_atomic(os.path.join(root, "results", "results.json"), json.dumps(data, indent=2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graders.gradescope", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="write the autograder zip for an assignment")
    build.add_argument("--assignment", "-a", required=True)
    build.add_argument("-o", "--output", help="default: dist/gradescope-<assignment>.zip")
    build.add_argument("--default-visibility", default="visible", choices=VISIBILITIES)
    build.add_argument("--unsandboxed", action="store_true",
                       help="grade without bubblewrap (if Gradescope's containers cannot run it): "
                            "the container is then the only isolation, and results.json says so")
    build.add_argument("--visibility", nargs="+", default=[], metavar="FUNCTION=LEVEL",
                       help="per graded function, e.g. roll_diff=after_published")
    run_parser = sub.add_parser("run", help="grade /autograder/submission (run_autograder calls this)")
    run_parser.add_argument("--root", default=os.environ.get(ROOT_VARIABLE, "/autograder"))
    args = parser.parse_args(argv)

    if args.command == "run":
        result = run(os.path.abspath(args.root))
        print(f"score {result.score if result else 0}; results in {os.path.join(args.root, 'results', 'results.json')}")
        return 0
    from assignments.contracts import ASSIGNMENTS, get_assignment

    if args.assignment not in ASSIGNMENTS:
        parser.error(f"unknown assignment {args.assignment!r}; known: {', '.join(sorted(ASSIGNMENTS))}")
    levels = {}
    for item in args.visibility:
        name, sep, level = item.partition("=")
        if not sep:
            parser.error(f"--visibility takes FUNCTION=LEVEL, got {item!r}")
        levels[name] = level
    out = args.output or os.path.join("dist", f"gradescope-{args.assignment}.zip")
    try:
        build_bundle(args.assignment, out, args.default_visibility, levels,
                     sandbox="none" if args.unsandboxed else "auto")
    except ValueError as e:
        parser.error(str(e))
    print(f"wrote {out}: upload it as the autograder of {args.assignment} on Gradescope "
          f"(Configure Autograder > Zip file upload; base image Ubuntu 22.04 or 24.04)")
    print(f"It holds the course's grading secret ({SECRET_NAME}: every hidden input is drawn from it) and "
          f"the hidden graders: keep the zip where only the course's staff can read it, never beside "
          f"the hand-out; whoever reads it can compute every hidden input.")
    written = get_assignment(args.assignment).written
    if written:
        print(f"The autograder gives the {sum(p.points for p in get_assignment(args.assignment).parts):g} code "
              f"points. For the written answers, enable manual grading in the assignment's settings and "
              f"add one question each under Edit Outline (rubrics: the solutions notebook's rubric cells):")
        for w in written:
            print(f"  {w.name}: {w.points:g} point(s): {w.prompt}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
