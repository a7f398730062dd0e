"""The student hand-out: what a student receives for one assignment, and nothing else.

    python -m graders.build handout -a problem1 [--exchange DIR] [--out dist]

writes `dist/handout-problem1/` and `dist/handout-problem1.zip`:

    handout-problem1/
      README.md                 how to install, work, validate and hand in
      pyproject.toml            `pip install ./handout-problem1` installs all of it
      assignments/              the student runtime (devices, meshes, checks, HLO analysis)
      jupyter-config/           installed into the environment's etc/jupyter:
        labconfig/page_config.json                  hides formgrader, Create Assignment, Courses,
                                                    and JupyterLab's news (its "get notified?" toast)
        jupyter_server_config.d/scaling-jax-student.json   their server parts off
        jupyter_server_config.py                    root_dir = the folder it starts in; allow_root;
                                                    notebooks open unmodified with any Python
        nbgrader_config.py                          the course id, the exchange, the hand-in check
      ipython-config/           installed into the environment's etc/ipython:
        ipython_kernel_config.py                    every kernel loads `assignments` (its NameError
                                                    hint names the set-up cell, also before it ran)
      problem1/problem1.ipynb   the release notebook (nbgrader's stubs, no hidden tests)
      .exchange/scaling-jax/outbound/problem1/   the release again: a stand-in exchange for a
                                laptop (below)

The folder is laid out as nbgrader's Fetch lays out a fetched assignment: JupyterLab started
in `handout-problem1/` shows `problem1/` as already fetched, and Submit hands in the notebook
the student opened. The course id and the exchange come from the course's `nbgrader_config.py`
(what nbgrader itself uses there), so instructor and student meet in the same exchange.
On a laptop that exchange cannot exist: there the student's nbgrader uses the hand-out's
`.exchange/`, so the Assignment List lists the assignment as downloaded (not "The exchange
directory does not exist"), and Submit hands in nothing and names the file to upload to the
course's LMS or Gradescope instead (the instructor collects those with `nbgrader zip_collect`,
tests/test_nbgrader.py).

It never holds `graders/`, `solutions/`, source notebooks or hidden cases
(`tests/test_handout.py` checks the zip).
"""
from __future__ import annotations

import json
import os
import shutil
import zipfile

from .exchange import require_safe_exchange
from .settings import KIT_ROOT


def _nbgrader_default_exchange() -> str:
    from nbgrader.exchange.default.exchange import Exchange

    return Exchange.class_traits()["root"].default_value


DEFAULT_EXCHANGE = _nbgrader_default_exchange()
"""nbgrader's own default exchange folder (0.9: /usr/local/share/nbgrader/exchange)."""

# nbgrader's JupyterLab plugins and server extensions that only instructors use.
INSTRUCTOR_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                      "@jupyter/nbgrader:course-list")
INSTRUCTOR_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader",
                                "nbgrader.server_extensions.course_list")
# JupyterLab's news: its "Would you like to get notified about official Jupyter news?" toast
# would cover the first output a student sees (JupyterLab's documented way to turn it off).
NEWS_PLUGIN = "@jupyterlab/apputils-extension:announcements"
SUBMIT_PLUGIN = "assignments.handin.SubmitAskingIfUnchanged"
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
"etc/jupyter" = ["jupyter-config/nbgrader_config.py", "jupyter-config/jupyter_server_config.py"]
"etc/ipython" = ["ipython-config/ipython_kernel_config.py"]
"""

README = """# {name}: your hand-out

```bash
python3 -m venv --upgrade-deps .venv && .venv/bin/pip install ./handout-{name}    # once: JAX, JupyterLab, nbgrader, the course runtime
cd handout-{name} && ../.venv/bin/jupyter lab {name}/{name}.ipynb
```

JupyterLab opens in this folder, where nbgrader keeps your copy of `{name}`:
`{name}/{name}.ipynb` is the notebook you work in and the one **Submit** hands in.
(The same commands work as root: the hand-out's Jupyter settings allow it.)

1. Run the first cell: it asks JAX for 8 simulated CPU devices. After a kernel restart,
   run it again before anything else (a cell run without it ends in a `NameError` that says so).
2. A fresh notebook's checks all say `not implemented yet`; fill in each `# YOUR CODE HERE`
   and rerun its check. A check runs your function on a 2x4 mesh and on a 4x2 mesh.
3. Press **Validate** in the notebook's toolbar (or run `nbgrader validate {name}/{name}.ipynb`):
   it names every function whose check still fails.
4. Save (*File > Save Notebook*), then hand in; how depends on where you work:
   - **on the course's shared machine or JupyterHub** (where its exchange, `{exchange}`,
     exists): *Nbgrader > Assignment List*, **Submit** next to `{name}`. If no answer cell
     differs from the release, Submit says so and hands in nothing until you press it again.
     Later the same panel shows **Fetch Feedback**, then *(view feedback)*;
   - **on your own computer** (a laptop: no course exchange can exist there): upload
     `{name}/{name}.ipynb`, this folder's notebook as last saved, where your course collects
     work (its LMS assignment page, or Gradescope). The Assignment List still shows `{name}`
     as downloaded; its Submit hands in nothing here and names the file to upload. Feedback
     comes back the way your course returns it (an HTML page).
