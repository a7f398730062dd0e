"""A course on a real JupyterHub, end to end in a browser: the README's "A course on JupyterHub".

On this machine, the README's hub block itself, read from README.md and run line by line as
written (as root, in a private mount namespace whose /srv, /opt, /home and /usr/local/share are
its own), so that a README edit that breaks the route fails here. What the test changes in
those lines is `Substitutions`, each with its reason: no sudo, unique user and group names,
chpasswd for passwd, this stack's Python for python3, the working tree for `git archive HEAD`,
the hub on loopback at free ports. So: the kit copied to /srv/scaling-jax, the proxy
(.ci/hub-packages), the kit's environment in /opt/scaling-jax with JupyterHub; local users in
the course's Unix groups, with passwords; the instructor's course folder, a copy of the kit, in
a private home; nbgrader's default exchange; the hub started with hub/jupyterhub_config.py.
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
from grading import CODE_POINTS

from routes import (EXCHANGE_PARENT, HEIGHT, REPO_ROOT, WIDTH, Namespace, free_port, launch_chromium,
                    let_users_run_stack_python, menu, open_assignment_list, release_scratch, remove_group,
                    remove_user, require_root_machine, save, scratch_folder, stack_python, stop,
                    submit_from_assignment_list, sync_playwright, type_into_cell, unique_name, wait_for_http,
                    wait_kernel_idle)
from test_browser import answers, leaked, mark_scheme_lines

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.hub]

ASSIGNMENT = "problem1"
NOTEBOOK = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
HUB_SECTION = "#### A course on JupyterHub (one machine)"
GRADE_ON_HUB = f"python -m graders submitted/STUDENT/{NOTEBOOK} --assignment {ASSIGNMENT} -o results.json"
OVERLAID = ("/srv", "/opt", "/home", EXCHANGE_PARENT)
"""The README's system folders, each a writable overlay in the test's private mount namespace:
what the README's lines write there stays in the namespace and goes with it."""


