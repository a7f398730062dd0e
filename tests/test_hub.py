"""A course on a real JupyterHub, end to end in a browser: the README's "A course on JupyterHub".

On this machine, as the README sets it up: the kit's environment installed from its own files
where every user can read it, with JupyterHub (hub/requirements.txt); local users in the
course's Unix groups, with passwords; the instructor's course folder, a copy of the kit, in a
private home; nbgrader's default exchange, made with the README's line; the hub started with
hub/jupyterhub_config.py on loopback (free ports), configurable-http-proxy from npm.
Then, in Chromium, with real logins:
- the instructor generates and releases problem1 from formgrader (its own tab);
- two students fetch it from the Assignment List, open it from there, type their answers into
  the cells they see (one the solution, one a typical first attempt) and submit;
- the instructor collects, autogrades (the graders' sandbox, as the instructor's own user),
  generates and releases feedback from formgrader; the scores are those `python -m graders`
  gives the collected notebooks (run from the hub's command line as the instructor);
- each student fetches and reads their own feedback, and cannot reach the other's work, the
  instructor's files, the solutions or the hidden graders.
Screenshots in build/screenshots/hub/. Skipped, saying why, without root, the proxy
(.ci/hub-packages), Chromium or Playwright.
"""
from __future__ import annotations

import ast
import json
import os
import re
import secrets
import shutil
import subprocess
import time

import nbformat
import pytest

from routes import (EXCHANGE_PARENT, HEIGHT, WIDTH, Namespace, add_group, add_user, copy_kit,
                    free_port, launch_chromium, menu, open_assignment_list, remove_group, remove_user,
                    let_users_run_stack_python, require_root_machine, release_scratch, save, scratch_folder, stack_python, stop,
                    submit_from_assignment_list, sync_playwright, type_into_cell, unique_name, wait_for_http,
                    wait_kernel_idle)
from test_browser import answers, leaked, mark_scheme_lines

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.hub]

ASSIGNMENT = "problem1"
NOTEBOOK = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
# The README's commands (test_readme_shows_the_hub_commands keeps them in step), with /opt/scaling-jax,
# /srv/scaling-jax and the groups standing for this test's own folders and names.
INSTALL = ("sudo python3 -m venv --upgrade-deps /opt/scaling-jax && "
           "sudo /opt/scaling-jax/bin/pip install /srv/scaling-jax -r /srv/scaling-jax/hub/requirements.txt")
MAKE_EXCHANGE = ("sudo install -d -m 1777 /usr/local/share/nbgrader/exchange && "
                 "sudo install -d -m 0755 -o teacher /usr/local/share/nbgrader/exchange/scaling-jax")
COPY = "sudo install -d -m 700 /srv/scaling-jax && git archive HEAD | sudo tar -x -C /srv/scaling-jax"
"""The README's copy of the kit for root: this test makes the same copy of the working tree (`copy_kit`)."""
START = ("sudo /opt/scaling-jax/bin/jupyterhub -f /srv/scaling-jax/hub/jupyterhub_config.py")
GRADE_ON_HUB = f"python -m graders submitted/STUDENT/{NOTEBOOK} --assignment {ASSIGNMENT} -o results.json"


def test_readme_shows_the_hub_commands(repo_root):
    """Are the commands this test runs the ones the README's hub section gives?"""
    readme = open(os.path.join(repo_root, "README.md")).read()
    for command in (COPY, MAKE_EXCHANGE, INSTALL, START, ".ci/hub-packages", "chmod 700",
                    "/user/<instructor>/formgrader"):
        assert command in readme, command


def require_proxy() -> None:
    if not shutil.which("configurable-http-proxy"):
        pytest.skip("JupyterHub's proxy is not installed: run .ci/hub-packages (npm install -g "
                    "configurable-http-proxy, on Debian's nodejs)")


@pytest.fixture(scope="module")
def shots(repo_root):
    folder = os.path.join(os.environ.get("SCREENSHOTS") or os.path.join(repo_root, "build", "screenshots"), "hub")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    return folder


