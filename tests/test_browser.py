"""A student's path in a real JupyterLab, driven by headless Chromium (Playwright).

One course on one machine, in temporary folders: the instructor releases problem1 to an
nbgrader exchange; the student's JupyterLab (set up as the hand-out sets it up: no instructor
panels) fetches it from the Assignment List, runs it, validates it (failing, naming the
functions), works (the solutions go in), validates again (passing), submits; the instructor
collects, autogrades, releases feedback; the student fetches the feedback. Screenshots of
each step, in the light and the dark theme, go to build/screenshots/ (or $SCREENSHOTS).

Needs Debian's `chromium` and the `playwright` package (no browser download):
    apt-get install -y chromium && pip install -e '.[browser]'
"""
from __future__ import annotations

import os
import platform
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import nbformat
import pytest

from graders.build import nbgrader
from graders.demo import course_config
from graders.handout import write_student_config

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
ASSIGNMENT = "problem1"
FUNCTIONS = ("shard_average_jit", "shard_average_shard_map", "block_average_jit",
             "block_average_shard_map", "roll_diff")
WIDTH, HEIGHT = 1280, 900


def _playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install -e '.[browser]')")
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    return sync_playwright


def http_status(url: str) -> int:
    try:
        return urllib.request.urlopen(url, timeout=10).status
    except urllib.error.HTTPError as e:
        return e.code


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def shots(repo_root):
    folder = os.environ.get("SCREENSHOTS") or os.path.join(repo_root, "build", "screenshots")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    print(f"\nscreenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """An instructor's course folder, an exchange, a student's home and Jupyter settings."""
    root = tmp_path_factory.mktemp("browser")
    exchange, instructor, student = root / "exchange", root / "instructor", root / "student"
    for d in (exchange, instructor, student):
        d.mkdir()
    os.chmod(exchange, 0o777)
    shutil.copytree(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                 "source", ASSIGNMENT), instructor / "source" / ASSIGNMENT)
    (instructor / "nbgrader_config.py").write_text(
        course_config(str(instructor)) + f"c.Exchange.root = {str(exchange)!r}\n")
    nbgrader(["generate_assignment", ASSIGNMENT, "--force"], cwd=str(instructor))
    nbgrader(["release_assignment", ASSIGNMENT, "--force"], cwd=str(instructor))
    config = write_student_config(str(root), exchange=str(exchange))
    return {"root": root, "exchange": exchange, "instructor": instructor, "student": student,
            "config": config}


@pytest.fixture(scope="module")
def lab(course):
    """The student's JupyterLab: loopback, a free port, a token, the hand-out's settings."""
    port, token = free_port(), secrets.token_hex(16)
    root = course["root"]
    env = {**os.environ,
           "JUPYTER_CONFIG_PATH": course["config"],           # the hand-out's etc/jupyter
           "JUPYTER_CONFIG_DIR": str(root / "user-config"),     # nothing from ~/.jupyter
           "JUPYTER_RUNTIME_DIR": str(root / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(root / "lab-settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(root / "lab-workspaces"),
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    log = open(root / "lab.log", "w")
    # No --allow-root: the hand-out's settings must let it start as root too.
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={course['student']}"],
        cwd=str(course["student"]), env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited: {(root / 'lab.log').read_text()[-3000:]}")
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except Exception:
            time.sleep(0.5)
    else:
        proc.kill()
        raise RuntimeError("jupyter lab did not start in 90 s")
    yield {"base": base, "token": token, "log": root / "lab.log"}
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


# --- helpers driving JupyterLab's own menus and buttons ------------------------------------

def menu(page, *path):
    """Open a menu-bar menu and click through `path`. A click on the bar can land while the
    previous menu is still closing and leave the menu shut: then it is clicked again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    bar = page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{path[0]}$"))
    for _ in range(3):
        bar.click()
        try:
            page.locator(".lm-Menu").last.wait_for(state="visible", timeout=5000)
            break
        except PlaywrightTimeout:
            continue
    for item in path[1:]:
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).last.click()


def wait_idle(page, timeout=240):
    """Until every code cell has run: no [*] or [ ] prompts left."""
    page.wait_for_function(
        """() => { const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
                   return p.length > 0 && p.every(e => /\\[\\d+\\]/.test(e.textContent)); }""",
        timeout=timeout * 1000, polling=500)


