"""A student's first minutes with the hand-out, in a real JupyterLab (headless Chromium), on
each Python at hand (the kit's, Debian's python3, a 3.12 environment beside the kit's):
- the release notebook opens unmodified (no dirty dot on its tab once the kernel is ready),
  whatever Python's version the notebook records;
- no "Would you like to get notified about official Jupyter news?" toast;
- a worked example run before the set-up cell ends in a NameError that says to run the set-up
  cell first.

The hand-out is installed with its settings (`pip install --no-deps` of its folder) into an
environment of its own that borrows the packages of a kit environment of the same Python
(a .pth file): what a student's `pip install ./handout-problem1` makes, in seconds and with no
package index. tests/test_browser.py follows the whole route with a real install.
Screenshots go to build/screenshots/papercuts/ (or $SCREENSHOTS/papercuts).
"""
from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import zipfile

import pytest

from routes import (HEIGHT, WIDTH, free_port, launch_chromium, stop, sync_playwright, wait_for_http,
                    wait_kernel_idle)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KIT_PREFIX = sys.prefix


def _site_packages(python: str) -> str:
    return subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def _version(python: str) -> str:
    return subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                          capture_output=True, text=True, check=True).stdout.strip()


def pythons() -> list:
    """(a base Python, the kit environment whose packages it borrows): the kit's own, Debian's
    python3 when it is the same minor version (another patch release: 3.11.2 beside 3.11.7),
    and the 3.12 environment beside the kit's when there is one."""
    found = [pytest.param(sys.executable, KIT_PREFIX, id=f"kit-{_version(sys.executable)}")]
    debian = "/usr/bin/python3"
    if os.path.exists(debian) and _version(debian).rsplit(".", 1)[0] == "%d.%d" % sys.version_info[:2]:
        found.append(pytest.param(debian, KIT_PREFIX, id=f"debian-{_version(debian)}"))
    other = os.path.join(REPO_ROOT, ".venv312")
    if os.path.exists(os.path.join(other, "bin", "python")) and os.path.realpath(other) != os.path.realpath(KIT_PREFIX):
        python = os.path.join(other, "bin", "python")
        found.append(pytest.param(python, other, id=f"venv312-{_version(python)}"))
    return found


@pytest.fixture(scope="module")
def handout(tmp_path_factory):
    from graders.handout import build_handout

    out = tmp_path_factory.mktemp("dist")
    zipfile.ZipFile(build_handout("problem1", str(out), exchange="/srv/course/exchange")).extractall(out)
    return out / "handout-problem1"


@pytest.fixture(scope="module")
def shots():
    folder = os.path.join(os.environ.get("SCREENSHOTS") or os.path.join(REPO_ROOT, "build", "screenshots"),
                          "papercuts")
    os.makedirs(folder, exist_ok=True)
    return folder


def student_environment(base_python: str, kit_prefix: str, handout, dest) -> str:
    """An environment of `base_python` holding the hand-out (its runtime and its settings in
    etc/jupyter and etc/ipython) that borrows the kit environment's packages; its python."""
    subprocess.run([base_python, "-m", "venv", "--without-pip", str(dest)], check=True)
    python = os.path.join(dest, "bin", "python")
    purelib = _site_packages(python)
    with open(os.path.join(purelib, "kit-environment.pth"), "w") as f:
        f.write(_site_packages(os.path.join(kit_prefix, "bin", "python")) + "\n")
    proc = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(handout)],
                          capture_output=True, text=True, cwd=str(dest))
    assert proc.returncode == 0, proc.stderr[-3000:]
    os.makedirs(os.path.join(dest, "share", "jupyter"), exist_ok=True)
    for name in ("lab", "labextensions"):  # JupyterLab's pages and nbgrader's, from the kit's environment
        os.symlink(os.path.join(kit_prefix, "share", "jupyter", name), os.path.join(dest, "share", "jupyter", name))
    return python


@pytest.mark.parametrize("base_python, kit_prefix", pythons())
def test_release_notebook_opens_clean(busy_shared_memory, base_python, kit_prefix, handout, shots, tmp_path, request):
    """Opened with the hand-out's settings: unmodified once the kernel is ready, no news toast,
    and a worked example run first names the set-up cell."""
    from assignments.devices import NO_SETUP_HINT

    python = student_environment(base_python, kit_prefix, handout, tmp_path / "env")
    version = _version(python)
    work = tmp_path / "home" / "handout-problem1"
    shutil.copytree(handout / "problem1", work / "problem1")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "IPYTHON", "PYTHON"))}
    env.update(HOME=str(tmp_path / "home"), PATH=os.path.dirname(python) + os.pathsep + "/usr/bin:/bin")
    port, token = free_port(), secrets.token_hex(16)
    log = str(tmp_path / "lab.log")
    with open(log, "w") as out:
        proc = subprocess.Popen([python, "-m", "jupyterlab", "problem1/problem1.ipynb", "--no-browser",
                                 f"--ServerApp.port={port}", f"--IdentityProvider.token={token}"],
                                cwd=str(work), env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    name = request.node.callspec.id
    try:
        wait_for_http(f"{base}/api/status?token={token}", proc, log)
        with sync_playwright()() as p:
            browser = launch_chromium(p)
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            page.set_default_timeout(60000)
            page.goto(f"{base}/lab/tree/problem1/problem1.ipynb?token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90000)
            wait_kernel_idle(page)
            page.wait_for_timeout(3000)  # the kernel's language_info has arrived by now
            page.screenshot(path=os.path.join(shots, f"opened-{name}.png"))
            tab = page.locator(".lm-TabBar-tab.jp-mod-current", has_text="problem1.ipynb")
            assert tab.count() == 1
            assert "jp-mod-dirty" not in tab.get_attribute("class"), f"Python {version}: opened modified"
            toasts = page.locator(".Toastify__toast").all_inner_texts()
            assert not [t for t in toasts if "news" in t], toasts

            example = page.locator(".jp-CodeCell", has_text="make_mesh((2, 4))").first
            example.evaluate("e => e.scrollIntoView({block: 'start'})")
            example.locator(".jp-InputArea-editor").click()
            page.keyboard.press("Control+Enter")
            error = example.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
            error.wait_for(timeout=60000)
            page.screenshot(path=os.path.join(shots, f"example-before-set-up-{name}.png"))
            text = " ".join(error.inner_text().split())
            assert "NameError: name 'make_mesh' is not defined" in text, text
            assert " ".join(NO_SETUP_HINT.split()) in text, text
            browser.close()
    finally:
        stop(proc)
    assert not re.search(r"Traceback|Error loading", open(log).read()), open(log).read()[-3000:]