"""

LAPTOP_EXCHANGE = ".exchange"
"""The stand-in exchange inside the hand-out folder (hidden in JupyterLab's file browser): the
release only, so that on a laptop the Assignment List lists the assignment as downloaded."""

NBGRADER_CONFIG = '''# The course's settings for students' nbgrader (Assignment List, Validate, Submit).
import os

c = get_config()  # noqa: F821
COURSE, EXCHANGE = {course!r}, {exchange!r}
c.CourseDirectory.course_id = COURSE
c.Exchange.root = EXCHANGE
# Submit asks again before it hands in a notebook whose answer cells are the release's.
c.ExchangeFactory.submit = {submit!r}

# On a laptop the course's exchange cannot exist: the hand-out's own folder carries a stand-in,
# {laptop!r}, holding only the release, so the Assignment List (run in the hand-out's folder)
# lists the assignment as downloaded instead of "The exchange directory does not exist", and
# its Submit (and `nbgrader submit`) says to upload the notebook instead.
LAPTOP = os.path.join(os.getcwd(), {laptop!r})
if not os.path.isdir(os.path.join(EXCHANGE, COURSE)) and os.path.isdir(os.path.join(LAPTOP, COURSE)):
    from assignments.handin import SubmitAskingIfUnchanged, unchanged_notebooks

    class UploadInstead(SubmitAskingIfUnchanged):
        """Submit on a computer without the course's exchange (a laptop): nothing can reach the
        instructor from here, so it hands in nothing and says what to upload instead (the
        notebook, to the course's LMS or Gradescope). It never lists the assignment as
        submitted: a student must not believe it handed in."""

        def init_dest(self):
            pass  # nothing is copied anywhere

        def copy_files(self):
            self.init_release()
            unchanged = unchanged_notebooks(self.release_path, self.src_path)
            notebooks = sorted(n for n in os.listdir(self.src_path) if n.endswith(".ipynb"))
            lines = [
                "Nothing was handed in: this computer has no course exchange",
                f"({{os.path.join(EXCHANGE, COURSE)}} does not exist).",
                "To hand in, save the notebook (File > Save Notebook), then upload this",
                "file where your course collects work (its LMS page, or Gradescope):",
                *(f"    {{os.path.join(self.src_path, name)}}" for name in notebooks),
                "If your course hands in through nbgrader on a shared machine, work there",
                "(or ask your instructor to set up its exchange on this one).",
            ]
            if unchanged:
                lines += ["", f"Careful: {{', '.join(unchanged)}} has no answer cell changed since the release."]
            self.fail("\\n" + "\\n".join(lines))

    c.Exchange.root = LAPTOP
    c.ExchangeFactory.submit = UploadInstead
'''

SERVER_CONFIG = '''# The course's settings for the student's Jupyter server.
import os

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

c = get_config()  # noqa: F821
c.ServerApp.allow_root = True  # a course image often runs as root
# nbgrader fetches into, and submits from, the folder the server starts in; JupyterLab shows
# that same folder (also when it is started with a notebook's path), so the notebook a
# student opens is the one Submit hands in, and the Assignment List's links open.
c.ServerApp.root_dir = os.getcwd()


def kernel_language_info():
    """The language_info this environment's Python kernel reports (ipykernel's own)."""
    from ipykernel.ipkernel import IPythonKernel

    return dict(IPythonKernel.language_info)


class NotebooksOpenUnmodified(AsyncLargeFileManager):
    """When its kernel is ready, JupyterLab writes the kernel's language_info (Python's version
    among it) into the notebook and marks it modified if that differs from the file's. So a
    Python notebook is served with this environment's kernel's language_info: it opens
    unmodified with any Python. The file itself changes only when the student saves it."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if model["type"] == "notebook" and model.get("content"):
            metadata = model["content"]["metadata"]
            if (metadata.get("kernelspec", {}).get("name") == "python3"
                    and metadata.get("language_info", {}).get("name") == "python"):
                metadata["language_info"] = kernel_language_info()
        return model


