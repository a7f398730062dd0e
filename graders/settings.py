"""Every grading setting, declared once: `Limits`, a traitlets configurable.

An instructor sets them in the course's `grading_config.py` (beside `nbgrader_config.py`,
which loads it, so `nbgrader autograde` grades with the same limits), e.g.

    c.Limits.submission_timeout = 600
    c.Limits.memory_gib = 2

Every command line (`python -m graders`, `graders.batch`, the pytest graders) takes the same
settings as flags derived from the traits (`--submission-timeout 600`), and a grading process
passes the object on; a child process gets every field as a flag (`to_arguments`).
"""
from __future__ import annotations

import argparse
import logging
import os

from traitlets import Enum, Float, Integer
from traitlets.config import Config, Configurable
from traitlets.config.loader import PyFileConfigLoader

KIT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The kit's folder (the course's `nbgrader_config.py` and `grading_config.py` are here)."""
CONFIG_FILE = "grading_config.py"
from assignments.devices import DEFAULT_DEVICES as DEVICES  # noqa: E402  (the one place it is set)
SANDBOXES = ("auto", "bubblewrap", "uid", "none")


class Limits(Configurable):
    """Resource limits of one grading: time, memory, disk, failures, judges, isolation, and the
    size of what is graded."""

    cell_timeout = Float(60.0, help="Seconds one notebook cell (or a .py module) may run.").tag(config=True)
    case_timeout = Float(60.0, help="Seconds tracing and exporting one case may take.").tag(config=True)
    stall_timeout = Float(120.0, help="Seconds a worker may go without any progress before it is "
                                      "stopped.").tag(config=True)
    run_timeout = Float(60.0, help="Seconds compiling and running one case's program may take.").tag(config=True)
    submission_timeout = Float(900.0, help="Seconds the whole grading of one submission may take, "
                                           "all its workers together.").tag(config=True)
    memory_gib = Float(3.0, help="GiB of memory each sandboxed worker may hold: its processes, its "
                                 "/tmp, shared memory and memfds (a memory cgroup, where one can be "
                                 "made). Each process's address space is bounded too, at 4 times "
                                 "this or 8 GiB, whichever is more (JAX reserves more than it "
                                 "uses).").tag(config=True)
    tmp_mib = Integer(512, help="MiB of each of the sandbox's /tmp, scratch folder and /dev/shm, and "
                                "of System V shared memory.").tag(config=True)
    processes = Integer(512, help="Processes and threads of one sandboxed worker (XLA starts "
                                  "dozens of threads).").tag(config=True)
    max_strikes = Integer(2, help="Cases of one function that may time out or crash before its "
                                  "other cases are not run.").tag(config=True)
    judges = Integer(0, help="Judge workers compiling one submission's programs side by side; 0: "
                             "one per core this grading may use (cores / concurrent "
                             "gradings, at most 2).").tag(config=True)
    submission_mib = Integer(32, help="MiB of a submission (a notebook or a .py module): a larger file is "
                                      "not graded, on every route (nbgrader's autograde too).").tag(config=True)
    notebook_depth = Integer(64, help="Levels a submitted notebook's JSON may nest (a notebook saved by "
                                      "Jupyter nests about 7): checked on its bytes before anything parses "
                                      "it, on every route (graders.notebook_bounds).").tag(config=True)
    notebook_nodes = Integer(100_000, help="JSON values (objects, arrays, strings, numbers) a submitted "
                                           "notebook may hold (the course's own, run with outputs: about "
                                           "2,000): parsing costs memory per value, whatever its bytes, so "
                                           "a notebook with more is not graded, on every route; checked on "
                                           "its bytes before anything parses it.").tag(config=True)
    nbgrader_memory_gib = Float(2.0, help="GiB `nbgrader autograde`'s own process may hold (a memory "
                                          "cgroup of its own, where one can be made; its sandboxed workers "
                                          "have theirs beside it): the largest notebooks the bounds above "
                                          "let through take it to about 0.7 GiB; 0: no bound.").tag(config=True)
    sandbox = Enum(SANDBOXES, "auto", help="'auto' (bubblewrap; as root without it, a dedicated uid; "
                                           "else refuse), 'bubblewrap', 'uid', or 'none' (no "
                                           "isolation: only for code you trust).").tag(config=True)

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * 2**30)

    @property
    def tmp_bytes(self) -> int:
        return self.tmp_mib * 2**20

    @property
    def submission_bytes(self) -> int:
        return self.submission_mib * 2**20

    @property
    def nbgrader_memory_bytes(self) -> int:
        return int(self.nbgrader_memory_gib * 2**30)

    @property
    def cpu_seconds(self) -> int:
        """CPU time of each worker process: twice the budget (two cores' worth), and a minute."""
        return int(2 * self.submission_timeout) + 60

    def judges_for(self, concurrent: int = 1) -> int:
        """Judges per grading when `concurrent` gradings share this machine's cores."""
        if self.judges:
            return self.judges
        return max(1, min(2, (os.cpu_count() or 1) // max(1, concurrent)))

    def memory_warning(self, concurrent: int) -> str | None:
        """A warning when `concurrent` gradings, each with its export worker and judges at
        `memory_gib` apiece, could together ask for more memory than this machine has (the
        limit is per worker: a grading may hold up to 1 + judges times it), else None."""
        workers = concurrent * (1 + self.judges_for(concurrent))
        try:
            with open("/proc/meminfo") as f:
                total = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:")) * 1024
        except (OSError, StopIteration, ValueError):
            return None
        if workers * self.memory_bytes <= total:
            return None
        return (f"up to {workers} sandboxed workers ({concurrent} grading(s) at once, each an export and "
                f"{self.judges_for(concurrent)} judge(s)) may each hold {self.memory_gib:g} GiB: "
                f"{workers * self.memory_gib:g} GiB on a machine with {total / 2**30:.1f} GiB. A submission that "
                f"uses all of its memory could then push the machine into swapping or its own OOM "
                f"killer: grade with fewer --workers, or set a smaller c.Limits.memory_gib in grading_config.py")

    def values(self) -> dict:
        """{field: value} of every setting."""
        return {name: getattr(self, name) for name in sorted(self.class_traits(config=True))}

    def key(self) -> tuple:
        """A hashable form (for caches keyed by the limits a grading used)."""
        return tuple(self.values().items())

    def replace(self, **changes) -> "Limits":
        """A copy with some fields changed."""
        return Limits(**{**self.values(), **changes})

    def to_arguments(self) -> list[str]:
        """Every field as a command-line flag, for a child process (nothing left to defaults)."""
        return [f"--{name.replace('_', '-')}={value}" for name, value in self.values().items()]

    def __repr__(self) -> str:
        return "Limits(" + ", ".join(f"{k}={v!r}" for k, v in self.values().items()) + ")"


def load_config(path: str | None = None) -> Config:
    """The course's grading settings: `path`, else `grading_config.py` in the kit's folder
    (an empty configuration when there is none)."""
    path = path or os.path.join(KIT_ROOT, CONFIG_FILE)
    if not os.path.isfile(path):
        return Config()
    return PyFileConfigLoader(os.path.basename(path), path=os.path.dirname(os.path.abspath(path))).load_config()


def course_limits() -> Limits:
    """The course's limits (`grading_config.py`), for a reader given none by its command."""
    return Limits(config=load_config())


def add_arguments(parser: argparse.ArgumentParser | object) -> None:
    """A flag for every `Limits` field (`--case-timeout`, ...), help and type from its trait,
    plus `--unsandboxed` (= `--sandbox none`) and `--config`. Works on an argparse parser or
    anything with the same `add_argument` (pytest's option groups)."""
    for name, trait in sorted(Limits.class_traits(config=True).items()):
        flag = "--" + name.replace("_", "-")
        kind = {Float: float, Integer: int}.get(type(trait), str)
        choices = list(trait.values) if isinstance(trait, Enum) else None
        parser.add_argument(flag, type=kind, choices=choices, default=None,
                            help=f"{trait.help} (default {trait.default_value})")
    parser.add_argument("--unsandboxed", action="store_true", default=False,
                        help="the same as --sandbox none: run student code WITHOUT isolation (only "
                             "for code you trust, on a machine where bubblewrap cannot run); "
                             "results.json records it")
    parser.add_argument("--config", default=None,
                        help=f"the course's grading settings (default {CONFIG_FILE} in the kit's folder)")


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def add_log_level_argument(parser: argparse.ArgumentParser) -> None:
    """`--log-level` (any case), for the commands that grade; `start_logging` applies it."""
    parser.add_argument("--log-level", default="WARNING", type=str.upper, choices=LOG_LEVELS,
                        help="what the graders log on stderr (INFO: each decision of the supervisor; "
                             "default WARNING)")


def start_logging(args) -> None:
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(name)s: %(message)s")


def from_arguments(args) -> Limits:
    """The limits of a command line: the course's settings, then every flag given."""
    config = load_config(getattr(args, "config", None))
    given = {name: getattr(args, name) for name in Limits.class_traits(config=True)
             if getattr(args, name, None) is not None}
    if getattr(args, "unsandboxed", False):
        given["sandbox"] = "none"
    limits = Limits(config=config)
    for name, value in given.items():
        setattr(limits, name, value)
    return limits
