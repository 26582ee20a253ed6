"""The atheris entry point shared by every `harnesses/*_fuzzer.py`.

libFuzzer owns argv; we take our own `--backend=`, `--preset=`, `--keep-going`
and `--findings-dir=` out of it first (or read EPFUZZ_BACKEND, EPFUZZ_PRESET,
EPFUZZ_KEEP_GOING, EPFUZZ_FINDINGS_DIR). By default a finding is a crash, so
libFuzzer saves the input under -artifact_prefix like any OSS-Fuzz target; with
--keep-going (what `epfuzz fuzz` uses) each new bug signature is written as a
case file and fuzzing continues, so one run can report several bugs.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from epfuzz import codec
from epfuzz.backends import get_backend
from epfuzz.backends.base import Outcome, Where
from epfuzz.diskspace import NoSpace
from epfuzz.errors import BackendUnavailable, EpfuzzError, Finding, ProtocolError, Unsupported
from epfuzz.findings import one_line_json, replay_command, signature, write_finding
from epfuzz.protocols import REGISTRY, get_protocol
from epfuzz.scenario import Scenario


def _backend_asked(argv: Sequence[str]) -> str:
    """The backend this process fuzzes on, from its argv or the environment libFuzzer's children get."""
    named = [a.split("=", 1)[1] for a in argv if a.startswith("--backend=")]
    return named[-1] if named else os.environ.get("EPFUZZ_BACKEND", "sim")


# atheris instruments what a harness script imports with this module. The emulator (and the
# semantic feedback read off its runs) only where it runs: instrumenting them is a third of a
# verbs campaign's start-up in the TCG guest (tens of seconds), for code no verbs input reaches
if _backend_asked(sys.argv) == "sim":
    import epfuzz.backends.sim  # noqa: F401
    import epfuzz.feedback  # noqa: F401
    import epfuzz.sim.engine  # noqa: F401
else:  # what the other backends' runners call (imported there later, uninstrumented otherwise)
    import epfuzz.epoch  # noqa: F401
    import epfuzz.protocols.opcheck  # noqa: F401
# the registry imports a protocol's family on first use, which would be after the harness script's
# instrumented import: every built-in family is imported now, while atheris instruments (issue 28)
_ = REGISTRY.items


class Harness:
    def __init__(self, protocol: str, preset: str = "spec", backend: str = "sim",
                 keep_going: bool = False, findings_dir: Path | None = None) -> None:
        self.proto = get_protocol(protocol)
        self.protocol = protocol
        self.preset = preset
        self.backend = get_backend(backend)   # fails at once, with the reason, if it cannot run
        if self.backend.where() is Where.GUEST:
            raise BackendUnavailable(f"backend {backend}: it runs only inside the soft-RoCE guest from here; "
                                     f"`epfuzz fuzz HARNESS --backend {backend}` runs this harness there")
        self.keep_going = keep_going
        self.findings_dir = findings_dir or Path(".")
        self.seen: set[str] = set()
        self.counters: Any = None   # epfuzz.feedback.Counters when semantic feedback is on (EPFUZZ_FEEDBACK)
        codec.decode(b"", protocol, preset)  # unknown preset/protocol fails before fuzzing

    def test_one_input(self, data: bytes) -> None:
        scn = codec.decode(data, self.protocol, self.preset)
        try:
            outcome = self.backend.run(scn, self.proto)
        except Unsupported:  # a scenario this backend cannot express: nothing to learn from it
            return
        except SystemExit as e:  # the plug-in's sys.exit(): a crash with its line, not the job's quiet end
            raise ProtocolError(f"protocol {self.protocol!r} called sys.exit({e.code!r})") from e
        if self.counters is not None and self.backend.name == "sim":
            from epfuzz.feedback import features

            self.counters.emit(features(outcome.detail))
        if outcome.violation is None:
            return
        sig = signature(scn, outcome, self.proto)
        if self.keep_going and sig in self.seen:
            return
        self.seen.add(sig)
        try:
            path = write_finding(self.findings_dir, scn, data, outcome, self.proto)
        except NoSpace as e:  # the campaign reads this line, stops every job and prints its summary
            sys.stderr.write(f"epfuzz: {e}\n")
            sys.stderr.flush()
            os._exit(2)
        alarm = "" if self.proto.expected(scn) != "clean" else (  # "": no promise here
            f"  FALSE ALARM: {self.protocol} is expected clean; this is a bug in the model\n")
        sys.stderr.write(
            f"\n=== epfuzz finding: {outcome.violation.summary()}\n{alarm}"
            f"  signature: {sig}\n"
            f"  replay: {replay_command(path, self.backend.name)}\n"
            f"  scenario: {one_line_json(scn)}\n")
        sys.stderr.flush()
        if not self.keep_going:
            self.crash(scn, outcome, sig)

    def crash(self, scn: Scenario, outcome: Outcome, sig: str) -> NoReturn:
        """Stop on the finding as a crash whose innermost three frames name its root cause
        (`epfuzz.triage.identity`): ClusterFuzz dedups Python crashes by those names."""
        from epfuzz.triage.group import cause_of
        from epfuzz.triage.identity import raise_finding

        assert outcome.violation is not None
        cause = (cause_of(scn, self.proto) if self.backend.deterministic else None) or sig
        raise_finding(cause, Finding(outcome.violation, scn))