def readme_hub_block(repo_root) -> list[str]:
    """The lines of the first code block of the README's hub section, as written (comments and
    blank lines left out: bash would skip them)."""
    text = open(os.path.join(repo_root, "README.md")).read()
    section = text[text.index(HUB_SECTION):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


class Substitutions:
    """What this test changes in the README's lines, and why; each must apply to some line (a
    README edit that moves a line out of their reach fails here rather than run unchecked)."""

    def __init__(self, names: dict[str, str], groups: dict[str, str], passwords: dict[str, str],
                 kit_files: str, python: str):
        self.rules = [
            # (what, by, why)
            (r"\bsudo ", "", "the test runs as root (sudo itself may not be installed)"),
            (r"\bgit archive HEAD\b", f"tar -c -C {REPO_ROOT} --no-recursion -T {kit_files}",
             "the kit as a clone of this working tree holds it (uncommitted work included): its "
             "tracked and new files, as `git archive` lists a commit's"),
            (r"\bpython3 ", f"{python} ", "this stack's interpreter (made readable to every user in "
             "the namespace): the README asks for a Python every user can run"),
            *((rf"\bpasswd {re.escape(readme)}\b", f"chpasswd <<< {names[readme]}:{passwords[names[readme]]}",
               "passwd asks at a terminal; chpasswd sets the same password from the test")
              for readme in names),
            *((rf"\b{re.escape(readme)}\b", ours, "the machine's user database is shared with other runs: "
               "unique names, removed afterwards") for readme, ours in {**names, **groups}.items()),
        ]
        self.used = [False] * len(self.rules)

    def apply(self, line: str) -> str:
        for i, (what, by, _) in enumerate(self.rules):
            line, n = re.subn(what, lambda _m, by=by: by, line)
            self.used[i] |= bool(n)
        return line

    def check_all_used(self) -> None:
        unused = [what for (what, _, _), used in zip(self.rules, self.used) if not used]
        assert not unused, f"the README's hub section no longer has what these stand for: {unused}"


def for_each_student(lines: list[str], students: tuple[str, ...] = ("alice", "bob")) -> list[str]:
    """The README's lines for alice, repeated for every student (its comment: "each student"):
    bob's is alice's with his name ("Bob Liddell")."""
    out = []
    for line in lines:
        if re.search(r"\balice\b", line):
            out += [re.sub(r"\balice\b", who, line.replace("Alice", who.title())) for who in students]
        else:
            out.append(line)
    return out


def kit_file_list(path: str) -> str:
    """The files of this working tree a clone would hold (tracked and new, nothing ignored), one a
    line, for `tar -T`."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                           cwd=REPO_ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    with open(path, "w") as f:
        f.writelines(name + "\n" for name in files if name and os.path.isfile(os.path.join(REPO_ROOT, name)))
    return path


def test_readme_hub_section_is_one_route(repo_root):
    """Does the README's hub block copy the kit before anything runs from it, install, make the
    users, the course and the exchange, and end by starting the hub (what test_course_on_jupyterhub
    runs, line by line), with every substitution of this test finding its line?"""
    lines = readme_hub_block(repo_root)
    assert lines[0].startswith("sudo install -d -m 700 /srv/scaling-jax && git archive HEAD"), lines[0]
    first_use = next(i for i, line in enumerate(lines) if "/srv/scaling-jax/" in line)
    assert first_use > 0, "a command runs from /srv/scaling-jax before the kit is copied there"
    assert lines[-1] == "sudo /opt/scaling-jax/bin/jupyterhub -f /srv/scaling-jax/hub/jupyterhub_config.py"
    assert "cd /srv/scaling-jax-hub" in lines[-2]
    subs = Substitutions({"teacher": "kitiXXXX", "alice": "kitaXXXX"},
                         {"scaling-jax-instructors": "kitXins", "scaling-jax-students": "kitXstu"},
                         {"kitiXXXX": "pw", "kitaXXXX": "pw"}, "/tmp/files", "/usr/bin/python3.11")
    typed = [subs.apply(line) for line in lines]
    subs.check_all_used()
    assert not any(re.search(r"\b(sudo|teacher|alice|passwd)\b", line) for line in typed), typed
    readme = open(os.path.join(repo_root, "README.md")).read()
    assert "/user/<instructor>/formgrader" in readme


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
def hub(shots, repo_root):
    """The README's hub on loopback: its set-up block run line by line as written (the
    substitutions above, each stated), then JupyterHub started with its last line."""
    require_root_machine()
    require_proxy()
    sync_playwright()
    started = time.time()
    scratch = scratch_folder("kit-hub-")
    ns = Namespace(scratch)
    tag = secrets.token_hex(2)
    groups = {"scaling-jax-instructors": f"kit{tag}ins", "scaling-jax-students": f"kit{tag}stu"}
    people = {"instructor": unique_name("i"), "alice": unique_name("a"), "bob": unique_name("b")}
    passwords = {name: secrets.token_urlsafe(12) for name in people.values()}
    proc = None
    try:
        for folder in OVERLAID:
            ns.writable_overlay(folder)
        subs = Substitutions({"teacher": people["instructor"], "alice": people["alice"], "bob": people["bob"]},
                             groups, passwords, kit_file_list(os.path.join(scratch, "kit-files")), stack_python())
        lines = readme_hub_block(repo_root)
        set_up = [subs.apply(line) for line in for_each_student(lines[:-1])]
        start_lines = subs.apply(lines[-2]) + "\n" + subs.apply(lines[-1])  # `cd /srv/scaling-jax-hub`, the start
        subs.check_all_used()
        # As root, in the namespace, "from your clone of the kit": one script, stopping at the first error.
        built = ns.run(["bash", "-e", "-c", "\n".join(set_up)], cwd=REPO_ROOT, timeout=900, check=False)
        assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-3000:]
        print(f"\nthe README's hub set-up ran in {time.time() - started:.0f} s")
        let_users_run_stack_python(ns)
        log = os.path.join(scratch, "hub.log")
        port, hub_port, api_port = free_port(), free_port(), free_port()
        # The README's start on loopback, at free ports; the groups are the test's.
        start = ["bash", "-e", "-c", start_lines + f" --ip=127.0.0.1 --port={port} --JupyterHub.hub_port={hub_port}"
                 f" --ConfigurableHTTPProxy.api_url=http://127.0.0.1:{api_port}"]
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
               "SCALING_JAX_INSTRUCTORS": groups["scaling-jax-instructors"],
               "SCALING_JAX_STUDENTS": groups["scaling-jax-students"]}
        # An exchange as nbgrader makes it (0777) and a course folder an earlier release as root
        # left root's: the hub does not start, and says why and what mends each.
        exchange = "/usr/local/share/nbgrader/exchange"
        ns.shell(f"chmod 0777 {exchange} && chown root: {exchange}/scaling-jax")
        refused = ns.run(start, env=env, check=False, timeout=120)
        assert refused.returncode != 0, refused.stdout[-2000:] + refused.stderr[-2000:]
        message = refused.stderr
        assert "The course hub did not start" in message and "sudo chmod 1777" in message, message
        assert f"{exchange}/scaling-jax: is root's" in message and "sudo chown -R" in message, message
        # The README's exchange line mends both (install -d sets the mode and owner of a folder that exists).
        ns.shell(next(line for line in set_up if line.startswith(f"install -d -m 1777 {exchange}")))
        proc = ns.popen(start, log=log, env=env)
        base = f"http://127.0.0.1:{port}"
        wait_for_http(f"{base}/hub/login", proc, log)
        print(f"hub up {time.time() - started:.0f} s after the start of set-up")
        homes = {name: f"/home/{name}" for name in people.values()}
        yield {"ns": ns, "base": base, "log": log, "people": people, "passwords": passwords, "homes": homes,
               "course": f"/home/{people['instructor']}/scaling-jax", "env": "/opt/scaling-jax",
               "srv": "/srv/scaling-jax", "scratch": scratch}
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


def inside(hub, path: str) -> str:
    """`path` of the hub's namespace (homes, /srv, /opt), as this process reads it."""
    return hub["ns"].path(path)


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
    with open(inside(hub, os.path.join(hub["course"], out))) as f:
        return json.load(f), isolation


