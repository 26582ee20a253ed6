"""The atheris entry point shared by every `harnesses/*_fuzzer.py`.

libFuzzer owns argv; we take our own `--backend=`, `--preset=`, `--keep-going`
and `--findings-dir=` out of it first (or read EPFUZZ_BACKEND, EPFUZZ_PRESET,
EPFUZZ_KEEP_GOING, EPFUZZ_FINDINGS_DIR). By default a finding is a crash, so
libFuzzer saves the input under -artifact_prefix like any OSS-Fuzz target; with
--keep-going (what `epfuzz fuzz` uses) each new bug signature is written as a
case file and fuzzing continues, so one run can report several bugs.

`main("module:Attr", sys.argv)` in a harness file of one's own fuzzes a plug-in protocol: the file names it
in code, so it is imported (from the current folder or the harness file's, then sys.path) as `--protocol`
imports it; the inputs libFuzzer feeds are bytes and never name code.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from epfuzz.backends import get_backend
from epfuzz.backends.base import Outcome, Where
from epfuzz.continuous.targets import home_preset
from epfuzz.encoding import codec
from epfuzz.infra.diskspace import NoSpace
from epfuzz.infra.errors import BackendUnavailable, EpfuzzError, Finding, ProtocolError, Unsupported
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import get_protocol, load_plugin
from epfuzz.search.sink import FindingSink
from epfuzz.triage.findings import signature


def _backend_asked(argv: Sequence[str]) -> str:
    """The backend this process fuzzes on, from its argv or the environment libFuzzer's children get."""
    named = [a.split("=", 1)[1] for a in argv if a.startswith("--backend=")]
    return named[-1] if named else os.environ.get("EPFUZZ_BACKEND", "sim")