def split_args(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    ours: dict[str, str] = {}
    rest: list[str] = []
    for a in argv:
        if a.startswith("--") and a[2:].split("=")[0] in ("backend", "preset", "keep-going", "findings-dir"):
            key, _, val = a[2:].partition("=")
            ours[key] = val or "1"
        else:
            rest.append(a)
    return ours, rest


def main(protocol: str, argv: Sequence[str] | None = None) -> None:
    import atheris

    argv = list(sys.argv if argv is None else argv)
    ours, rest = split_args(argv)
    # children that libFuzzer spawns (-minimize_crash, -fork, -merge) get only its own
    # flags, so hand ours down through the environment
    for key, env in (("backend", "EPFUZZ_BACKEND"), ("preset", "EPFUZZ_PRESET"),
                     ("keep-going", "EPFUZZ_KEEP_GOING"), ("findings-dir", "EPFUZZ_FINDINGS_DIR")):
        if key in ours:
            os.environ[env] = ours[key]
    # finding cases go where libFuzzer puts its artifacts (-artifact_prefix, or the folder of
    # -exact_artifact_path as -minimize_crash uses), else the working directory
    prefix = next((a.split("=", 1)[1] for a in rest
                   if a.startswith(("-artifact_prefix=", "-exact_artifact_path="))), "")
    default_dir = Path(os.path.dirname(prefix) or ".")
    try:
        harness = Harness(
            protocol,
            preset=ours.get("preset") or os.environ.get("EPFUZZ_PRESET", "spec"),
            backend=ours.get("backend") or os.environ.get("EPFUZZ_BACKEND", "sim"),
            keep_going=bool(ours.get("keep-going") or os.environ.get("EPFUZZ_KEEP_GOING")),
            findings_dir=Path(ours.get("findings-dir") or os.environ.get("EPFUZZ_FINDINGS_DIR")
                              or default_dir),
        )
    except EpfuzzError as e:
        sys.stderr.write(f"epfuzz: {e}\n")
        raise SystemExit(2) from None
    # the children libFuzzer spawns name their own artifact paths (relative ones, for
    # -minimize_crash): they write their cases where this process does
    os.environ["EPFUZZ_FINDINGS_DIR"] = str(harness.findings_dir.resolve())
    # libFuzzer re-executes argv[0] through the shell for -minimize_crash, -fork and
    # -merge; a .py file is not executable on its own, so name the interpreter too.
    rest[0] = shlex.join([sys.executable, os.path.abspath(rest[0])])
    # full-length inputs from the start: a short input decodes to the simplest scenario
    if not any(a.startswith("-max_len=") for a in rest):
        rest.append("-max_len=256")
    if not any(a.startswith("-len_control=") for a in rest):
        rest.append("-len_control=0")
    kwargs = {}
    if not os.environ.get("EPFUZZ_PLAIN_MUTATOR"):
        from epfuzz.mutator import make_mutator
        guided = bool(os.environ.get("EPFUZZ_FEEDBACK"))
        kwargs["custom_mutator"] = make_mutator(codec.decoder_for(harness.protocol, harness.preset),
                                                schedule_move(harness) if guided else None)
    if os.environ.get("EPFUZZ_FEEDBACK"):  # semantic features as coverage (counters reserved before Setup)
        from epfuzz.feedback import Counters

        harness.counters = Counters()
    # libFuzzer installs its SIGINT handler (final stats, clean exit) only where none is set; Python's
    # would raise KeyboardInterrupt inside the mutator instead, with a traceback and no stats
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    atheris.Setup(rest, harness.test_one_input, **kwargs)
    atheris.Fuzz()


def schedule_move(harness: Harness) -> Any:
    """The schedule sampler as a mutator move (sim backend: it builds the arrival order)."""
    if harness.backend.name != "sim":
        return None
    from epfuzz.sampler import mutate_schedule

    def move(data: bytes, rng: Any) -> bytes:
        try:
            return mutate_schedule(data, harness.protocol, harness.proto, rng, harness.preset)
        except Exception:  # noqa: BLE001 - a mutator must never stop the fuzzer; fall back to the input
            return data

    return move