@pytest.fixture(scope="module")
def hub(shots):
    """The README's hub on loopback: environment, users, course, exchange, JupyterHub."""
    require_root_machine()
    require_proxy()
    sync_playwright()
    started = time.time()
    scratch = scratch_folder("kit-hub-")
    ns = Namespace(scratch)
    tag = secrets.token_hex(2)
    groups = {"instructors": f"kit{tag}ins", "students": f"kit{tag}stu"}
    people = {"instructor": unique_name("i"), "alice": unique_name("a"), "bob": unique_name("b")}
    passwords = {name: secrets.token_urlsafe(12) for name in people.values()}
    proc = None
    try:
        srv, opt = os.path.join(scratch, "srv-scaling-jax"), os.path.join(scratch, "opt-scaling-jax")
        copy_kit(srv)
        os.chmod(srv, 0o700)  # root's copy holds the graders
        python = stack_python()
        # As root, outside the namespace (root's pip cache helps a second run).
        built = subprocess.run(["bash", "-c", INSTALL.replace("sudo ", "").replace("python3", python)
                                .replace("/opt/scaling-jax", opt).replace("/srv/scaling-jax", srv)],
                               capture_output=True, text=True, timeout=900)
        assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-3000:]
        print(f"\nhub environment ({python}) installed in {time.time() - started:.0f} s")
        ns.writable_overlay(EXCHANGE_PARENT)
        let_users_run_stack_python(ns)
        for group in groups.values():
            add_group(group)
        homes = {}
        for role, name in people.items():
            group = groups["instructors"] if role == "instructor" else groups["students"]
            homes[name] = add_user(name, passwords[name], groups=(group,), homes=scratch)
            if role != "instructor":  # the README's `useradd -c "Alice Liddell"`
                subprocess.run(["chfn", "--full-name", f"{role.title()} Liddell", name], check=True, capture_output=True)
        course = copy_kit(os.path.join(homes[people["instructor"]], "scaling-jax"))
        subprocess.run(["chown", "-R", f"{people['instructor']}:", course], check=True)
        port, hub_port, api_port = free_port(), free_port(), free_port()
        state = os.path.join(scratch, "hub")
        os.makedirs(state, mode=0o700)
        log = os.path.join(scratch, "hub.log")
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
               "SCALING_JAX_INSTRUCTORS": groups["instructors"], "SCALING_JAX_STUDENTS": groups["students"]}
        start = [os.path.join(opt, "bin", "jupyterhub"), "-f", os.path.join(srv, "hub", "jupyterhub_config.py"),
                 "--ip=127.0.0.1", f"--port={port}", f"--JupyterHub.hub_port={hub_port}",
                 f"--ConfigurableHTTPProxy.api_url=http://127.0.0.1:{api_port}"]
        # An exchange made as nbgrader makes it (0777): the hub does not start, and says why.
        ns.shell("mkdir -p /usr/local/share/nbgrader/exchange && chmod 0777 /usr/local/share/nbgrader/exchange")
        refused = ns.run(start, cwd=state, env=env, check=False, timeout=120)
        assert refused.returncode != 0, refused.stdout[-2000:] + refused.stderr[-2000:]
        assert "The course hub did not start" in refused.stderr and "sudo chmod 1777" in refused.stderr, refused.stderr
        ns.shell(MAKE_EXCHANGE.replace("sudo ", "").replace("teacher", people["instructor"]))
        proc = ns.popen(start, log=log, cwd=state, env=env)
        base = f"http://127.0.0.1:{port}"
        wait_for_http(f"{base}/hub/login", proc, log)
        print(f"hub up {time.time() - started:.0f} s after the start of set-up")
        yield {"ns": ns, "base": base, "log": log, "people": people, "passwords": passwords, "homes": homes,
               "course": course, "env": opt, "srv": srv}
    finally:
        times = [time.time()]
        if proc is not None:
            stop(proc, timeout=60)
            shutil.copy(log, os.path.join(shots, "hub.log"))
        times.append(time.time())
        for name in people.values():
            remove_user(name)
        for group in groups.values():
            remove_group(group)
        times.append(time.time())
        ns.close()
        release_scratch(scratch)
        times.append(time.time())
        print("hub stopped in {:.0f} s, users removed in {:.0f} s, folders in {:.0f} s".format(
            *(b - a for a, b in zip(times, times[1:]))))


