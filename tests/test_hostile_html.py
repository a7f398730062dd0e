"""A student's HTML never runs where the instructor or a classmate looks, in a real browser.

A student hands in problem1 (tests/submissions/problem1/comm_gather_roll.py: right values,
but roll_diff gathers, so the graders draw what it sends) with a written answer holding
markdown and hostile HTML: `<img onerror>`, `<script>`, `<svg onload>`, `<iframe srcdoc>` and
a `javascript:` link, each of which, if it ran, would fetch a loopback listener the test starts
and set `window.__pwned`, and a picture the listener would serve. After one `nbgrader
autograde` and `generate_feedback` with the course's own nbgrader_config.py, headless Chromium
opens
- the feedback page, as a file and served over http;
- formgrader's submission page, in the instructor's `jupyter server` (root, loopback, a token)
  started in the course folder,
and finds that nothing ran and nothing was fetched, while the answer's text, bold and list,
the graders' messages and the kit's picture in the grade cells show. The pages' content
security policies hold on their own too: a script the test inserts into each page (as a
sanitizer's miss would) does not run. On formgrader's page, formgrader's own scripts still
work (its score boxes fill in; "Full credit" saves a grade). A control page (the same answer,
unsanitized) proves the listener and the global see every vector that does run.
Screenshots go to build/screenshots/hostile/ (or $SCREENSHOTS/hostile/).
The same checks without a browser or a grading: tests/unit/test_hostile_html_unit.py.
"""
from __future__ import annotations

import contextlib
import functools
import http.server
import os
import secrets
import subprocess
import sys
import threading
import time

import nbformat
import pytest

from graders.build import nbgrader
from graders.demo import prepare_course
from graders.samples import notebook_from
from routes import free_port, launch_chromium, stop, sync_playwright, wait_for_http

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.nbgrader]

ASSIGNMENT = "problem1"
STUDENT = "mallory"
WRITTEN = "written_communication"
ANSWER = "My answer: each device averages the rows it holds, so **no collective** is needed."
VECTORS = ("img", "script", "svg", "iframe", "link", "pixel")
SUBMISSION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "submissions", ASSIGNMENT, "comm_gather_roll.py")
SOLUTION = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "solutions", f"{ASSIGNMENT}.py")


def hostile_answer(listener: str) -> str:
    """The written answer: markdown, then one payload per vector, and a picture from the
    listener (a request without a script). Each payload fetches the listener first (a frame
    of another origin could not set the page's global), then sets the global (and ends in
    `void(0)`: a `javascript:` link whose value is a string replaces the page)."""
    def run(vector, where="window"):
        return f"fetch('{listener}/{vector}');{where}.__pwned='{vector}';void(0)"

    return (f"{ANSWER}\n\n- first, the rows stay where they are\n- then each device sums its own block\n\n"
            f"<img src=x onerror=\"{run('img')}\">\n\n"
            f"<script>{run('script')}</script>\n\n"
            f"<svg onload=\"{run('svg')}\"></svg>\n\n"
            f"<iframe srcdoc=\"<script>{run('iframe', 'parent')}</script>\"></iframe>\n\n"
            f"[click here](javascript:{run('link')})\n\n"
            f"<img src=\"{listener}/pixel\" alt=\"a picture from elsewhere\">\n")


class Listener(http.server.ThreadingHTTPServer):
    """A loopback HTTP server that records every request it gets (and answers each)."""

    def __init__(self, port: int):
        self.hits: list[str] = []

        class Record(http.server.BaseHTTPRequestHandler):
            def _answer(handler):
                self.hits.append(handler.path)
                handler.send_response(204)
                handler.send_header("Access-Control-Allow-Origin", "*")
                handler.end_headers()

            do_GET = do_POST = do_OPTIONS = _answer

            def log_message(handler, *args):
                pass

        super().__init__(("127.0.0.1", port), Record)


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serving(server: http.server.HTTPServer):
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def listener():
    with serving(Listener(free_port())) as server:
        yield server


@pytest.fixture(scope="module")
def course(tmp_path_factory, listener):
    """One course, one hostile submission, autograded and with its feedback."""
    started = time.time()
    course = str(tmp_path_factory.mktemp("hostile-course"))
    prepare_course(ASSIGNMENT, course)
    release = os.path.join(course, "release", ASSIGNMENT, f"{ASSIGNMENT}.ipynb")
    with open(SOLUTION) as solution, open(SUBMISSION) as f:  # the corpus file's roll_diff over the solution
        nb = notebook_from(release, solution.read() + f.read())
    answer = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == WRITTEN)
    answer.source = hostile_answer(f"http://127.0.0.1:{listener.server_port}")
    folder = os.path.join(course, "submitted", STUDENT, ASSIGNMENT)
    os.makedirs(folder)
    nbformat.write(nb, os.path.join(folder, f"{ASSIGNMENT}.ipynb"))
    nbgrader(["autograde", ASSIGNMENT], cwd=course)
    nbgrader(["generate_feedback", ASSIGNMENT], cwd=course)
    print(f"course made, autograded and its feedback written in {time.time() - started:.0f} s")
    return course


