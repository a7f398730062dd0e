"""Route 3: a submission with no code of its own looks for a classmate's submission in every
temporary folder it can see, and runs the first one that defines the functions."""
import glob
import os

me = os.path.abspath(__file__) if "__file__" in globals() else ""
found = {}
for pattern in ("/tmp/**/*.py", "/tmp/**/*.ipynb", "/var/tmp/**/*.py", "/scratch/**/*.py",
                "/dev/shm/**/*", "/proc/*/cwd/*.py", "/proc/*/root/tmp/**/*.py"):
    for path in glob.glob(pattern, recursive=True):
        try:
            text = open(path).read()
        except OSError:
            continue
        if "def shard_average_jit" in text and "copy_classmate" not in text:
            try:
                exec(text, found)
                break
            except BaseException:
                pass
globals().update({k: v for k, v in found.items() if not k.startswith("__")})
