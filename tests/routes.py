"""What the route tests (tests/test_browser.py, tests/test_hub.py) share.

They follow the README literally on this machine: real Unix users (students are not root), the
README's own system folders (nbgrader's exchange under /usr/local/share) and a copy of the kit
as a clone of this working tree holds it. So that nothing of that outlives a test or meets
another run, the system folders live in a private mount namespace: `Namespace` keeps one open,
runs commands in it (as root or as a user), and the rest of the machine never sees its mounts.
Users are created with unique names and removed, with their homes, afterwards.

Chromium is Debian's, driven by Playwright (no browser download).
"""
from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

from graders.distributed import free_port  # noqa: F401  (test_browser and test_hub import it from here)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
WIDTH, HEIGHT = 1280, 800
EXCHANGE_PARENT = "/usr/local/share"
"""Where nbgrader's default exchange lives (/usr/local/share/nbgrader/exchange)."""


def require_root_machine() -> None:
    """Skip, saying why, where the route tests cannot make users and mounts."""
    if os.geteuid() != 0:
        pytest.skip("route tests create Unix users and a mount namespace: run them as root")
    for tool in ("useradd", "userdel", "unshare", "nsenter", "runuser", "chpasswd"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is missing (Debian: passwd, util-linux)")


def sync_playwright():
    try:
        from playwright.sync_api import sync_playwright as start
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install -e '.[browser]')")
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    return start


