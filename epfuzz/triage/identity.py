"""The exception a harness raises for a finding, shaped so that ClusterFuzz tells bugs apart.

ClusterFuzz names a Python crash by its exception type and the function names of the innermost
three frames of its traceback (`File "...", line N, in NAME`; the message is ignored; research
notes, field-2026-12-01.md). Every epfuzz finding used to raise from the same three frames, so
on ClusterFuzz all findings of a harness were one bug and every other bug hid behind the first.

Here the finding's root cause (`epfuzz.triage.cause`, of the minimized finding: a function of the
finding, not of the clock) picks the names: the innermost frame names the kind and rule cells, the
next the knobs it needs, the third the protocol and preset. The same bug gives the same three
names whatever raw input found it; two bugs differ in at least one. The frames are real functions,
compiled once per name, that call each other and raise.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import NoReturn

_made: dict[tuple[str, str, str], Callable[[BaseException], NoReturn]] = {}
MAX_NAME = 80


def frame_name(prefix: str, text: str) -> str:
    """`text` as a Python identifier after `prefix` (long texts keep their start and a digest, so two
    texts never share a name by being cut)."""
    ident = re.sub(r"\W+", "_", text).strip("_") or "none"
    name = f"{prefix}__{ident}"
    if len(name) > MAX_NAME:
        name = f"{name[: MAX_NAME - 11]}_{hashlib.sha1(text.encode()).hexdigest()[:10]}"
    return name


def frame_names(cause: str) -> tuple[str, str, str]:
    """(innermost, middle, outer) frame names for a root cause `protocol|preset|kind|cells|knobs`."""
    parts = (cause.split("|") + ["", "", "", "", ""])[:5]
    protocol, preset, kind, cells, knobs = parts
    return (frame_name(f"finding_{kind.replace('-', '_')}", cells), frame_name("needs", knobs),
            frame_name("in", f"{protocol}_{preset}"))


def _named(name: str, body: Callable[[BaseException], NoReturn]) -> Callable[[BaseException], NoReturn]:
    """A function called `name` (its code object says so, which is what a traceback prints) that runs `body`."""
    def frame(exc: BaseException) -> NoReturn:
        body(exc)

    frame.__code__ = frame.__code__.replace(co_name=name, co_qualname=name)
    frame.__name__ = frame.__qualname__ = name
    return frame


def raiser(cause: str) -> Callable[[BaseException], NoReturn]:
    """The three-frame chain for `cause`: calling it raises its argument from the innermost frame."""
    inner, middle, outer = frame_names(cause)
    key = (inner, middle, outer)
    if key not in _made:
        # each frame must appear in the traceback: the innermost raises itself, not through a helper
        def innermost(exc: BaseException) -> NoReturn:
            raise exc

        innermost.__code__ = innermost.__code__.replace(co_name=inner, co_qualname=inner)
        mid = _named(middle, innermost)
        _made[key] = _named(outer, mid)
    return _made[key]


def raise_finding(cause: str, exc: BaseException) -> NoReturn:
    """Raise `exc` from the three frames that name `cause`."""
    raiser(cause)(exc)
    raise AssertionError("unreachable")  # pragma: no cover - raiser always raises