def open_notebook(page, lab, path):
    page.goto(f"{lab['base']}/lab/tree/{path}?token={lab['token']}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
    page.wait_for_function(
        "() => { const s = document.querySelector('.jp-Notebook-ExecutionIndicator');"
        " return s && s.getAttribute('data-status') === 'idle'; }", timeout=120000)
    if page.locator("#jp-left-stack").is_hidden():  # the file browser open, as students keep it
        page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab").first.click()


def run_all(page):
    menu(page, "Run", "Run All Cells")
    wait_idle(page)


def validate(page) -> str:
    page.locator(".jp-NotebookPanel-toolbar").get_by_text("Validate", exact=True).click()
    dialog = page.locator(".jp-Dialog-content")
    dialog.wait_for(timeout=30000)
    page.wait_for_function(
        "() => { const d = document.querySelector('.jp-Dialog-content');"
        " return d && !/Validating\\.\\.\\./.test(d.innerText) && /Validation Results/.test(d.innerText); }",
        timeout=240000, polling=500)
    return dialog.inner_text()


def close_dialog(page):
    page.locator(".jp-Dialog-button.jp-mod-accept").click()
    page.locator(".jp-Dialog").wait_for(state="detached")


def close_all_discarding(page):
    menu(page, "File", "Close All Tabs")
    for _ in range(3):
        button = page.locator(".jp-Dialog-button", has_text=re.compile("Discard|Don't Save|Close"))
        try:
            button.first.click(timeout=3000)
        except Exception:
            break


def set_theme(page, theme):
    menu(page, "Settings", "Theme", theme)
    page.wait_for_function(f"() => document.body.dataset.jpThemeName === {theme!r}", timeout=30000)
    page.wait_for_timeout(500)


def contrast(page, text) -> float:
    """WCAG contrast of the first output span saying `text` against the notebook's background."""
    return page.evaluate(
        """(text) => {
          const lum = c => { const v = c.match(/[\\d.]+/g).slice(0, 3).map(Number).map(x => x / 255)
                                 .map(x => x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4);
                             return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
          const span = [...document.querySelectorAll('.jp-OutputArea-output span')]
                         .find(s => s.textContent.trim() === text);
          let bg = 'rgb(255, 255, 255)';
          for (let e = span; e; e = e.parentElement) {
            const b = getComputedStyle(e).backgroundColor;
            if (b && b !== 'rgba(0, 0, 0, 0)' && b !== 'transparent') { bg = b; break; }
          }
          const [a, b] = [lum(getComputedStyle(span).color), lum(bg)].sort((x, y) => y - x);
          return (a + 0.05) / (b + 0.05);
        }""", text)


def outputs_fit(page) -> list[str]:
    """Outputs wider than their area (a horizontal scroll bar or cut text)."""
    return page.evaluate(
        """() => [...document.querySelectorAll('.jp-OutputArea-output')]
                 .filter(e => e.scrollWidth > e.clientWidth + 2).map(e => e.innerText.slice(0, 80))""")


def show_cell(page, text):
    """Scroll the code cell holding `text` to the top of the notebook's view."""
    cell = page.locator(".jp-CodeCell", has_text=text).first
    for _ in range(3):  # cells off screen are laid out lazily: scroll, let them settle, again
        cell.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(400)


MISTAKE = ("shard_average_shard_map", """def shard_average_shard_map(A, *, mesh):
    def local(block):
        return block.mean(axis=0, keepdims=True)

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X'))(A)""")


def work(fetched: str, solved: str, mistake: tuple[str, str] | None = None) -> None:
    """The student's work: the solution cells of the solved notebook, typed into the fetched one
    (with `mistake` = (grade_id, source) in place of one of them)."""
    mine = nbformat.read(fetched, as_version=4)
    answers = {c.metadata.nbgrader["grade_id"]: c.source for c in nbformat.read(solved, as_version=4).cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in mine.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in answers:
            cell.source = answers[grade_id]
            if mistake and grade_id == mistake[0] + "_solution":
                cell.source = mistake[1]
    nbformat.write(mine, fetched)


def instructor(course, *args):
    proc = nbgrader(list(args), cwd=str(course["instructor"]), check=False)
    assert proc.returncode == 0, f"nbgrader {' '.join(args)}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"


def test_student_path_in_jupyterlab(course, lab, shots, repo_root):
    """In a real browser: fetch, Run All, Validate fails naming the functions (light and dark
    themes readable, tables fit 1280 px with the sidebar open), work, Validate passes, submit;
    the instructor collects, autogrades and releases feedback; the student fetches it."""
    sync_playwright = _playwright()
    started = time.time()
    shot = lambda name: page.screenshot(path=os.path.join(shots, name))  # noqa: E731
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        page.set_default_timeout(60000)
        try:
            page.goto(f"{lab['base']}/lab?token={lab['token']}")
            page.wait_for_selector(".jp-LabShell", timeout=90000)
            try:  # JupyterLab's "get notified about news?" toast
                page.locator(".jp-toast-button", has_text=re.compile("^No$")).click(timeout=5000)
            except Exception:
                pass

            # The student sees the Assignment List, not the instructor's panels.
            menu(page, "Nbgrader")
            items = page.locator(".lm-Menu-itemLabel").all_inner_texts()
            shot("01-nbgrader-menu.png")
            assert "Assignment List" in items and "Formgrader" not in items, items
            page.keyboard.press("Escape")
            assert page.locator(".lm-TabBar-tab", has_text="Create Assignment").count() == 0
            assert http_status(f"{lab['base']}/formgrader?token={lab['token']}") == 404

            # Fetch from the exchange.
            menu(page, "Nbgrader", "Assignment List")
            page.get_by_role("button", name="Fetch", exact=True).click()
            page.wait_for_selector("#fetched_assignments_list .list_item", timeout=60000)
            shot("02-assignment-list-fetched.png")
            fetched = course["student"] / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
            assert fetched.exists()

            # Open it: not marked modified; Run All runs to the end with every check rendered.
            open_notebook(page, lab, f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb")
            page.wait_for_timeout(2000)
            dirty = page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty").count() > 0
            written = nbformat.read(str(fetched), as_version=4).metadata.language_info.get("version")
            if written == platform.python_version():  # JupyterLab compares the kernel's language_info
                assert not dirty, "the notebook is marked modified on open"
            else:
                print(f"notebook written for Python {written}, kernel {platform.python_version()}: "
                      f"JupyterLab refills language_info (marked modified: {dirty})")
            run_all(page)
            for name in FUNCTIONS:
                assert page.locator(".jp-OutputArea-output", has_text=f"visible check: {name} failed").count() == 1
            assert page.locator(".jp-OutputArea-output", has_text="CheckFailed").count() == len(FUNCTIONS)
            assert page.locator(".jp-OutputArea-output", has_text="collective-permute").count() >= 1, \
                "Run All stopped before the last cells"
            assert page.locator("text=<visible check of").count() == 0
            assert outputs_fit(page) == []
            show_cell(page, "check(shard_average_jit)")
            shot("03-release-light.png")
            assert contrast(page, "failed") >= 3.0

            # Validate: fails, naming every unimplemented function.
            verdict = validate(page)
            shot("04-release-validate.png")
            assert "Success" not in verdict and "failed" in verdict
            for name in FUNCTIONS:
                assert name in verdict, (name, verdict)
            close_dialog(page)

            set_theme(page, "JupyterLab Dark")
            show_cell(page, "check(shard_average_jit)")
            shot("05-release-dark.png")
            assert contrast(page, "failed") >= 3.0
            assert outputs_fit(page) == []
            show_cell(page, "show_mesh(mesh)")
            shot("05b-mesh-and-report-dark.png")
            close_all_discarding(page)

            # The student works, with one mistake: JAX's whole explanation, the student's line;
            # Validate names only that function.
            solved = os.path.join(repo_root, "solutions", ASSIGNMENT, f"{ASSIGNMENT}.ipynb")
            work(str(fetched), solved, mistake=MISTAKE)
            open_notebook(page, lab, f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb")
            run_all(page)
            panel = page.locator(".jp-OutputArea-output", has_text="visible check: shard_average_shard_map failed")
            message = panel.first.text_content()
            assert "out_specs is P('X',)" in message and "check_vma=False" in message, message
            assert re.search(r"Cell In\[\d+\], line \d+", message) and "site-packages" not in message
            show_cell(page, "check(shard_average_shard_map)")
            shot("06-mistake-dark.png")
            assert outputs_fit(page) == []
            verdict = validate(page)
            shot("07-mistake-validate.png")
            assert "shard_average_shard_map" in verdict and "roll_diff" not in verdict, verdict
            close_dialog(page)
            close_all_discarding(page)

            # The mistake fixed: every check passes on both meshes; Validate passes.
            work(str(fetched), solved)
            open_notebook(page, lab, f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb")
            run_all(page)
            for name in FUNCTIONS:
                assert page.locator(".jp-OutputArea-output", has_text=f"visible check: {name} passed").count() == 1
            assert page.locator(".jp-OutputArea-output", has_text="CheckFailed").count() == 0
            show_cell(page, "check(roll_diff)")
            shot("08-solution-dark.png")
            assert contrast(page, "passed") >= 3.0
            set_theme(page, "JupyterLab Light")
            shot("09-solution-light.png")
            assert contrast(page, "passed") >= 3.0
            verdict = validate(page)
            shot("10-solution-validate.png")
            assert "Success! Your notebook passes all the tests." in verdict, verdict
            close_dialog(page)
            page.keyboard.press("Control+s")
            page.wait_for_timeout(1000)
            close_all_discarding(page)

            # Submit from the Assignment List.
            menu(page, "Nbgrader", "Assignment List")
            page.get_by_role("button", name="Submit", exact=True).click()
            page.wait_for_function(
                "() => [...document.querySelectorAll('#submitted_assignments_list .list_item')].length > 0",
                timeout=60000)
            shot("11-submitted.png")

            # The instructor collects, autogrades, releases feedback.
            for step in (["collect", ASSIGNMENT], ["autograde", ASSIGNMENT, "--force"],
                         ["generate_feedback", ASSIGNMENT, "--force"], ["release_feedback", ASSIGNMENT]):
                instructor(course, *step)

            # The student fetches the feedback.
            menu(page, "Nbgrader", "Assignment List")
            page.locator("#refresh_assignments_list, button[title*='Refresh']").first.click()
            page.get_by_role("button", name="Fetch Feedback").first.click()
            page.wait_for_selector("text=(view feedback)", timeout=60000)
            shot("12-feedback-fetched.png")
        finally:
            shot("99-last.png")
            browser.close()
    pages = list((course["student"] / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html"))
    assert len(pages) == 1
    text = pages[0].read_text()
    assert "shard_average_jit" in text and "HIDDEN TESTS" not in text
    print(f"browser round trip took {time.time() - started:.0f} s")
