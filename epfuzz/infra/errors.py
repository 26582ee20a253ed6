"""Exception types, kept apart so callers can tell a protocol bug from an epfuzz bug.

A `Finding` means the protocol under test let the receiver accept bytes that were
not yet the current epoch's payload: that is the product working. A `HarnessError`
means epfuzz itself misbehaved (an invariant of the emulator broke): that is a bug
to fix here, and the CLI exits with a different code for it. `InputError` covers
everything a user can get wrong (bad JSON, out-of-range field, unknown backend).
"""

from __future__ import annotations

from typing import Any, Protocol


class Summarized(Protocol):
    """What a `Finding` needs of the oracle's `Violation`. Named structurally so this
    module, imported by nearly every other, imports none of them (no import circle)."""

    def summary(self) -> str: ...


class EpfuzzError(Exception):
    """Base of every error epfuzz raises on purpose."""


class InputError(EpfuzzError):
    """User input was wrong; the message is one line and names the culprit. `path`: the file it is about, where
    it is about one (a JSON log's error event has it as its own field: ops trial 1205 item 5)."""

    def __init__(self, message: str = "", path: object = None) -> None:
        super().__init__(message)
        self.path = str(path) if path is not None and str(path) else None


class ScenarioError(InputError):
    """A scenario field is missing, mistyped or out of range."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"scenario field {field!r}: {message}")
        self.field = field


class BackendUnavailable(InputError):
    """The requested backend cannot run on this host; the message says why."""


class Unsupported(InputError):
    """This backend cannot express this scenario (e.g. host atomics the hardware lacks): skip it."""


class ProtocolError(EpfuzzError):
    """The protocol plug-in broke the API (an op outside the layout): a bug in the protocol's code,
    not a finding about its ordering, and not epfuzz's; the message names the op."""


class HarnessError(EpfuzzError):
    """epfuzz broke one of its own invariants: a bug in the tool, not the protocol."""


class Finding(Exception):
    """The receiver accepted an unfinished buffer (or never completed).

    Deliberately not an `EpfuzzError`: code that catches tool errors must never
    swallow a finding by accident.
    """

    def __init__(self, violation: Summarized, scenario: Any = None) -> None:
        super().__init__(violation.summary())
        self.violation = violation
        self.scenario = scenario