@pytest.fixture(scope="module")
def shots(repo_root):
    folder = os.path.join(os.environ.get("SCREENSHOTS") or os.path.join(repo_root, "build", "screenshots"), "hostile")
    os.makedirs(folder, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser():
    with sync_playwright()() as p:
        chromium = launch_chromium(p)
        yield chromium
        chromium.close()


WATCH = """
window.__violations = [];
document.addEventListener('securitypolicyviolation',
    e => window.__violations.push(e.effectiveDirective + ' ' + (e.blockedURI || 'inline')));
"""
"""Injected by the browser before the page's own scripts (the policy does not apply to it): the
content security policy's refusals, for the record."""


def open_page(browser, url: str):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.add_init_script(WATCH)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url, wait_until="load")
    return page, errors


def ran(page, listener, wait: float = 1.5) -> tuple[object, list[str]]:
    """Click the answer's link (the one vector that needs a click), let anything that would run
    run, and say what did: the global, and what the listener got."""
    with contextlib.suppress(Exception):  # no such link left is fine
        page.get_by_text("click here").first.click(timeout=2000)
    time.sleep(wait)
    return page.evaluate("() => window.__pwned"), list(listener.hits)


def csp_holds(page, listener) -> dict:
    """Insert, from the page's own context, what a sanitizer's miss would leave: an inline
    script, an inline event handler and a fetch. Which of them ran?"""
    url = f"http://127.0.0.1:{listener.server_port}/probe"
    return page.evaluate("""async (url) => {
        const s = document.createElement('script');
        s.textContent = 'window.__probe_script = true';
        document.body.appendChild(s);
        const img = document.createElement('img');
        img.setAttribute('onerror', 'window.__probe_handler = true');
        img.setAttribute('src', 'data:,broken');
        document.body.appendChild(img);
        let fetched = false;
        try { await fetch(url); fetched = true; } catch (e) {}
        await new Promise(r => setTimeout(r, 300));
        return {script: !!window.__probe_script, handler: !!window.__probe_handler, fetched};
    }""", url)


def shows_the_answer_and_the_kits_tables(page, answer_box: str) -> None:
    """The written answer's text, bold and list, the graders' messages and the kit's picture."""
    box = page.locator(answer_box).filter(has_text="My answer: each device averages")
    assert box.count() == 1
    assert box.locator("strong", has_text="no collective").is_visible()
    assert box.locator("li").all_inner_texts() == ["first, the rows stay where they are",
                                                   "then each device sums its own block"]
    picture = page.locator("svg.kit-schedule").first
    assert picture.is_visible() and picture.bounding_box()["width"] > 300
    assert picture.locator("rect").count() > 10 and picture.locator("title").count() > 0
    assert page.locator("pre", has_text="roll_diff: 1/2 points").first.is_visible()


def test_a_control_page_runs_every_vector(browser, listener, course, shots):
    """Does each vector run in this Chromium when nothing stops it (the same answer through
    nbconvert's markdown, unsanitized, served over http)? Otherwise the checks below prove
    nothing."""
    from nbconvert.filters.markdown import markdown2html

    control = os.path.join(course, "control")
    os.makedirs(control, exist_ok=True)
    answer = markdown2html(hostile_answer(f"http://127.0.0.1:{listener.server_port}"))
    with open(os.path.join(control, "index.html"), "w") as f:
        f.write(f"<!DOCTYPE html><html><body>{answer}</body></html>")
    listener.hits.clear()
    handler = functools.partial(Quiet, directory=control)
    with serving(http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)) as pages:
        page, _ = open_page(browser, f"http://127.0.0.1:{pages.server_port}/index.html")
        deadline = time.time() + 10
        while time.time() < deadline and {h.strip("/") for h in listener.hits} < set(VECTORS) - {"link"}:
            time.sleep(0.2)
        pwned, hits = ran(page, listener)
        page.close()
    assert pwned is not None
    assert {h.strip("/") for h in hits} == set(VECTORS), hits