c.ServerApp.contents_manager_class = NotebooksOpenUnmodified
'''

KERNEL_CONFIG = """# The course's settings for the student's Python kernels: every kernel loads the course's
# runtime as an IPython extension, so that a NameError says which cell to run first (the
# set-up cell), also in a kernel where the set-up cell has not run yet.
c = get_config()  # noqa: F821
c.InteractiveShellApp.extensions.append("assignments")
"""


def course_settings(course_root: str = KIT_ROOT) -> tuple[str, str]:
    """(course id, exchange folder) as nbgrader reads them from the course's nbgrader_config.py,
    nbgrader's defaults where it sets none."""
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default.exchange import Exchange
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=course_root).load_config()
    return CourseDirectory(config=config).course_id, Exchange(config=config).root


MAINTAINER_MODULES = ("scaffold.py",)
"""Modules of `assignments` a student never runs: the scaffold writes a new graded function's
source, graders and tests into the kit (ADDING.md)."""


def _copy_runtime(dest: str) -> None:
    shutil.copytree(os.path.join(KIT_ROOT, "assignments"), os.path.join(dest, "assignments"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.jaxexport", *MAINTAINER_MODULES))


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def write_student_config(dest: str, exchange: str | None = None, course: str | None = None) -> str:
    """The Jupyter settings a student's environment needs (a `jupyter-config/` folder laid out
    like `etc/jupyter`): instructor panels and JupyterLab's news off, the server's root at its
    working folder, notebooks served with the kernel's language_info (so that they open
    unmodified), nbgrader pointed at the course's exchange (by default the course's own
    settings)."""
    if exchange is None or course is None:
        course_id, course_exchange = course_settings()
        exchange, course = exchange or course_exchange, course or course_id
    cfg = os.path.join(dest, "jupyter-config")
    _write(os.path.join(cfg, "labconfig", "page_config.json"),
           json.dumps({"disabledExtensions": {p: True for p in (*INSTRUCTOR_PLUGINS, NEWS_PLUGIN)}}, indent=2) + "\n")
    _write(os.path.join(cfg, "jupyter_server_config.d", "scaling-jax-student.json"),
           json.dumps({"ServerApp": {"jpserver_extensions": {e: False for e in INSTRUCTOR_SERVER_EXTENSIONS}}},
                      indent=2) + "\n")
    _write(os.path.join(cfg, "jupyter_server_config.py"), SERVER_CONFIG)
    _write(os.path.join(cfg, "nbgrader_config.py"),
           NBGRADER_CONFIG.format(course=course, exchange=exchange, submit=SUBMIT_PLUGIN,
                                  laptop=LAPTOP_EXCHANGE))
    return cfg


def write_kernel_config(dest: str) -> str:
    """The IPython settings a student's environment needs (an `ipython-config/` folder laid out
    like `etc/ipython`): every kernel loads `assignments`, whose NameError hint names the
    set-up cell."""
    cfg = os.path.join(dest, "ipython-config")
    _write(os.path.join(cfg, "ipython_kernel_config.py"), KERNEL_CONFIG)
    return cfg


def build_handout(name: str, out_dir: str | None = None, exchange: str | None = None) -> str:
    """Write `<out_dir>/handout-<name>/` and its zip; returns the zip's path. Raises
    `graders.exchange.UnsafeExchange` when the exchange is on this machine and others could
    rearrange it (students would fetch and hand in there)."""
    release_nb = os.path.join(KIT_ROOT, "release", name, f"{name}.ipynb")
    if not os.path.exists(release_nb):
        raise FileNotFoundError(f"no release notebook {release_nb}: run `python -m graders.build all` first")
    course_id, course_exchange = course_settings()
    exchange = exchange or course_exchange
    if os.path.lexists(exchange):  # an exchange on this machine: one no student can rearrange
        require_safe_exchange(exchange, course_id)
    out_dir = out_dir or os.path.join(KIT_ROOT, "dist")
    dest = os.path.join(out_dir, f"handout-{name}")
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    shutil.copytree(os.path.join(KIT_ROOT, "release", name), os.path.join(dest, name),
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    # The laptop's stand-in exchange (see NBGRADER_CONFIG): the release, as nbgrader's release
    # lays it out in an exchange's outbound folder.
    shutil.copytree(os.path.join(dest, name), os.path.join(dest, LAPTOP_EXCHANGE, course_id, "outbound", name))
    _copy_runtime(dest)
    write_student_config(dest, exchange=exchange, course=course_id)
    write_kernel_config(dest)
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
