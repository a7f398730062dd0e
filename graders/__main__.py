"""python -m graders SUBMISSION --assignment NAME [-o results.json]"""
from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m graders",
        description="Grade one submission (.ipynb or .py) with the hidden graders, in a sandbox.")
    parser.add_argument("submission", help="the student's notebook or Python module")
    parser.add_argument("--assignment", "-a", required=True, help="e.g. problem1")
    parser.add_argument("-o", "--output", help="write Gradescope-format results.json here")
    parser.add_argument("--only", nargs="+", metavar="FUNCTION", help="grade only these functions")
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
    from .harness import add_limit_arguments, limits_from_args

    add_limit_arguments(parser)
    args = parser.parse_args(argv)

    from assignments.contracts import ASSIGNMENTS

    if args.assignment not in ASSIGNMENTS:
        parser.error(f"unknown assignment {args.assignment!r}; known: {', '.join(sorted(ASSIGNMENTS))}")
    from .run import grade
    from .sandbox import SandboxUnavailable, choose_isolation

    limits = limits_from_args(args)
    try:
        choose_isolation(limits.sandbox)
        result = grade(args.submission, args.assignment, only=args.only, limits=limits)
    except SandboxUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.output:
        from .batch import write_atomic

        write_atomic(args.output, json.dumps(result.to_gradescope(), indent=2))
    if not args.quiet:
        try:
            print(result.to_text())
        except BrokenPipeError:  # e.g. piped into `head`
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