# --- pages --------------------------------------------------------------------------------------

def log_in(browser, hub, name):
    """A browser context of its own, logged in as `name`, with their JupyterLab started."""
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = context.new_page()
    page.set_default_timeout(60000)
    page.goto(f"{hub['base']}/hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", hub["passwords"][name])
    page.click("#login_submit")
    page.wait_for_selector(".jp-LabShell", timeout=180000)
    return page


def formgrader_action(page, assignment, column, expect="Success"):
    """Click a formgrader button in `assignment`'s row (Manage Assignments) and close the result."""
    row = page.locator("tr", has=page.locator("td.name", has_text=re.compile(f"^{assignment}$")))
    row.locator(f"td.{column} a").click()
    modal = page.locator(".modal-dialog")
    modal.wait_for(timeout=600000)
    text = modal.inner_text()
    assert expect in text, text[-2000:]
    modal.locator(".modal-footer button").click()
    modal.wait_for(state="detached")
    page.wait_for_timeout(500)
    return text


def open_formgrader(page, hub, path="manage_assignments", ready="td.name"):
    page.goto(f"{hub['base']}/user/{hub['people']['instructor']}/formgrader/{path}")
    page.wait_for_selector(ready, timeout=60000)
    page.wait_for_timeout(1000)


def mistakes_typed(repo_root) -> dict[str, str]:
    """A typical first attempt (graders/samples), each function as a student types it."""
    text = open(os.path.join(repo_root, "graders", "samples", f"{ASSIGNMENT}_mistakes.py")).read()
    return {f"{node.name}_solution": ast.get_source_segment(text, node)
            for node in ast.parse(text).body if isinstance(node, ast.FunctionDef)}


def student_works(page, typed, shot):
    """Fetch from the Assignment List, open the notebook from there, type, save, submit."""
    open_assignment_list(page)
    page.locator("#released_assignments_list > .list_item", has_text=ASSIGNMENT) \
        .get_by_role("button", name="Fetch", exact=True).click()
    fetched = page.locator("#fetched_assignments_list > .list_item", has_text=ASSIGNMENT)
    fetched.wait_for(timeout=60000)
    fetched.locator(".assignment-notebooks-link").click()
    shot("fetched")
    fetched.locator(".assignment-notebooks a", has_text=re.compile(f"^{ASSIGNMENT}$")).click()
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
    wait_kernel_idle(page)
    for grade_id, source in typed.items():
        type_into_cell(page, f"def {grade_id.removesuffix('_solution')}(", source)
    save(page)
    shot("typed")
    open_assignment_list(page)
    assert submit_from_assignment_list(page, ASSIGNMENT) is None
    shot("submitted")


def read_feedback(page, shot) -> str:
    open_assignment_list(page)
    page.locator("#submitted_assignments_list button", has_text="Fetch Feedback").first.click()
    link = page.locator("#submitted_assignments_list a", has_text="view feedback")
    link.wait_for(timeout=60000)
    link.first.click()
    page.locator(".jp-DirListing-itemText", has_text=f"{ASSIGNMENT}.html").dblclick()
    frame = page.frame_locator("iframe").first
    frame.locator("body").wait_for(timeout=30000)
    page.wait_for_timeout(1500)
    shot("feedback")
    return frame.locator("body").inner_text()


# --- what users may reach -----------------------------------------------------------------------

def can_read(hub, user, path) -> bool:
    """Can `user` list the folder, or read the file, at `path` (which exists)?"""
    assert os.path.exists(hub["ns"].path(path)), path
    script = f"if [ -d {path} ]; then ls {path}; else head -c1 {path}; fi"
    return hub["ns"].run(["bash", "-c", script], user=user, check=False).returncode == 0


