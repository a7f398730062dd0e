"""The grading protocol: what the grading process and its sandboxed workers say to each other.

Both workers speak JSON lines: requests on stdin, one event per line on stdout.
- The export worker (which runs student code) reads one request line: the submission and
  every case to export.
- The judge (which runs programs compiled from it) says "ready" once JAX and its devices
  have started, reads a header line naming the assignment, then one job line per case as the
  parent sends them (one at a time: the next when it has answered the last), until its stdin
  closes.
Both sides import this module, so the message shapes live here once.

Nothing a worker writes is trusted: the export worker's process runs student code, which can
write anything to any file descriptor it has, and the judge runs student-made programs.
`read_event` therefore checks every field of every event (type, range, known id, size) and
raises `ProtocolError` for anything else; the parent treats that as the submission's fault,
never its own.
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import io
import json
import math
from typing import Any, ClassVar, Union

VERSION = 5
"""Bumped whenever a request or an event changes shape; a worker refuses another version."""

TRACING_ERROR = "raised while tracing: "
"""How the export worker's message on an exception in student code while tracing begins
(its event also says `while_tracing`, which is what the parent reads)."""

MAX_TEXT = 2000
"""Characters of one message or problem a worker may send (longer ones are cut)."""
MAX_PROBLEMS = 12
"""Problems one case or one submission load may report."""
MAX_ARTIFACT_BYTES = 64 * 2**20
"""Bytes of one serialized artifact (a base64 line is a third longer)."""
MAX_LINE_BYTES = 100 * 2**20
"""Longest event line the parent reads; a longer one is a protocol violation."""
MAX_SECONDS = 1e6


class ProtocolError(ValueError):
    """An event that breaks the protocol: malformed, out of range, or about an unknown case."""


# --- the events, as the parent reads them (`read_event`): typed, every field checked ------------


@dataclasses.dataclass(frozen=True)
class Progress:
    """A worker is alive and working (a cell ran; no case answered)."""

    name: ClassVar[str] = "progress"


@dataclasses.dataclass(frozen=True)
class Ready:
    """A judge has started JAX and its devices, and waits for its header."""

    name: ClassVar[str] = "ready"


@dataclasses.dataclass(frozen=True)
class Start:
    """A worker starts a case (the supervisor times it from here)."""

    id: str
    name: ClassVar[str] = "start"


@dataclasses.dataclass(frozen=True)
class Loaded:
    """The export worker ran the submission: what went wrong on the way (in its words)."""

    problems: tuple[str, ...]
    run_submission_s: float
    name: ClassVar[str] = "loaded"


@dataclasses.dataclass(frozen=True)
class Finished:
    """A worker is done; its phases' seconds."""

    timings: dict
    name: ClassVar[str] = "finished"


@dataclasses.dataclass(frozen=True)
class Exported:
    """The export worker's answer to one case: an artifact (or, for a part called eagerly, a
    report of its result), or why there is none."""

    id: str
    ok: bool
    message: str | None = None
    rule: str = "E002"
    """Why there is none (`EXPORT_CHECKS`): not defined as the contract says, or did not trace."""
    timed_out: bool = False
    while_tracing: bool = False
    artifact: bytes | None = None
    report: dict | None = None
    name: ClassVar[str] = "case"


@dataclasses.dataclass(frozen=True)
class Judged:
    """A judge's verdict on one case."""

    id: str
    values_ok: bool
    rule_ok: bool
    problems: tuple
    """Each an `assignments.contract.Problem`."""
    ran: bool
    analysis: object = None
    """The compiled program's `assignments.hlo.ProgramAnalysis`, or None."""
    ok: ClassVar[bool] = True
    name: ClassVar[str] = "case"

    def stored(self) -> dict:
        """The verdict as the verdict cache keeps it (`graders.verdicts`; read back by `read_event`)."""
        return {"values_ok": self.values_ok, "rule_ok": self.rule_ok,
                "problems": [p.to_json() for p in self.problems], "ran": self.ran,
                "analysis": None if self.analysis is None else self.analysis.to_json()}


@dataclasses.dataclass(frozen=True)
class Unanswered:
    """A case the worker never answered, made up by the supervisor: why (a timeout, a crash)."""

    id: str
    message: str
    ok: ClassVar[bool] = False
    name: ClassVar[str] = "case"


@dataclasses.dataclass(frozen=True)
class Died:
    """A worker that ended before its work was done, made up by the supervisor: why."""

    message: str
    name: ClassVar[str] = "died"


Event = Union[Progress, Ready, Start, Loaded, Finished, Exported, Judged, Unanswered, Died]


