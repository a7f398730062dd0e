"""The student hand-out: what a student receives for one assignment, and nothing else.

    python -m graders.build handout -a problem1 [--exchange DIR] [--out dist]

writes `dist/handout-problem1/` and `dist/handout-problem1.zip`:

    handout-problem1/
      README.md                 how to install, work, validate and hand in
      pyproject.toml            `pip install ./handout-problem1` installs all of it
      assignments/              the student runtime (devices, meshes, checks, HLO analysis)
      jupyter-config/           installed into the environment's etc/jupyter:
        labconfig/page_config.json                  hides formgrader, Create Assignment, Courses
        jupyter_server_config.d/scaling-jax-student.json   their server parts off
        jupyter_server_config.json                  allow_root (a course image often runs as root)
        nbgrader_config.py                          the course id and the exchange folder
      problem1/problem1.ipynb   the release notebook (nbgrader's stubs, no hidden tests)

It never holds `graders/`, `solutions/`, source notebooks or hidden cases
(`tests/test_handout.py` checks the zip).
"""
from __future__ import annotations

import json
import os
import shutil
import zipfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_EXCHANGE = "/srv/nbgrader/exchange"  # nbgrader's own default
COURSE_ID = "scaling-jax"

# nbgrader's JupyterLab plugins and server extensions that only instructors use.
INSTRUCTOR_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                      "@jupyter/nbgrader:course-list")
INSTRUCTOR_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader",
                                "nbgrader.server_extensions.course_list")
RUNTIME_DEPENDENCIES = ('"jax>=0.10,<0.13"', '"jaxlib>=0.10,<0.13"', '"numpy>=2.0"', '"rich>=13"',
                        '"flatbuffers>=24"', '"nbgrader>=0.9.5,<0.10"', '"jupyterlab>=4.2"',
                        '"matplotlib>=3.7"')

PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "scaling-jax-course-{name}"
version = "0.1.0"
description = "Student hand-out for {name}: the course's runtime and JupyterLab set-up"
requires-python = ">=3.11,<3.13"
dependencies = [{deps}]

[tool.setuptools]
packages = ["assignments", "assignments.contracts"]

[tool.setuptools.data-files]
"etc/jupyter/labconfig" = ["jupyter-config/labconfig/page_config.json"]
"etc/jupyter/jupyter_server_config.d" = ["jupyter-config/jupyter_server_config.d/scaling-jax-student.json"]
"etc/jupyter" = ["jupyter-config/nbgrader_config.py", "jupyter-config/jupyter_server_config.json"]
"""

README = """# {name}: your hand-out

```bash
python3 -m venv .venv && .venv/bin/pip install ./handout-{name}    # once: JAX, JupyterLab, nbgrader, the course runtime
.venv/bin/jupyter lab handout-{name}/{name}/{name}.ipynb
```

(The same commands work as root: the hand-out's Jupyter settings allow it.)

1. Run the first cell: it asks JAX for 8 simulated CPU devices. After a kernel restart,
   run it again before anything else.
2. A fresh notebook's checks all say `not implemented yet`; fill in each `# YOUR CODE HERE`
   and rerun its check. A check runs your function on a 2x4 mesh and on a 4x2 mesh.
3. Press **Validate** in the notebook's toolbar (or run `nbgrader validate {name}.ipynb`):
   it names every function whose check still fails.
4. Hand in:
   - through JupyterLab: *Nbgrader > Assignment List*, **Submit** next to `{name}`
     (your course's exchange is `{exchange}`); the same panel later shows
     **Fetch Feedback**;
   - or upload `{name}.ipynb` where your course collects it (Gradescope, your LMS).
"""

NBGRADER_CONFIG = """# The course's settings for students' nbgrader (Assignment List, Validate, submit).
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = {course!r}
c.Exchange.root = {exchange!r}
"""


def _copy_runtime(dest: str) -> None:
    shutil.copytree(os.path.join(REPO_ROOT, "assignments"), os.path.join(dest, "assignments"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.jaxexport"))


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def write_student_config(dest: str, exchange: str = DEFAULT_EXCHANGE, course: str = COURSE_ID) -> str:
    """The Jupyter settings a student's environment needs (a `jupyter-config/` folder laid out
    like `etc/jupyter`): instructor panels off, nbgrader pointed at the course's exchange."""
    cfg = os.path.join(dest, "jupyter-config")
    _write(os.path.join(cfg, "labconfig", "page_config.json"),
           json.dumps({"disabledExtensions": {p: True for p in INSTRUCTOR_PLUGINS}}, indent=2) + "\n")
    _write(os.path.join(cfg, "jupyter_server_config.d", "scaling-jax-student.json"),
           json.dumps({"ServerApp": {"jpserver_extensions": {e: False for e in INSTRUCTOR_SERVER_EXTENSIONS}}},
                      indent=2) + "\n")
    # Extension switches merge across the .d folder; other settings are read from this file.
    _write(os.path.join(cfg, "jupyter_server_config.json"),
           json.dumps({"ServerApp": {"allow_root": True}}, indent=2) + "\n")
    _write(os.path.join(cfg, "nbgrader_config.py"), NBGRADER_CONFIG.format(course=course, exchange=exchange))
    return cfg


def build_handout(name: str, out_dir: str | None = None, exchange: str = DEFAULT_EXCHANGE) -> str:
    """Write `<out_dir>/handout-<name>/` and its zip; returns the zip's path."""
    release_nb = os.path.join(REPO_ROOT, "release", name, f"{name}.ipynb")
    if not os.path.exists(release_nb):
        raise FileNotFoundError(f"no release notebook {release_nb}: run `python -m graders.build all` first")
    out_dir = out_dir or os.path.join(REPO_ROOT, "dist")
    dest = os.path.join(out_dir, f"handout-{name}")
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    shutil.copytree(os.path.join(REPO_ROOT, "release", name), os.path.join(dest, name),
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    _copy_runtime(dest)
    write_student_config(dest, exchange=exchange)
    _write(os.path.join(dest, "pyproject.toml"),
           PYPROJECT.format(name=name, deps=", ".join(RUNTIME_DEPENDENCIES)))
    _write(os.path.join(dest, "README.md"), README.format(name=name, exchange=exchange))
    zip_path = dest + ".zip"
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as z:
        for folder, _, files in os.walk(dest):
            for fn in sorted(files):
                full = os.path.join(folder, fn)
                z.write(full, os.path.relpath(full, out_dir))
    return zip_path
