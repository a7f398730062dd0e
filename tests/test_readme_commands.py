"""Every `python -m ...` command the README shows parses as written.

The README is read for each `python -m graders...` and `python -m pytest graders/...` command,
in code blocks and in running text; placeholders (`path/to/problem1.ipynb`, `...`, `DIR`) stand
for real files, and optional parts in brackets are kept, so the fullest form is checked. The
kit's own commands run their `main` until their arguments are parsed (nothing is graded); the
pytest graders collect their tests with the README's options. A command whose options no
longer parse (as `graders.distributed`'s once did: its `--processes` collided with the
sandbox's) fails here, naming the README's line. The routes' own tests run the commands they
type in full (tests/test_browser.py, test_hub.py, test_distributed.py, test_gradescope.py, ...).
"""
from __future__ import annotations

import argparse
import importlib
import os
import re
import shlex
import subprocess
import sys

import pytest

from assignments.contracts import ASSIGNMENTS

pytestmark = pytest.mark.stack_neutral  # the command lines are the same on any stack

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join("solutions", "problem1", "problem1.ipynb")
PLACEHOLDERS = {"path/to/problem1.ipynb": NOTEBOOK, "...": NOTEBOOK, "DIR": "dist"}


def readme_commands() -> list[str]:
    """Each `python -m` command of the README, once: from the command to the end of its code
    span or line, comments and trailing prose cut; a module named alone, in running text
    (`python -m graders`), is a name, not a command."""
    with open(os.path.join(REPO_ROOT, "README.md")) as f:
        text = f.read()
    found = []
    for match in re.finditer(r"python -m [^`\n|]*", text):
        command = match.group(0).split("  #")[0].split(" # ")[0].strip().rstrip(":;,.)")
        if len(command.split()) > 3 and command not in found:
            found.append(command)
    return found


def as_typed(command: str) -> list[str]:
    """The command's words, placeholders filled in and optional [parts] kept."""
    words = shlex.split(command.replace("[", "").replace("]", ""))
    return [PLACEHOLDERS.get(w, w) for w in words]


class Parsed(Exception):
    """Raised once a command's arguments are parsed: nothing more of it runs."""


def test_the_readme_shows_the_commands_this_test_knows():
    """Does the README's list hold the commands of every route (so this test reads it right)?"""
    modules = {as_typed(c)[2] for c in readme_commands()}
    assert {"graders", "graders.batch", "graders.build", "graders.demo", "graders.report", "graders.gradescope",
            "graders.distributed", "pytest"} <= modules, modules


@pytest.mark.parametrize("command", [c for c in readme_commands() if not c.startswith("python -m pytest")])
def test_each_kit_command_parses_as_written(command, monkeypatch):
    """Do the command's arguments parse, and does every assignment it names exist?"""
    words = as_typed(command)
    module, argv = words[2], words[3:]
    if "--help" in argv:
        argv = [a for a in argv if a != "--help"]
        if module == "graders":  # `python -m graders --help`: its help prints
            with pytest.raises(SystemExit) as exit_:
                runpy_main(module, ["--help"], monkeypatch)
            assert exit_.value.code == 0
            return
    names = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-a", "--assignment")]
    assert all(n in ASSIGNMENTS for n in names), (command, names)
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        original(self, args, namespace)
        raise Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    with pytest.raises(Parsed):
        runpy_main(module, argv, monkeypatch)


def runpy_main(module: str, argv: list[str], monkeypatch) -> None:
    """`python -m module argv...` in this process, from the repository's folder: the
    module's `main(argv)` (a package's `__main__.main`), as its `__main__` block calls it."""
    monkeypatch.chdir(REPO_ROOT)
    target = importlib.import_module(module)
    if not hasattr(target, "main"):
        target = importlib.import_module(module + ".__main__")
    target.main(argv)


def test_each_pytest_grader_command_collects_as_written(tmp_path):
    """Do the README's `python -m pytest graders/...` lines collect their tests with the options
    they give (the graders' plugin declares --submission, --only, --results)?"""
    commands = [c for c in readme_commands() if c.startswith("python -m pytest")]
    assert len(commands) >= 4
    for command in commands:
        words = [w for w in as_typed(command) if w != "--lf"]  # --lf reads pytest's cache: nothing to test
        # What the command would write (--junitxml=report.xml, --results=results.json) goes to a scratch folder.
        words = [w.replace("=", f"={tmp_path}/", 1) if w.startswith(("--junitxml=", "--results=")) else w
                 for w in words]
        proc = subprocess.run([sys.executable, *words[1:], "--collect-only", "-q", "-p", "no:cacheprovider"],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and "tests collected" in proc.stdout, (command, proc.stdout[-2000:],
                                                                          proc.stderr[-2000:])