def open_gradebook(hub):
    """The instructor's gradebook, opened from a copy: SQLite resolves /proc/<pid>/root to this
    process's own root, so it cannot open the file in the namespace where it lies."""
    from nbgrader.api import Gradebook

    copy = os.path.join(hub["scratch"], f"gradebook-{secrets.token_hex(4)}.db")
    shutil.copy(inside(hub, f"{hub['course']}/gradebook.db"), copy)
    return Gradebook(f"sqlite:///{copy}")


def gradebook_scores(hub, student) -> dict[str, float]:
    with open_gradebook(hub) as gb:
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
            # The course folder the README's `cp -r` made, in the instructor's home (the hub's root).
            teacher.locator(".jp-DirListing-itemText", has_text=re.compile("^scaling-jax$")).wait_for(timeout=30000)
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
        collected = nbformat.read(inside(hub, os.path.join(hub["course"], "submitted", people[student], NOTEBOOK)),
                                  as_version=4)
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
        print(f"{student}: {sum(by_function.values())} / {CODE_POINTS:g} code points, formgrader and command line agree")
    assert sum(gradebook_scores(hub, people["alice"]).values()) == CODE_POINTS
    with open_gradebook(hub) as gb:  # formgrader names them, not "None, None"
        assert [(gb.find_student(people[s]).first_name, gb.find_student(people[s]).last_name)
                for s in ("alice", "bob")] == [("Alice", "Liddell"), ("Bob", "Liddell")]
    assert sum(gradebook_scores(hub, people["bob"]).values()) < CODE_POINTS

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