# --- encoding helpers (both sides) ----------------------------------------------------------


def encode_bytes(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode_bytes(text: Any, limit: int = MAX_ARTIFACT_BYTES) -> bytes:
    if not isinstance(text, str) or len(text) > limit * 4 // 3 + 8:
        raise ProtocolError(f"binary field missing or longer than {limit} bytes")
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ProtocolError("binary field is not base64") from None


def encode_array(array) -> str:
    """A NumPy array as base64 `.npy` bytes (no pickles)."""
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    return encode_bytes(buffer.getvalue())


def decode_array(text: Any, limit: int = MAX_ARTIFACT_BYTES):
    import numpy as np

    try:
        return np.load(io.BytesIO(decode_bytes(text, limit)), allow_pickle=False)
    except ProtocolError:
        raise
    except Exception as e:  # a malformed .npy header
        raise ProtocolError(f"array field is not a valid .npy array ({type(e).__name__})") from None


def encode_tree(value):
    """Arrays, or tuples of them (a pytree argument), as JSON."""
    if isinstance(value, (tuple, list)):
        return {"tree": [encode_tree(v) for v in value]}
    return encode_array(value)


def decode_tree(value, limit: int = MAX_ARTIFACT_BYTES):
    if isinstance(value, dict) and isinstance(value.get("tree"), list):
        return tuple(decode_tree(v, limit) for v in value["tree"])
    return decode_array(value, limit)


def request_text(kind: str, **fields) -> str:
    """A request line (the export's whole request, or the judge's header)."""
    return json.dumps({"version": VERSION, "kind": kind, **fields}) + "\n"


def job_text(job: dict) -> str:
    """One judge job line."""
    return json.dumps(job) + "\n"


class ProtocolMismatch(RuntimeError):
    """A worker was given a request of another kind or version (a kit installed twice?)."""


def read_request(line: str, kind: str) -> dict:
    """A worker's check of the request it was given (from the trusted parent)."""
    request = json.loads(line)
    if request.get("version") != VERSION or request.get("kind") != kind:
        raise ProtocolMismatch(f"protocol mismatch: this worker speaks {kind} version {VERSION}, "
                               f"got {request.get('kind')} version {request.get('version')}")
    return request


def event_channel(silence: tuple[int, ...]):
    """A worker's side of the channel: `emit(**event)` writes one JSON line to the original
    stdout; the file descriptors in `silence` then lead to /dev/null, so nothing else
    written there (prints, C-level chatter) can corrupt the stream."""
    import os

    events = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in silence:
        os.dup2(devnull, fd)

    def emit(**event):
        events.write(json.dumps(event) + "\n")
        events.flush()

    return emit


# --- validation of events (parent side) ------------------------------------------------------


def _text(value: Any, field: str, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ProtocolError(f"{field} must be a string")
    return value[:MAX_TEXT]


def _texts(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or len(value) > 1000:
        raise ProtocolError(f"{field} must be a list")
    return [_text(v, field) for v in value[:MAX_PROBLEMS]]


def _problems(value: Any, field: str) -> list:
    """A judge's problems: each a typed record (`assignments.contract.Problem`) naming a rule or
    check the kit has."""
    from assignments.contract import Problem

    if not isinstance(value, list) or len(value) > 1000:
        raise ProtocolError(f"{field} must be a list")
    try:
        return [Problem.from_json(v, MAX_TEXT) for v in value[:MAX_PROBLEMS]]
    except ValueError as e:
        raise ProtocolError(f"{field}: {e}") from None


EXPORT_CHECKS = ("E001", "E002", "E004")
"""The checks an export worker's failed case may name: the function is not defined as the
contract says (E001), it did not trace and export (E002), or the submission could not be read
(E004). Nothing else is its to say."""


def _seconds(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= MAX_SECONDS:
        raise ProtocolError(f"{field} must be a number of seconds")
    return float(value)


def _flag(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ProtocolError(f"{field} must be true or false")
    return value


def _int(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ProtocolError(f"{field} must be an integer in [{low}, {high}]")
    return value


def _eager_report(value: Any) -> dict:
    """What an eagerly called function returned: type, shape, dtype, and every shard's
    device, index and data (the parent's judge checks them against the hidden input)."""
    if not isinstance(value, dict):
        raise ProtocolError("report must be an object")
    report = {"type": _text(value.get("type"), "report.type")[:60]}
    if report["type"] != "Array":
        return report
    shape = value.get("shape")
    if not isinstance(shape, list) or len(shape) > 8:
        raise ProtocolError("report.shape must be a list")
    report["shape"] = [_int(d, "report.shape", 0, 2**31) for d in shape]
    report["dtype"] = _text(value.get("dtype"), "report.dtype")[:20]
    report["sharding"] = _text(value.get("sharding"), "report.sharding")[:300]
    shards = value.get("shards")
    if not isinstance(shards, list) or len(shards) > 64:
        raise ProtocolError("report.shards must be a list of at most 64 shards")
    report["shards"] = []
    for shard in shards:
        if not isinstance(shard, dict) or not isinstance(shard.get("index"), list) \
                or len(shard["index"]) != len(shape):
            raise ProtocolError("each shard needs a device and an index per dimension")
        index = []
        for bounds in shard["index"]:
            if not isinstance(bounds, list) or len(bounds) != 2:
                raise ProtocolError("a shard index is a [start, stop] pair per dimension")
            index.append([_int(b, "report.shards.index", 0, 2**31) for b in bounds])
        report["shards"].append({"device": _int(shard.get("device"), "report.shards.device", 0, 4096),
                                 "index": index, "data": decode_array(shard.get("data"))})
    return report


def read_event(line: bytes, known: set[str], kind: str, reports: frozenset[str] = frozenset()) -> Event:
    """Validate one line of a worker's output; returns a typed event or raises ProtocolError.

    `kind` is "export" or "judge"; `known` the case ids of this run; `reports` those of them
    (parts called eagerly) that an export answers with a report, where every other case
    answers with an artifact."""
    try:
        event = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        raise ProtocolError("a line that is not JSON") from None
    if not isinstance(event, dict):
        raise ProtocolError("an event that is not an object")
    name = event.get("event")
    if name == "progress":
        return Progress()
    if name == "start":
        return Start(_case_id(event, known))
    if name == "ready" and kind == "judge":
        return Ready()
    if name == "loaded" and kind == "export":
        return Loaded(tuple(_texts(event.get("problems"), "problems")),
                      _seconds(event.get("run_submission_s"), "run_submission_s"))
    if name == "finished":
        timings = event.get("timings") or {}
        if not isinstance(timings, dict) or len(timings) > 20:
            raise ProtocolError("timings must be an object")
        return Finished({_text(k, "timings")[:80]: _seconds(v, "timings") for k, v in timings.items()})
    if name == "case" and kind == "export":
        return _export_case(event, known, reports)
    if name == "case" and kind == "judge":
        return _judge_case(event, known)
    raise ProtocolError(f"an unknown event {str(name)[:40]!r}")


def _case_id(event: dict, known: set[str]) -> str:
    case_id = event.get("id")
    if not isinstance(case_id, str) or case_id not in known:
        raise ProtocolError("an event about a case this run does not have")
    return case_id


def _export_case(event: dict, known: set[str], reports: frozenset[str]) -> Exported:
    case_id = _case_id(event, known)
    status = event.get("status")
    if status not in ("ok", "error"):
        raise ProtocolError("status must be 'ok' or 'error'")
    rule = event.get("rule", "E002")
    if rule not in EXPORT_CHECKS:
        raise ProtocolError(f"rule must be one of {', '.join(EXPORT_CHECKS)}")
    fields = {"message": _text(event.get("message"), "message", optional=True), "rule": rule,
              "timed_out": _flag(event.get("timed_out", False), "timed_out"),
              "while_tracing": _flag(event.get("while_tracing", False), "while_tracing")}
    if status == "error":
        return Exported(case_id, False, **fields)
    # each case answers in its part's one form (the judge reads only that)
    if case_id in reports:
        if "artifact" in event:
            raise ProtocolError("an artifact for a case called eagerly (it is answered by a report)")
        return Exported(case_id, True, report=_eager_report(event.get("report")), **fields)
    if "report" in event:
        raise ProtocolError("a report for a case answered by an exported artifact")
    return Exported(case_id, True, artifact=decode_bytes(event.get("artifact")), **fields)


def _judge_case(event: dict, known: set[str]) -> Judged:
    case_id = _case_id(event, known)
    flags = [_flag(event.get(f), f) for f in ("values_ok", "rule_ok")]
    problems = tuple(_problems(event.get("problems"), "problems"))
    ran = _flag(event.get("ran"), "ran")
    analysis = event.get("analysis")
    if analysis is not None:
        from assignments.hlo import ProgramAnalysis

        try:
            analysis = ProgramAnalysis.from_json(analysis)
        except Exception:
            raise ProtocolError("analysis is not a program analysis") from None
    return Judged(case_id, *flags, problems, ran, analysis)