"""python -m graders SUBMISSION --assignment NAME [-o results.json] [limits...]"""
from __future__ import annotations

import argparse
import os
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
    parser.add_argument("--concurrent", type=int, default=1,
                        help="gradings running at once on this machine (sizes the judges; graders.batch sets it)")
    parser.add_argument("--within", metavar="FOLDER",
                        help="grade the file only if it is reached from FOLDER without following a link")
    from .settings import add_arguments, add_log_level_argument, from_arguments, start_logging

    add_log_level_argument(parser)
    add_arguments(parser)
    args = parser.parse_args(argv)
    start_logging(args)

    from .sandbox import SandboxUnavailable
    from .supervisor import Prepared

    limits = from_arguments(args)
    if not args.within and not os.path.lexists(args.submission):  # a mistyped path, not a student's zero
        parser.error(f"no file at {args.submission}: pass the student's .ipynb or .py")
    if args.output:
        from .files import unwritable_folder

        if problem := unwritable_folder(os.path.dirname(os.path.abspath(args.output))):
            parser.error(f"{problem}: pass -o a path in a folder you can write")
    try:
        # First of all, the export worker: its Python and JAX start while this process
        # imports the contracts, the results and pytest.
        with Prepared(limits) as prepared:
            from assignments.contracts import ASSIGNMENTS

            if args.assignment not in ASSIGNMENTS:
                parser.error(f"unknown assignment {args.assignment!r}; known: {', '.join(sorted(ASSIGNMENTS))}")
            from .results import write_results
            from .run import grade

            result = grade(args.submission, args.assignment, only=args.only, limits=limits,
                           concurrent=args.concurrent, trusted_folder=args.within, prepared=prepared)
    except SandboxUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.output:
        write_results(args.output, result)
    if not args.quiet:
        try:
            print(result.to_text())
        except BrokenPipeError:  # e.g. piped into `head`
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