def graded_as_instructor(hub, student) -> tuple[dict, str]:
    """`python -m graders` on the collected notebook, run on the hub as the instructor: its
    results.json and the isolation its report names."""
    out = f"results-{student}.json"
    command = GRADE_ON_HUB.replace("STUDENT", student).replace("results.json", out)
    report = hub["ns"].shell(f"export PATH={hub['env']}/bin:$PATH && cd scaling-jax && {command}",
                             user=hub["people"]["instructor"], timeout=900).stdout
    isolation = next((line for line in report.splitlines() if line.startswith("isolation: ")), "")
    with open(os.path.join(hub["course"], out)) as f:
        return json.load(f), isolation


def gradebook_scores(hub, student) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{hub['course']}/gradebook.db") as gb:
        notebook = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student)
        return {grade.name: grade.score for grade in notebook.grades if grade.auto_score is not None}


def test_course_on_jupyterhub(busy_shared_memory, hub, shots, repo_root):
    """Instructor and two students on one hub, with real logins, real users and the real
    exchange: release, fetch, type, submit, collect, autograde, feedback; each student sees
    only their own work, and the scores are those of `python -m graders`."""
    started = time.time()
    people, ns = hub["people"], hub["ns"]
    typed = {"alice": answers(repo_root), "bob": mistakes_typed(repo_root)}
    secret = mark_scheme_lines(repo_root)
    with sync_playwright()() as p:
        browser = launch_chromium(p)
        pages = {}
        try:
            # The instructor: Nbgrader menu with Formgrader; formgrader in its own tab.
            teacher = pages["instructor"] = log_in(browser, hub, people["instructor"])
            shot = lambda page, name: page.screenshot(path=os.path.join(shots, name + ".png"))  # noqa: E731
            shot(teacher, "01-instructor-lab")
            assert teacher.locator(".jp-toast-button", has_text=re.compile("^No$")).count() == 0, "a news question"
            menu(teacher, "Nbgrader")  # no Formgrader entry: its panel would stay blank on a hub
            entries = teacher.locator(".lm-Menu .lm-Menu-itemLabel").all_inner_texts()
            teacher.keyboard.press("Escape")
            assert "Assignment List" in entries and not any("Formgrader" in e for e in entries), entries
            open_formgrader(teacher, hub)
            shot(teacher, "02-formgrader")
            formgrader_action(teacher, ASSIGNMENT, "assign")
            formgrader_action(teacher, ASSIGNMENT, "release")
            shot(teacher, "03-released")
            assert os.path.exists(ns.path(f"/usr/local/share/nbgrader/exchange/scaling-jax/outbound/{NOTEBOOK}"))

            # Two students: fetch, type, submit.
            for student in ("alice", "bob"):
                page = pages[student] = log_in(browser, hub, people[student])
                menu_items = page.evaluate("() => [...document.querySelectorAll('.lm-MenuBar-itemLabel')]"
                                           ".map(e => e.textContent)")
                assert "Nbgrader" in menu_items
                student_works(page, typed[student], lambda name, page=page, s=student: shot(page, f"04-{s}-{name}"))

            # The instructor: collect, autograde each, feedback.
            open_formgrader(teacher, hub)
            formgrader_action(teacher, ASSIGNMENT, "collect")
            open_formgrader(teacher, hub, f"manage_submissions/{ASSIGNMENT}", ready="td.autograde a")
            for student in ("alice", "bob"):
                row = teacher.locator("tr", has_text=people[student])
                row.locator("td.autograde a").click()
                modal = teacher.locator(".modal-dialog")
                modal.wait_for(timeout=600000)
                assert "Successfully autograded" in modal.inner_text(), modal.inner_text()[-3000:]
                modal.locator(".modal-footer button").click()
                modal.wait_for(state="detached")
            shot(teacher, "05-autograded")
            open_formgrader(teacher, hub)
            formgrader_action(teacher, ASSIGNMENT, "generate-feedback")
            formgrader_action(teacher, ASSIGNMENT, "release-feedback")
            shot(teacher, "06-feedback-released")

            # Each student reads their own feedback.
            feedback = {}
            for student in ("alice", "bob"):
                page = pages[student]
                feedback[student] = read_feedback(page, lambda name, page=page, s=student: shot(page, f"07-{s}-{name}"))
            # A student's browser cannot reach another user's server.
            pages["alice"].goto(f"{hub['base']}/user/{people['bob']}/lab")
            pages["alice"].wait_for_timeout(2000)
            shot(pages["alice"], "08-alice-at-bobs-url")
            assert "403" in pages["alice"].title() + pages["alice"].inner_text("body")
            assert pages["alice"].locator(".jp-LabShell").count() == 0
        finally:
            for role, page in pages.items():
                page.screenshot(path=os.path.join(shots, f"99-{role}-last.png"))
            browser.close()

    # What each student typed is what was collected.
    for student in ("alice", "bob"):
        collected = nbformat.read(os.path.join(hub["course"], "submitted", people[student], NOTEBOOK), as_version=4)
        sources = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in collected.cells}
        assert all(sources[g] == s for g, s in typed[student].items()), student

    # The same scores as `python -m graders` on the hub's command line, in the same sandbox.
    for student in ("alice", "bob"):
        results, isolation = graded_as_instructor(hub, people[student])
        assert isolation.startswith("isolation: bubblewrap:"), isolation
        print(isolation)
        by_function = {t["name"]: t["score"] for t in results["tests"]}
        gradebook = gradebook_scores(hub, people[student])
        assert {k: gradebook[k] for k in by_function} == by_function, (student, gradebook, by_function)
        print(f"{student}: {sum(by_function.values())} / 10 code points, formgrader and command line agree")
    assert sum(gradebook_scores(hub, people["alice"]).values()) == 10
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{hub['course']}/gradebook.db") as gb:  # formgrader names them, not "None, None"
        assert [(gb.find_student(people[s]).first_name, gb.find_student(people[s]).last_name)
                for s in ("alice", "bob")] == [("Alice", "Liddell"), ("Bob", "Liddell")]
    assert sum(gradebook_scores(hub, people["bob"]).values()) < 10

    # Each student's feedback is their own, with no mark scheme.
    for student, other in (("alice", "bob"), ("bob", "alice")):
        assert not leaked(feedback[student], secret)
        mine = sum(gradebook_scores(hub, people[student]).values())
        assert f"{mine:g}" in feedback[student] or f"{mine}" in feedback[student], feedback[student][:300]

    # What a student cannot reach: the other's home and work, the exchange's inbound listing,
    # the instructor's course (graders, solutions, secret); the shared environment holds none.
    home = hub["homes"]
    for student, other in (("alice", "bob"), ("bob", "alice")):
        name = people[student]
        for path in (home[people[other]], f"{home[people[other]]}/{NOTEBOOK}", home[people["instructor"]],
                     f"{hub['course']}/graders/hidden/{ASSIGNMENT}.py", f"{hub['course']}/solutions",
                     f"{hub['course']}/.grading-secret", "/usr/local/share/nbgrader/exchange/scaling-jax/inbound",
                     hub["srv"]):
            assert not can_read(hub, name, path), (student, path)
        assert can_read(hub, name, f"{home[name]}/{NOTEBOOK}")
    python = os.path.join(hub["env"], "bin", "python")
    site = ns.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                  user=people["alice"]).stdout.strip()
    assert not {"graders", "solutions", "source", ".grading-secret"} & set(os.listdir(ns.path(site)))
    imported = ns.run([python, "-c", "import graders"], user=people["alice"], check=False)
    assert "No module named 'graders'" in imported.stderr, imported.stderr
    print(f"course on the hub took {time.time() - started:.0f} s")