#: nothing of epfuzz is line-instrumented (issue 34.2: what atheris instrumented used to depend on
#: whether `import epfuzz` ran before `atheris.instrument_imports`, i.e. on the entry point). On the sim
#: the coverage libFuzzer sees is the semantic features (epfuzz.search.feedbacks, as counters), the
#: same whichever way the harness starts; and the compiled emulator runs under atheris too (epfuzz.core.native).
class Harness:
    def __init__(self, protocol: str, preset: str | None = None, backend: str = "sim",
                 keep_going: bool = False, findings_dir: Path | None = None, case_path: Path | None = None) -> None:
        """`preset`: None is the protocol's home preset, as the entry point and `epfuzz fuzz` take it (it was
        "spec": a library caller of a tma_flag Harness fuzzed where its bug is not, ops trial 1205)."""
        self.proto = get_protocol(protocol)
        self.protocol = protocol
        self.preset = preset or home_preset(protocol)
        self.backend = get_backend(backend)   # fails at once, with the reason, if it cannot run
        #: the sim itself (not a subclass): `test_one_input` runs the emulator and makes the outcome only for a
        #: finding (its text summary and culprit rules cost ~3% of a clean execution, issue 31)
        self.lean = False
        if self.backend.name == "sim":
            from epfuzz.backends.sim import SimBackend, outcome_of
            from epfuzz.sim.engine import simulate

            self.lean = type(self.backend) is SimBackend
            self._simulate, self._outcome_of = simulate, outcome_of
        if self.backend.where() is Where.GUEST:
            raise BackendUnavailable(f"backend {backend}: it runs only inside the soft-RoCE guest from here; "
                                     f"`epfuzz fuzz HARNESS --backend {backend}` runs this harness there")
        self.keep_going = keep_going
        self.findings_dir = findings_dir or Path(".")
        self.sink = FindingSink(self.findings_dir, protocol, self.proto, self.backend.name)
        #: under -minimize_crash: the one case file every step's crash replaces (`minimized_case_path`)
        self.case_path = case_path
        self.counters: Any = None   # epfuzz.search.feedbacks.Counters (the sim's features as coverage)
        self.steer: Any = None      # epfuzz.search.engines.libfuzzer.Steer (the guided search in the mutator)
        codec.decode(b"", protocol, self.preset)  # unknown preset/protocol fails before fuzzing

    def test_one_input(self, data: bytes) -> None:
        scn = codec.decode(data, self.protocol, self.preset)
        try:
            if self.lean:  # `SimBackend.run` less the outcome's summary and culprit rules, made only for a finding
                run = self._simulate(scn, self.proto)
                outcome = self._outcome_of(run) if run.violation is not None else None
            else:
                outcome = self.backend.run(scn, self.proto)
                run = outcome.detail
        except Unsupported:  # a scenario this backend cannot express: nothing to learn from it
            return
        except SystemExit as e:  # the plug-in's sys.exit(): a crash with its line, not the job's quiet end
            raise ProtocolError(f"protocol {self.protocol!r} called sys.exit({e.code!r})") from e
        if self.counters is not None and self.backend.name == "sim":
            feats = self.counters.features(run)
            self.counters.emit(feats)
            if self.steer is not None:   # the mutator's corpus sees every execution, as the guided engine does
                self.steer.observe(data, run, feats, scn)   # `scn` decoded once, here
        if outcome is None or outcome.violation is None:
            return
        try:
            path = self.sink.offer(scn, data, outcome) if self.case_path is None else self.replace_case(scn, data,
                                                                                                         outcome)
        except NoSpace as e:  # the campaign reads this line, stops every job and prints its summary
            sys.stderr.write(f"epfuzz: {e}\n")
            sys.stderr.flush()
            os._exit(2)
        if path is None and self.keep_going:
            return
        if not self.keep_going:
            self.crash(scn, outcome, signature(scn, outcome, self.proto))

    def replace_case(self, scn: Scenario, data: bytes, outcome: Outcome) -> Path:
        """The case of this crash at `case_path`, whatever case was there: -minimize_crash runs one child per
        step, each crashing on a smaller input, and each wrote a case of its own (14 beside one minimized
        artifact); the last step's crash is the minimized input, so the file left is its case. Written to
        `case_path` alone: through the folder's `finding-<protocol>-<digest>.json` it replaced, then renamed
        away, the original run's case of the same scenario (the first step re-runs the crash given)."""
        from epfuzz.cases.corpus import write_atomic
        from epfuzz.triage.findings import finding_case, replay_command

        assert self.case_path is not None and outcome.violation is not None
        write_atomic(self.case_path, finding_case(scn, data, outcome, self.proto).to_json().encode())
        self.sink.console.finding(outcome.violation.summary(), replay_command(self.case_path, self.backend.name), "")
        return self.case_path

    def crash(self, scn: Scenario, outcome: Outcome, sig: str) -> NoReturn:
        """Stop on the finding as a crash whose innermost three frames name its root cause
        (`epfuzz.triage.identity`): ClusterFuzz dedups Python crashes by those names."""
        from epfuzz.triage.findings import epfuzz_command
        from epfuzz.triage.group import cause_of
        from epfuzz.triage.identity import raise_finding

        assert outcome.violation is not None
        cause = (cause_of(scn, self.proto) if self.backend.deterministic else None) or sig
        # the input libFuzzer is about to write (or ClusterFuzz keeps as a testcase) is all an operator gets: the
        # case file of the replay line above stays on the fuzzing machine (operator trial 1205, item 2)
        flags = "" if self.preset == home_preset(self.protocol) else f" --preset {self.preset}"
        flags += "" if self.backend.name == "sim" else f" --backend {self.backend.name}"
        sys.stderr.write(f"epfuzz: the crash input replays with: {epfuzz_command()} run --protocol "
                         f"{shlex.quote(self.protocol)}{flags} CRASH_INPUT\n")
        sys.stderr.flush()
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


#: the folder a plug-in's module was imported from by the process that started this one (a corpus merge, whose
#: libFuzzer child runs in a scratch folder): on sys.path while the module is imported, and only then
PLUGIN_FOLDER_ENV = "EPFUZZ_PLUGIN_FOLDER"

