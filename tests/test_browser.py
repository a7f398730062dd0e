"""The student's route of the README, word for word, in a real JupyterLab (headless Chromium).

On one machine, with nothing the README does not show:
- the instructor (root, the kit's environment, a copy of the kit) makes nbgrader's exchange
  folder with the README's line, runs `nbgrader generate_assignment` and `release_assignment`
  with the course's own settings, and builds the hand-out (`python -m graders.build handout`);
- a student, a new non-root user with Debian's `python3`, unzips it, installs it into a fresh
  environment and starts JupyterLab with the README's two commands;
- in the browser: the student's panels; the Assignment List shows problem1 where JupyterLab
  opened it; Submit of the untouched notebook is refused; Run All; Validate fails naming every
  function; both themes; answers typed into the cells, one of them wrong (its message, Validate
  naming only it), then fixed; Validate passes; Submit;
- the instructor collects (the collected notebook holds what the student typed), autogrades and
  releases feedback; the student fetches it and opens it through *(view feedback)*; neither
  the feedback nor anything else the student saw carries the mark scheme.
nbgrader's exchange under /usr/local/share lives in a private mount namespace, and the student
is removed afterwards (tests/routes.py). Screenshots at 1280x800, light and dark, go to
build/screenshots/ (or $SCREENSHOTS).
"""
from __future__ import annotations

import html
import json
import os
import re
import secrets
import shutil
import sys
import time
import urllib.error
import urllib.request

import nbformat
import pytest

from routes import (EXCHANGE_PARENT, HEIGHT, WIDTH, Namespace, add_user, copy_kit, free_port,
                    launch_chromium, menu, open_assignment_list, remove_user, require_root_machine, run_all, save,
                    release_scratch, scratch_folder, stop, submit_from_assignment_list, sync_playwright, type_into_cell, unique_name,
                    wait_for_http, wait_kernel_idle)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ASSIGNMENT = "problem1"
FUNCTIONS = ("shard_average_jit", "shard_average_shard_map", "block_average_jit",
             "block_average_shard_map", "roll_diff")
# The README's commands, run as written (test_readme_shows_these_commands keeps them in step).
MAKE_EXCHANGE = ("sudo install -d -m 1777 /usr/local/share/nbgrader/exchange && "
                 'sudo install -d -m 0755 -o "$(id -un)" /usr/local/share/nbgrader/exchange/scaling-jax')
INSTRUCTOR = (f"nbgrader generate_assignment {ASSIGNMENT} --force", f"nbgrader release_assignment {ASSIGNMENT}",
              f"python -m graders.build handout -a {ASSIGNMENT}")
STUDENT_INSTALL = f"python3 -m venv --upgrade-deps .venv && .venv/bin/pip install ./handout-{ASSIGNMENT}"
STUDENT_LAB = f"cd handout-{ASSIGNMENT} && ../.venv/bin/jupyter lab {ASSIGNMENT}/{ASSIGNMENT}.ipynb"
COLLECT = (f"nbgrader collect {ASSIGNMENT}", f"nbgrader autograde {ASSIGNMENT}",
           f"nbgrader generate_feedback {ASSIGNMENT}", f"nbgrader release_feedback {ASSIGNMENT}")
NOTEBOOK = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
MISTAKE = ("shard_average_shard_map", """def shard_average_shard_map(A, *, mesh):
    def local(block):
        return block.mean(axis=0, keepdims=True)

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X'))(A)""")
WRITTEN = "My answer: each device averages the rows it holds, so no collective is needed."


def answers(repo_root) -> dict[str, str]:
    """What the student types: the solved notebook's answer cells, by grade id."""
    solved = nbformat.read(os.path.join(repo_root, "solutions", ASSIGNMENT, f"{ASSIGNMENT}.ipynb"), as_version=4)
    return {c.metadata.nbgrader["grade_id"]: c.source for c in solved.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}


def sentences(markdown: str) -> list[str]:
    """The sentences of a markdown text, unwrapped: a wrapped line's tail ("result where it was
    computed.") is not a sentence, and a hint may share it with a model answer."""
    blocks = re.split(r"\n\s*\n|\n(?=\s*(?:[-*]|\d+\.)\s)", markdown)
    return [s.strip() for b in blocks for s in re.split(r"(?<=[.!?])\s+(?=[A-Z*`(])", " ".join(b.split()))]


def mark_scheme_lines(repo_root, name=ASSIGNMENT) -> set[str]:
    """Sentences only the instructor may see (eight words or more): the mark schemes and the
    written answers' model answers of the source notebook."""
    nb = nbformat.read(os.path.join(repo_root, "source", name, f"{name}.ipynb"), as_version=4)
    lines = set()
    for cell in nb.cells:
        regions = re.findall(r"### BEGIN MARK SCHEME\n(.*?)### END MARK SCHEME", cell.source, re.S)
        if cell.cell_type == "markdown":
            regions += re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.S)
        lines.update(s for r in regions for s in sentences(r) if len(s.split()) >= 8)
    return lines


