"""Reading the solutions from disk: `import solutions` is blocked in the grading process,
but the repository is on its sys.path and readable, so this module executes
solutions/problem1.py as text. It should get no marks (it gets full marks today).
"""
import os

import assignments

_root = os.path.dirname(os.path.dirname(os.path.abspath(assignments.__file__)))
with open(os.path.join(_root, "solutions", "problem1.py")) as _f:
    exec(_f.read())