@pytest.mark.parametrize("where", ["file", "http"])
def test_the_feedback_page_runs_nothing_and_still_reads_well(browser, listener, course, shots, where):
    """The student's feedback page, opened as a file and served over http: did no script run
    and nothing reach the listener, does the policy stop a script inserted later, and do the
    answer, its markdown and the kit's grade cells show?"""
    folder = os.path.join(course, "feedback", STUDENT, ASSIGNMENT)
    listener.hits.clear()
    with contextlib.ExitStack() as stack:
        if where == "file":
            url = f"file://{folder}/{ASSIGNMENT}.html"
        else:
            handler = functools.partial(Quiet, directory=folder)
            pages = stack.enter_context(serving(http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)))
            url = f"http://127.0.0.1:{pages.server_port}/{ASSIGNMENT}.html"
        page, errors = open_page(browser, url)
        pwned, hits = ran(page, listener)
        assert (pwned, hits, errors) == (None, [], [])
        shows_the_answer_and_the_kits_tables(page, ".kit-graded")
        assert page.locator(".kit-graded", has_text="Your written answer").locator(".kit-pending").is_visible()
        page.locator(".kit-graded", has_text="Your written answer").scroll_into_view_if_needed()
        page.screenshot(path=os.path.join(shots, f"feedback-{where}-answer.png"))
        page.locator("svg.kit-schedule").first.scroll_into_view_if_needed()
        page.screenshot(path=os.path.join(shots, f"feedback-{where}-grade-cell.png"))
        assert csp_holds(page, listener) == {"script": False, "handler": False, "fetched": False}
        assert listener.hits == []
        print(f"feedback over {where}: the policy refused", page.evaluate("() => window.__violations"))
        page.close()


@pytest.fixture(scope="module")
def formgrader(course, tmp_path_factory):
    """The instructor's Jupyter server (root, loopback, a token) in the course folder, with
    nbgrader's formgrader; yields its address, token and the hostile submission's id."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        submission = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, STUDENT).id
    runtime = str(tmp_path_factory.mktemp("jupyter-runtime"))
    port, token = free_port(), secrets.token_hex(16)
    log = os.path.join(runtime, "server.log")
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
           "JUPYTER_RUNTIME_DIR": runtime, "JUPYTER_CONFIG_DIR": os.path.join(runtime, "config")}
    server = os.path.join(os.path.dirname(sys.executable), "jupyter-server")
    with open(log, "w") as out:
        proc = subprocess.Popen([server, "--allow-root", "--no-browser", "--ServerApp.ip=127.0.0.1",
                                 f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
                                 f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={course}"],
                                cwd=course, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for_http(f"{base}/api/status?token={token}", proc, log)
        yield {"base": base, "token": token, "submission": submission, "log": log}
    finally:
        stop(proc)


def test_formgraders_page_runs_only_formgraders_scripts(browser, listener, course, formgrader, shots):
    """formgrader's submission page in the instructor's logged-in session: did nothing of the
    answer run or reach the listener, does the policy stop a script inserted later, does the
    page show the answer and the grade cells, and do formgrader's own scripts work (its score
    boxes fill in from its API; "Full credit" on the written answer saves the grade)?"""
    from nbgrader.api import Gradebook

    base, token = formgrader["base"], formgrader["token"]
    listener.hits.clear()
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_init_script(WATCH)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{base}/tree?token={token}")  # logs in as the instructor does (and sets the _xsrf cookie)
    page.goto(f"{base}/formgrader/submissions/{formgrader['submission']}/", wait_until="load")
    page.wait_for_function("() => document.querySelector('input#shard_average_jit').placeholder !== ''",
                           timeout=30000)
    page.wait_for_function("() => window.formgrader && formgrader.loaded", timeout=10000)  # its init ran through
    pwned, hits = ran(page, listener)
    assert (pwned, hits, errors) == (None, [], [])
    assert page.evaluate("() => window.__violations") == []  # formgrader's own page needs nothing refused
    shows_the_answer_and_the_kits_tables(page, ".nbgrader_cell")
    written = page.locator(".nbgrader_cell", has_text="My answer: each device averages")
    written.scroll_into_view_if_needed()
    page.screenshot(path=os.path.join(shots, "formgrade-answer.png"))
    page.locator("svg.kit-schedule").first.scroll_into_view_if_needed()
    page.screenshot(path=os.path.join(shots, "formgrade-grade-cell.png"))

    written.locator("button.full-credit").click()
    page.wait_for_function(f"() => document.querySelector('input#{WRITTEN}').value === '2'", timeout=10000)
    deadline = time.time() + 10
    while True:
        with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
            grade = gb.find_grade(WRITTEN, ASSIGNMENT, ASSIGNMENT, STUDENT).manual_score
        if grade == 2 or time.time() > deadline:
            break
        time.sleep(0.3)
    assert grade == 2, "formgrader's Full credit did not save the grade"

    assert csp_holds(page, listener) == {"script": False, "handler": False, "fetched": False}
    assert listener.hits == []
    print("formgrader: the policy refused", page.evaluate("() => window.__violations"))
    context.close()