def launch_chromium(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def scratch_folder(prefix: str) -> str:
    """A temporary folder every user may traverse (pytest's own are root's only): a tmpfs of
    its own, so that the environments installed there (several hundred MB each) are written
    and thrown away in a moment (`release_scratch`)."""
    folder = tempfile.mkdtemp(prefix=prefix, dir="/var/tmp")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12g,mode=0755", "kit-scratch", folder], check=True)
    return folder


def release_scratch(folder: str) -> None:
    """Unmount a `scratch_folder` (everything in it goes) and remove it."""
    subprocess.run(["umount", "--lazy", folder], capture_output=True)
    shutil.rmtree(folder, ignore_errors=True)


def copy_kit(dest: str) -> str:
    """The kit as a clone of this working tree holds it (tracked and new files, nothing
    ignored: no environments, caches, course folders or secrets)."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                           cwd=REPO_ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = os.path.join(REPO_ROOT, name)
        if os.path.isfile(source):
            os.makedirs(os.path.dirname(os.path.join(dest, name)), exist_ok=True)
            shutil.copy2(source, os.path.join(dest, name))
    return dest


# --- users ------------------------------------------------------------------------------------

def unique_name(role: str) -> str:
    return f"kit{role}{secrets.token_hex(3)}"


def add_user(name: str, password: str | None = None, groups: tuple[str, ...] = (),
             homes: str | None = None) -> str:
    """A local user with a home of its own (mode 0700, as the README sets it), in the folder
    `homes` when given (a scratch tmpfs: a home holding an environment is gone in a moment);
    returns its home."""
    args = ["useradd", "--create-home", "--shell", "/bin/bash"]
    if homes:
        args += ["--home-dir", os.path.join(homes, name)]
    if groups:
        args += ["--groups", ",".join(groups)]
    subprocess.run([*args, name], check=True, capture_output=True)
    if password:
        subprocess.run(["chpasswd"], input=f"{name}:{password}", text=True, check=True, capture_output=True)
    home = os.path.expanduser(f"~{name}")
    os.chmod(home, 0o700)
    return home


def user_processes(name: str) -> list[int]:
    proc = subprocess.run(["ps", "-o", "pid=", "-u", name], capture_output=True, text=True)
    return [int(p) for p in proc.stdout.split()]


def remove_user(name: str) -> None:
    """Stop what the test left running as `name` (by process id), then remove it, its home and
    what it left in the shared temporary folders (its kernels' profiler traces)."""
    for _ in range(20):
        pids = user_processes(name)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        time.sleep(0.25)
    # What a user makes there is at the top, or one level down in a shared sticky folder
    # (/tmp/.X11-unix); deeper, it is in a folder of its own, removed whole: no walk of every
    # file under the shared folders.
    subprocess.run(["find", "/tmp", "/var/tmp", "/dev/shm", "-xdev", "-mindepth", "1", "-maxdepth", "2", "-user", name,
                    "-exec", "rm", "-rf", "--one-file-system", "{}", "+"], capture_output=True)
    subprocess.run(["userdel", "--remove", name], capture_output=True)
    subprocess.run(["groupdel", name], capture_output=True)  # its own group, if userdel left it


def add_group(name: str) -> str:
    subprocess.run(["groupadd", name], check=True, capture_output=True)
    return name


def remove_group(name: str) -> None:
    subprocess.run(["groupdel", name], capture_output=True)


# --- a private mount namespace ----------------------------------------------------------------

class Namespace:
    """A private mount namespace held open by a sleeping process. Commands started through it
    see its mounts; the rest of the machine does not. Its files are readable from outside
    under `path(...)` (/proc/<pid>/root)."""

    def __init__(self, scratch: str):
        self.scratch = scratch
        self.holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--",
                                        "sleep", "infinity"], start_new_session=True)
        deadline = time.time() + 10
        while os.readlink(f"/proc/{self.holder.pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt"):
            if time.time() > deadline:
                raise RuntimeError("unshare did not make a mount namespace")
            time.sleep(0.05)

    def path(self, inside: str) -> str:
        return f"/proc/{self.holder.pid}/root{inside}"

    def command(self, argv: list[str], user: str | None = None, cwd: str | None = None) -> list[str]:
        """`argv` run inside the namespace in `cwd`, as `user` (a login shell's environment,
        as after logging in) or as root (this process's environment)."""
        enter = ["nsenter", f"--target={self.holder.pid}", "--mount", f"--wd={cwd or '/'}", "--"]
        if user is None:
            return [*enter, *argv]
        script = (f"cd {shlex.quote(cwd)} && " if cwd else "") + "exec " + shlex.join(argv)
        return [*enter, "runuser", "--login", user, "--command", script]

    def run(self, argv: list[str], user: str | None = None, cwd: str | None = None, check: bool = True,
            timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
        proc = subprocess.run(self.command(argv, user, cwd), capture_output=True, text=True, timeout=timeout,
                              **kwargs)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{shlex.join(argv)} (as {user or 'root'}) failed:\n{proc.stdout[-3000:]}\n"
                               f"{proc.stderr[-3000:]}")
        return proc

    def shell(self, script: str, user: str | None = None, **kwargs) -> subprocess.CompletedProcess:
        return self.run(["bash", "-c", script], user=user, **kwargs)

    def popen(self, argv: list[str], log: str, user: str | None = None, cwd: str | None = None,
              **kwargs) -> subprocess.Popen:
        with open(log, "w") as out:
            return subprocess.Popen(self.command(argv, user, cwd), stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, **kwargs)

    def writable_overlay(self, folder: str) -> None:
        """`folder` as it is, but what is written there stays in this namespace (overlayfs)."""
        upper = tempfile.mkdtemp(dir=self.scratch)
        os.makedirs(os.path.join(upper, "u")), os.makedirs(os.path.join(upper, "w"))
        self.run(["mount", "-t", "overlay", "overlay", "-o",
                  f"lowerdir={folder},upperdir={upper}/u,workdir={upper}/w", folder])

    def expose_only(self, hidden: str, *keep: str) -> None:
        """Hide everything under `hidden` but the folders `keep`, which every user may then read
        (read-only): e.g. an interpreter installed under /root, which is root's only."""
        script = ["set -e"]
        stages = [tempfile.mkdtemp(dir=self.scratch) for _ in keep]
        script += [f"mount --bind {shlex.quote(k)} {s}" for k, s in zip(keep, stages)]
        script.append(f"mount -t tmpfs -o mode=0755 kit-hidden {shlex.quote(hidden)}")
        for k, s in zip(keep, stages):
            script += [f"mkdir -p {shlex.quote(k)}", f"mount --bind {s} {shlex.quote(k)}",
                       f"mount -o remount,bind,ro {shlex.quote(k)}", f"umount {s}"]
        self.shell("\n".join(script))

    def close(self) -> None:
        stop(self.holder)


def stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    """End a process started with start_new_session, and its process group."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, 15)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait(timeout=timeout)


def wait_for_http(url: str, proc: subprocess.Popen, log: str, seconds: float = 120) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the server exited:\n{open(log).read()[-4000:]}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except Exception:  # not listening yet, or not routed yet (a proxy's 404)
            time.sleep(0.5)
    raise RuntimeError(f"{url} did not answer in {seconds:.0f} s:\n{open(log).read()[-4000:]}")


def readable_by_others(path: str) -> bool:
    """Can a user other than root reach `path` (every folder on the way traversable)?"""
    parts = os.path.realpath(path).split("/")
    for i in range(2, len(parts) + 1):
        if not os.stat("/".join(parts[:i]) or "/").st_mode & 0o001:
            return False
    return True


def stack_python() -> str:
    """This stack's base interpreter (what `python -m venv` copies into an environment)."""
    return os.path.join(os.path.realpath(sys.base_prefix), "bin",
                        f"python{sys.version_info.major}.{sys.version_info.minor}")


def let_users_run_stack_python(ns: Namespace, *also: str) -> None:
    """Make this stack's interpreter (and the folders `also`, e.g. an environment) readable to
    the namespace's users where they are installed where others cannot reach them (pyenv under
    /root): the README asks for an interpreter every user can run, and this stands in for
    installing one."""
    hidden: dict[str, list[str]] = {}
    for path in (os.path.realpath(sys.base_prefix), *map(os.path.realpath, also)):
        if not readable_by_others(path):
            hidden.setdefault("/" + path.strip("/").split("/")[0], []).append(path)
    for top, keep in hidden.items():
        ns.expose_only(top, *keep)


# --- JupyterLab's own menus and buttons -------------------------------------------------------

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


def wait_kernel_idle(page, timeout=120):
    page.wait_for_function(
        "() => { const s = document.querySelector('.jp-Notebook-ExecutionIndicator');"
        " return s && s.getAttribute('data-status') === 'idle'; }", timeout=timeout * 1000)


def wait_idle(page, timeout=240):
    """Until every code cell has run: no [*] or [ ] prompts left."""
    page.wait_for_function(
        """() => { const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
                   return p.length > 0 && p.every(e => /\\[\\d+\\]/.test(e.textContent)); }""",
        timeout=timeout * 1000, polling=500)


def run_all(page):
    menu(page, "Run", "Run All Cells")
    wait_idle(page)


def save(page):
    menu(page, "File", "Save Notebook")
    page.wait_for_function("() => !document.querySelector('.lm-TabBar-tab.jp-mod-current.jp-mod-dirty')",
                           timeout=30000)


def type_into_cell(page, marker: str, text: str) -> None:
    """Replace the source of the code cell showing `marker` with `text`, typed into its editor
    as a student would (select all, then type; the editor's auto-indent is left out by
    inserting the text as one input)."""
    cell = page.locator(".jp-CodeCell", has_text=marker).first
    cell.evaluate("e => e.scrollIntoView({block: 'center'})")
    editor = cell.locator(".cm-content")
    editor.click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(text)
    page.keyboard.press("Escape")


def open_assignment_list(page):
    menu(page, "Nbgrader", "Assignment List")
    page.locator("#released_assignments_list, #fetched_assignments_list").first.wait_for(timeout=30000)
    page.wait_for_function(
        "() => ['released', 'fetched', 'submitted'].every(k => {"
        " const e = document.getElementById(k + '_assignments_list_loading'); return !e || e.hidden; })",
        timeout=60000)


def submit_from_assignment_list(page, assignment: str, on_refusal=None) -> str | None:
    """Press Submit next to `assignment`; returns the refusal's text (after calling
    `on_refusal()` while it shows), or None once it is listed as submitted."""
    row = page.locator("#fetched_assignments_list > .list_item", has_text=assignment)
    submitted = page.locator("#submitted_assignments_list > .list_item").count()
    row.get_by_role("button", name="Submit", exact=True).click()
    dialog = page.locator(".jp-Dialog-content", has_text="Assignment not submitted")
    page.wait_for_function(
        """(n) => document.querySelector('.jp-Dialog-content') ||
                  document.querySelectorAll('#submitted_assignments_list > .list_item').length > n""",
        arg=submitted, timeout=60000)
    if dialog.count():
        text = dialog.inner_text()
        if on_refusal:
            on_refusal()
        page.locator(".jp-Dialog-button.jp-mod-accept").click()
        return text
    return None