def bare(text: str) -> str:
    """Text without markup, emphasis or whitespace, so that rendered HTML and its markdown compare."""
    return re.sub(r"[*`\s]", "", html.unescape(re.sub(r"<[^>]+>", " ", text)))


def leaked(text: str, secret_lines: set[str]) -> list[str]:
    """The secret sentences a page shows."""
    page = bare(text)
    return [line for line in secret_lines if bare(line) in page]


def test_mark_scheme_check_can_fail(repo_root):
    """Does the leak check find a mark-scheme line in a page that shows one (and only then)?"""
    lines = mark_scheme_lines(repo_root)
    assert lines
    sample = sorted(lines)[0]
    assert leaked(f"<p>feedback</p><li><strong>{sample}</strong></li>", lines)
    assert not leaked("<p>feedback: 10 / 12</p>", lines)


def test_readme_shows_these_commands(repo_root):
    """Are the commands this test runs the ones the README gives, character for character?"""
    readme = open(os.path.join(repo_root, "README.md")).read()
    for command in (MAKE_EXCHANGE, *INSTRUCTOR, STUDENT_INSTALL, STUDENT_LAB, *COLLECT):
        assert command in readme, command


@pytest.fixture(scope="module")
def shots(repo_root):
    folder = os.environ.get("SCREENSHOTS") or os.path.join(repo_root, "build", "screenshots")
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):  # this route's pictures; hub/, report/, schedule/ are other tests'
        if name.endswith(".png"):
            os.remove(os.path.join(folder, name))
    print(f"\nscreenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def machine():
    """This machine with a private /usr/local/share, a copy of the kit, and a new student."""
    require_root_machine()
    scratch = scratch_folder("kit-browser-")
    ns = Namespace(scratch)
    student = unique_name("stu")
    try:
        ns.writable_overlay(EXCHANGE_PARENT)
        yield {"ns": ns, "scratch": scratch, "student": student, "kit": copy_kit(os.path.join(scratch, "kit"))}
    finally:
        remove_user(student)
        ns.close()
        release_scratch(scratch)


def as_instructor(machine, command: str):
    """A README command of the instructor's, from the kit's folder with its environment active."""
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    return machine["ns"].shell(command.removeprefix("sudo ").replace("&& sudo ", "&& "), cwd=machine["kit"], env=env)


@pytest.fixture(scope="module")
def lab(machine):
    """The README's route up to the student's JupyterLab: the instructor releases and hands
    out; the student installs the hand-out and starts JupyterLab (loopback, a free port)."""
    ns, student = machine["ns"], machine["student"]
    for command in (MAKE_EXCHANGE, *INSTRUCTOR):
        as_instructor(machine, command)
    home = add_user(student, homes=machine["scratch"])
    zip_path = os.path.join(machine["kit"], "dist", f"handout-{ASSIGNMENT}.zip")
    shutil.copy(zip_path, home)
    shutil.chown(os.path.join(home, os.path.basename(zip_path)), student, student)
    ns.run(["unzip", "-q", os.path.basename(zip_path)], user=student, cwd=home)
    started = time.time()
    ns.shell(STUDENT_INSTALL, user=student, cwd=home)
    versions = "import platform, jax; print(platform.python_version(), jax.__version__)"
    python = ns.run([".venv/bin/python", "-c", versions], user=student, cwd=home).stdout.split()
    print(f"\nstudent {student}: Python {python[0]}, JAX {python[1]}; hand-out installed in "
          f"{time.time() - started:.0f} s")
    port, token = free_port(), secrets.token_hex(16)
    log = os.path.join(machine["scratch"], "lab.log")
    proc = ns.popen(["bash", "-c", f"{STUDENT_LAB} --no-browser --ServerApp.port={port} "
                                   f"--IdentityProvider.token={token}"], log=log, user=student, cwd=home)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{base}/api/status?token={token}", proc, log)
        yield {"base": base, "token": token, "log": log, "home": home, "python": python[0]}
    finally:
        stop(proc)


def http_status(url: str) -> int:
    try:
        return urllib.request.urlopen(url, timeout=10).status
    except urllib.error.HTTPError as e:
        return e.code


# --- what the student sees --------------------------------------------------------------------

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


def type_written_answer(page, text):
    """Double-click the written answer's rendered cell, type, render it again."""
    cell = page.locator(".jp-MarkdownCell", has_text="YOUR ANSWER HERE").first
    cell.evaluate("e => e.scrollIntoView({block: 'center'})")
    cell.dblclick()
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(text)
    page.keyboard.press("Shift+Enter")


def type_answers(page, typed: dict[str, str], only: set[str] | None = None) -> None:
    """Type each answer into the cell where its stub stands (or into the cell holding the
    earlier answer, when it is typed again)."""
    for grade_id, source in typed.items():
        if only is None or grade_id in only:
            name = grade_id.removesuffix("_solution")
            type_into_cell(page, f"def {name}(", source)


def visible_texts(page) -> str:
    return page.evaluate("() => document.body.innerText")


def test_student_route_in_jupyterlab(busy_shared_memory, machine, lab, shots, repo_root):
    """From the README's first command to reading feedback, in a real browser: every step as
    the README tells it, the hand-in holding exactly what the student typed."""
    started = time.time()
    typed = answers(repo_root)
    secret = mark_scheme_lines(repo_root)
    seen = []  # every text the student's pages showed
    with sync_playwright()() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        page.set_default_timeout(60000)
        shot = lambda name: page.screenshot(path=os.path.join(shots, name))  # noqa: E731
        try:
            # The README's command opens the notebook in the hand-out's folder.
            page.goto(f"{lab['base']}/lab/tree/{NOTEBOOK}?token={lab['token']}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90000)
            wait_kernel_idle(page)
            assert page.locator(".lm-TabBar-tab.jp-mod-current", has_text=f"{ASSIGNMENT}.ipynb").count() == 1
            root = json.load(urllib.request.urlopen(f"{lab['base']}/api/contents/?token={lab['token']}"))
            listing = {item["name"] for item in root["content"]}
            assert {ASSIGNMENT, "README.md", "pyproject.toml"} <= listing, listing  # the hand-out's folder
            page.wait_for_timeout(1500)
            # Opened unmodified whatever the student's Python (the hand-out's server serves the
            # kernel's own language_info), and no news question over the first output.
            assert page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty").count() == 0, \
                f"the notebook is marked modified on open (Python {lab['python']})"
            assert page.locator(".jp-toast-button", has_text=re.compile("^No$")).count() == 0, "a news question"
            shot("01-opened.png")

            # The student's panels: the Assignment List, no instructor tools.
            menu(page, "Nbgrader")
            items = page.locator(".lm-Menu-itemLabel").all_inner_texts()
            shot("02-nbgrader-menu.png")
            assert "Assignment List" in items and "Formgrader" not in items, items
            page.keyboard.press("Escape")
            assert http_status(f"{lab['base']}/formgrader?token={lab['token']}") == 404

            # The Assignment List shows problem1 as fetched, here: its link opens this notebook.
            open_assignment_list(page)
            fetched = page.locator("#fetched_assignments_list > .list_item", has_text=ASSIGNMENT)
            assert fetched.count() == 1
            assert page.locator("#released_assignments_list > .list_item", has_text=ASSIGNMENT).count() == 0
            fetched.locator(".assignment-notebooks-link").click()  # unfold its notebooks
            shot("03-assignment-list.png")
            fetched.locator(".assignment-notebooks a", has_text=re.compile(f"^{ASSIGNMENT}$")).click()
            page.wait_for_timeout(1500)
            assert page.locator(".jp-Dialog", has_text=re.compile("not found|Cannot open", re.I)).count() == 0
            assert page.locator(".lm-TabBar-tab.jp-mod-current", has_text=f"{ASSIGNMENT}.ipynb").count() == 1

            # Submit of the untouched notebook: refused, saying why and what to do.
            open_assignment_list(page)
            refusal = submit_from_assignment_list(page, ASSIGNMENT, on_refusal=lambda: shot("04-submit-unchanged.png"))
            refusal = " ".join((refusal or "").split())
            assert "Nothing was handed in" in refusal and "press Submit again" in refusal, refusal
            assert not os.listdir(machine["ns"].path("/usr/local/share/nbgrader/exchange/scaling-jax/inbound"))
            page.locator(".lm-TabBar-tab", has_text=f"{ASSIGNMENT}.ipynb").first.click()

            # Run All on the release: every check fails, the run goes to the end.
            run_all(page)
            for name in FUNCTIONS:
                assert page.locator(".jp-OutputArea-output", has_text=f"visible check: {name} failed").count() == 1
            assert page.locator(".jp-OutputArea-output", has_text="CheckFailed").count() == len(FUNCTIONS)
            assert page.locator(".jp-OutputArea-output", has_text="collective-permute").count() >= 1, \
                "Run All stopped before the last cells"
            assert page.locator("text=<visible check of").count() == 0
            assert outputs_fit(page) == []
            show_cell(page, "check(shard_average_jit)")
            shot("05-release-light.png")
            assert contrast(page, "failed") >= 3.0
            seen.append(visible_texts(page))

            verdict = validate(page)
            shot("06-release-validate.png")
            assert "Success" not in verdict and "failed" in verdict
            for name in FUNCTIONS:
                assert name in verdict, (name, verdict)
            close_dialog(page)

            set_theme(page, "JupyterLab Dark")
            show_cell(page, "check(shard_average_jit)")
            shot("07-release-dark.png")
            assert contrast(page, "failed") >= 3.0
            assert outputs_fit(page) == []
            show_cell(page, "show_mesh(mesh)")
            shot("08-mesh-and-report-dark.png")

            # The student types the answers, one of them wrong.
            type_answers(page, {**typed, MISTAKE[0] + "_solution": MISTAKE[1]})
            type_written_answer(page, WRITTEN)
            save(page)
            run_all(page)
            panel = page.locator(".jp-OutputArea-output", has_text="visible check: shard_average_shard_map failed")
            message = panel.first.text_content()
            assert "out_specs is P('X',)" in message and "check_vma=False" in message, message
            assert re.search(r"Cell In\[\d+\], line \d+", message) and "site-packages" not in message
            show_cell(page, "check(shard_average_shard_map)")
            shot("09-mistake-dark.png")
            assert outputs_fit(page) == []
            verdict = validate(page)
            shot("10-mistake-validate.png")
            assert "shard_average_shard_map" in verdict and "roll_diff" not in verdict, verdict
            close_dialog(page)

            # The mistake fixed: every check passes on both meshes; Validate passes.
            type_answers(page, typed, only={MISTAKE[0] + "_solution"})
            save(page)
            run_all(page)
            for name in FUNCTIONS:
                assert page.locator(".jp-OutputArea-output", has_text=f"visible check: {name} passed").count() == 1
            assert page.locator(".jp-OutputArea-output", has_text="CheckFailed").count() == 0
            show_cell(page, "check(roll_diff)")
            shot("11-solution-dark.png")
            assert contrast(page, "passed") >= 3.0
            set_theme(page, "JupyterLab Light")
            shot("12-solution-light.png")
            assert contrast(page, "passed") >= 3.0
            seen.append(visible_texts(page))
            verdict = validate(page)
            shot("13-solution-validate.png")
            assert "Success! Your notebook passes all the tests." in verdict, verdict
            close_dialog(page)
            save(page)

            # Submit hands in the notebook the student worked in.
            open_assignment_list(page)
            assert submit_from_assignment_list(page, ASSIGNMENT) is None
            shot("14-submitted.png")

            # The instructor collects, autogrades, releases feedback (the README's commands).
            for command in COLLECT:
                as_instructor(machine, command)
            collected = nbformat.read(os.path.join(machine["kit"], "submitted", machine["student"], NOTEBOOK),
                                      as_version=4)
            by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in collected.cells}
            for grade_id, source in typed.items():
                assert by_id[grade_id] == source, (grade_id, by_id[grade_id])
            assert by_id["written_communication"] == WRITTEN

            # The student fetches the feedback and opens it.
            open_assignment_list(page)
            page.locator("#submitted_assignments_list button", has_text="Fetch Feedback").first.click()
            link = page.locator("#submitted_assignments_list a", has_text="view feedback")
            link.wait_for(timeout=60000)
            shot("15-feedback-fetched.png")
            link.first.click()
            page.locator(".jp-DirListing-itemText", has_text=f"{ASSIGNMENT}.html").wait_for(timeout=30000)
            crumbs = page.locator(".jp-BreadCrumbs").inner_text()
            assert "feedback" in crumbs, crumbs
            shot("16-feedback-folder.png")
            page.locator(".jp-DirListing-itemText", has_text=f"{ASSIGNMENT}.html").dblclick()
            frame = page.frame_locator("iframe").first
            frame.locator("body").wait_for(timeout=30000)
            page.wait_for_timeout(1500)
            shot("17-feedback-open.png")
            feedback_text = frame.locator("body").inner_text()
            assert "shard_average_jit" in feedback_text and "Score" in feedback_text, feedback_text[:500]
            seen.append(feedback_text)
        finally:
            shot("99-last.png")
            browser.close()
    pages = [open(f).read() for f in _feedback_files(machine, lab)]
    assert len(pages) == 1
    assert "HIDDEN TESTS" not in pages[0] and "BEGIN MARK SCHEME" not in pages[0]
    for text in [*pages, *seen]:
        assert not leaked(text, secret), leaked(text, secret)[:3]
    print(f"student route in the browser took {time.time() - started:.0f} s")


def _feedback_files(machine, lab):
    folder = os.path.join(lab["home"], f"handout-{ASSIGNMENT}", ASSIGNMENT, "feedback")
    return [os.path.join(d, f) for d, _, files in os.walk(folder) for f in files
            if f == f"{ASSIGNMENT}.html" and ".ipynb_checkpoints" not in d]
