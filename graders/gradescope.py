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

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT_VARIABLE = "GRADESCOPE_AUTOGRADER_ROOT"
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
CONFIG = "gradescope.json"
SECRET_NAME = ".grading-secret"
# Trusted files only: the graders minus the nbgrader glue and the sample submissions.
LEFT_OUT = ("graders/nbgrader_plugin.py", "graders/samples", "graders/demo.py", "graders/build.py")

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, from /autograder/source, when it builds the autograder image.
# The kit needs Python 3.11 or 3.12 (it was built with Python {python}, JAX {jax}).
set -euo pipefail
cd "$(dirname "$0")"
ROOT="${{GRADESCOPE_AUTOGRADER_ROOT:-/autograder}}"
PY=""
for candidate in python3.12 python3.11; do
  if command -v "$candidate" >/dev/null; then PY="$candidate"; break; fi
done
# The sandbox student code runs in (graders.sandbox); without it, build with --unsandboxed.
command -v bwrap >/dev/null || (apt-get update && apt-get install -y bubblewrap) || true
if [ -z "$PY" ]; then
  apt-get update && apt-get install -y python3.12 python3.12-venv || \\
    apt-get install -y python3.11 python3.11-venv
  PY=$(command -v python3.12 || command -v python3.11)
fi
"$PY" -m venv "$ROOT/venv"
"$ROOT/venv/bin/python" -m pip install --quiet --upgrade pip
"$ROOT/venv/bin/python" -m pip install --quiet -r requirements.txt
"$ROOT/venv/bin/python" -c "import jax; print('autograder ready: JAX', jax.__version__)"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission. It always writes results/results.json.
ROOT="${GRADESCOPE_AUTOGRADER_ROOT:-/autograder}"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
cd "$ROOT/source" && exec "$PYTHON" -m graders.gradescope run --root "$ROOT"
"""


# --- building the bundle -------------------------------------------------------------------


def kit_files() -> list[str]:
    """The kit's files that go into the bundle, relative to the repository."""
    files = []
    for top in ("assignments", "graders"):
        for root, dirs, names in os.walk(os.path.join(REPO_ROOT, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                if not name.endswith(".py"):
                    continue
                rel = os.path.relpath(os.path.join(root, name), REPO_ROOT).replace(os.sep, "/")
                if not any(rel == x or rel.startswith(x + "/") for x in LEFT_OUT):
                    files.append(rel)
    return files


def requirements() -> str:
    import importlib.metadata as md

    pins = []
    for name in ("jax", "jaxlib", "numpy", "rich", "flatbuffers"):
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

        add("setup.sh", SETUP_SH.format(python=config["built_with"]["python"], jax=jax.__version__), True)
        add("run_autograder", RUN_AUTOGRADER, True)
        add("requirements.txt", requirements())
        add(CONFIG, json.dumps(config, indent=2) + "\n")
        add(SECRET_NAME, grading_secret().decode() + "\n")
        for rel in kit_files():
            with open(os.path.join(REPO_ROOT, rel), encoding="utf-8") as f:
                add(rel, f.read())
    return out


# --- running inside Gradescope ----------------------------------------------------------


def find_submission(folder: str, assignment: str) -> tuple[str | None, str]:
    from .batch import _pick

    files = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
        files += [os.path.join(root, n) for n in names if n.endswith((".ipynb", ".py"))]
    return _pick(files, assignment)


def run(root: str) -> dict:
    """Grade `root/submission`, write `root/results/results.json`; returns what was written."""
    started = time.perf_counter()
    source = os.path.join(root, "source")
    try:
        with open(os.path.join(source, CONFIG)) as f:
            config = json.load(f)
        assignment = config["assignment"]
        visibility = config.get("visibility", {})
        sandbox = config.get("sandbox", "auto")
    except (OSError, ValueError, KeyError) as e:
        return write_results(root, {"score": 0, "output": f"the autograder bundle is incomplete "
                                    f"({CONFIG}: {e}); rebuild it with python -m graders.gradescope build",
                                    "tests": []})
    try:
        path, note = find_submission(os.path.join(root, "submission"), assignment)
        if path is None:
            from .results import SubmissionResult

            message = (f"no notebook or Python file was found in your submission; upload "
                       f"{assignment}.ipynb (the notebook you worked in)")
            data = SubmissionResult.failed(assignment, "", message).to_gradescope()
        else:
            from .harness import Limits
            from .run import grade

            os.environ.setdefault("KIT_GRADING_SECRET_FILE", os.path.join(source, SECRET_NAME))
            result = grade(path, assignment, limits=Limits(sandbox=sandbox))
            data = result.to_gradescope()
            if note:
                data["output"] += f"\n\nNote: {note}."
            print(f"isolation: {result.isolation}")
        for test in data["tests"]:
            test["visibility"] = visibility.get(test["name"], "visible")
    except Exception as e:  # the graders failed: say so, and let the instructor rerun
        traceback.print_exc()
        data = {"score": 0, "output": f"the autograder failed ({type(e).__name__}: {e}); this is "
                                      f"not your fault: ask your instructor to rerun it", "tests": []}
    data["execution_time"] = round(time.perf_counter() - started, 2)
    data["stdout_visibility"] = "hidden"
    return write_results(root, data)


def write_results(root: str, data: dict) -> dict:
    from .batch import write_atomic

    write_atomic(os.path.join(root, "results", "results.json"), json.dumps(data, indent=2))
    return data


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
        data = run(os.path.abspath(args.root))
        print(f"score {data.get('score')}; results in {os.path.join(args.root, 'results', 'results.json')}")
        return 0
    from assignments.contracts import ASSIGNMENTS

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
          f"(Configure Autograder > Zip file upload)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