#: the case file a -minimize_crash run's steps share (set by the run, read by its children)
MINIMIZED_CASE_ENV = "EPFUZZ_MINIMIZED_CASE"


def minimized_case_path(protocol: str, rest: Sequence[str], findings_dir: Path) -> Path | None:
    """Under `-minimize_crash=1 CRASH`: the one case file its steps write, named after the input given
    (`finding-<protocol>-minimized-from-<sha1>.json`, as libFuzzer names its artifacts); else None."""
    from epfuzz.cases.corpus import file_stem, sha1

    if "-minimize_crash=1" not in rest:
        return None
    inputs = [a for a in rest[1:] if not a.startswith("-")]
    if len(inputs) != 1 or not os.path.isfile(inputs[0]):
        return None  # libFuzzer refuses it, with its own line
    digest = sha1(Path(inputs[0]).read_bytes())
    return findings_dir.resolve() / f"finding-{file_stem(protocol)}-minimized-from-{digest}.json"


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
    findings_dir = Path(ours.get("findings-dir") or os.environ.get("EPFUZZ_FINDINGS_DIR") or default_dir)
    minimized = minimized_case_path(protocol, rest, findings_dir)
    if minimized is not None:  # the children that run each step read it from here
        os.environ[MINIMIZED_CASE_ENV] = str(minimized)
    try:
        if ":" in protocol:  # a harness file names its plug-in in code: its author named it, as --protocol does
            folder = os.environ.get(PLUGIN_FOLDER_ENV)
            load_plugin(protocol, Path(folder) if folder else None)
        harness = Harness(
            protocol,
            preset=ours.get("preset") or os.environ.get("EPFUZZ_PRESET") or home_preset(protocol),
            backend=ours.get("backend") or os.environ.get("EPFUZZ_BACKEND", "sim"),
            keep_going=bool(ours.get("keep-going") or os.environ.get("EPFUZZ_KEEP_GOING")),
            findings_dir=findings_dir,
            case_path=Path(os.environ[MINIMIZED_CASE_ENV]) if os.environ.get(MINIMIZED_CASE_ENV) else None,
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
    sim = harness.backend.name == "sim"
    if sim:  # the semantic features as coverage (counters reserved before Setup)
        from epfuzz.search.feedbacks import Counters

        harness.counters = Counters()
    if not os.environ.get("EPFUZZ_PLAIN_MUTATOR"):  # the move registry (epfuzz.search.moves) as custom mutator
        from epfuzz.search.engines.libfuzzer import Steer, mutator
        from epfuzz.search.moves import Context

        # on the sim it mutates the guided engine's pick (Steer, fed by test_one_input); elsewhere libFuzzer's
        harness.steer = Steer(harness.protocol, harness.proto, harness.preset) if sim else None
        kwargs["custom_mutator"] = mutator(Context(harness.protocol, harness.proto, harness.preset, sim=sim),
                                           steer=harness.steer)
    # libFuzzer installs its SIGINT handler (final stats, clean exit) only where none is set; Python's
    # would raise KeyboardInterrupt inside the mutator instead, with a traceback and no stats
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    from epfuzz.core import native
    from epfuzz.infra.proc import tune_gc

    # one line before libFuzzer's own: which emulator this target runs (a bundle built without the
    # compiled core runs ~2.5-3x slower; the local build and its test read this line)
    sys.stderr.write(f"epfuzz harness: emulator {native.running()}\n")
    sys.stderr.flush()
    tune_gc()
    atheris.Setup(rest, harness.test_one_input, **kwargs)
    atheris.Fuzz()


if __name__ == "__main__":  # a CI step `python -m epfuzz.continuous.harness` printed nothing and exited 0 (trial 1205)
    sys.stderr.write("epfuzz: epfuzz.continuous.harness is the harnesses' library, not a target: run a harness "
                     "file (harnesses/<protocol>_fuzzer.py; `epfuzz list` says where an install keeps them)\n")
    sys.exit(2)
