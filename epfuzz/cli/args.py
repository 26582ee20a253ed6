"""The `epfuzz` command line: every option with its help text, errors in one line (exit 2)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from epfuzz.backends import NAMES as BACKENDS
from epfuzz.ir.presets import PRESETS
from epfuzz.triage.group import MAX_STEPS

EXIT_INPUT = 2
DESCRIPTION = """Fault-injection fuzzing for GPU expert-parallel write-then-signal protocols.

Exit codes: 0 clean, 1 finding (or a replayed verdict changed), 2 usage or input
error, 3 harness error (a bug in epfuzz itself; --debug or EPFUZZ_DEBUG=1 shows the
traceback), 130/143 stopped by SIGINT/SIGTERM (after writing what it had).
A PATH may be `-` for stdin.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        sys.stderr.write(f"epfuzz: {message} (see {self.prog} --help)\n")   # the command's own help
        raise SystemExit(EXIT_INPUT)


def _positive(kind: type) -> object:
    """An argparse type for a count or a duration that must be above zero (a --jobs 0 run
    crashed; a --time 0 one fuzzed anyway)."""
    def parse(text: str) -> object:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not v > 0:
            raise argparse.ArgumentTypeError(f"{text} must be above 0")
        return v
    parse.__name__ = kind.__name__
    return parse


def _rate(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not a rate in (0, 1]")
    return v


def _common(sp: argparse.ArgumentParser, backend: bool = True) -> None:
    sp.add_argument("--protocol", help="protocol of a raw fuzz input (default: from its folder name, "
                                       "corpus/<protocol>_fuzzer/); a case or scenario file runs as the protocol "
                                       "it names, and one naming another protocol is refused")
    sp.add_argument("--preset", default=None, choices=list(PRESETS),
                    help="platform preset a raw fuzz input is decoded under (default: the protocol's home preset, "
                         "the one its harness and epfuzz fuzz decode under: spec for all but the NVLink and device "
                         "bugs, epfuzz list)")
    sp.add_argument("--raw", action="store_true",
                    help="read PATH as raw fuzz bytes even if it holds a JSON case or scenario")
    _allow(sp)
    if backend:
        sp.add_argument("--backend", default="sim", choices=BACKENDS,
                        help="where to run: sim (emulator, default), verbs (RDMA), cuda (GPUs); see epfuzz list")
    sp.add_argument("-v", "--verbose", action="store_true", help="also print the scenario JSON (replay: every file)")


def _allow(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--allow-plugins", action="append", default=[], metavar="PATH",
                    help="let cases name plug-in protocols (module:Attr) whose module is in this folder (or is "
                         "this .py file); repeatable. Without it a case runs only built-in protocols and the "
                         "one --protocol names: a case file never imports code (hardening.md of the documentation, "
                         "which epfuzz list locates)")


def _add_run_commands(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("run", help="run one scenario (JSON, case or raw input): verdict and trace summary")
    r.add_argument("path", help="case file, scenario JSON, raw fuzz input or crash artifact, or - for stdin")
    r.add_argument("--repeats", type=_positive(int), default=1, help="repetitions (nondeterministic backends)")
    _common(r)

    rp = sub.add_parser("replay", help="replay cases and corpus inputs against their expected verdicts; "
                                       "fail if one changed")
    rp.add_argument("paths", nargs="+", help="case files, corpus folders, or a run folder (its cases)")
    rp.add_argument("--strict", action="store_true",
                    help="also fail (exit 1) when an input has no expected verdict (make replay uses this)")
    _common(rp)

    ls = sub.add_parser("list", help="harnesses, protocols, presets, backends (and why one cannot run)")
    ls.add_argument("--presets", action="store_true",
                    help="only the presets: each platform knob, pinned (its value) or free (the values fuzzed)")

    fz = sub.add_parser("fuzz", help="fuzz a harness for a bounded time; summarise the bugs found")
    fz.add_argument("harness", nargs="?", help="a harness name (epfuzz list), or omit with --protocol")
    fz.add_argument("--protocol", help="fuzz your own protocol: module:Attr (a Protocol instance or class)")
    fz.add_argument("--time", type=_positive(int), default=60, help="seconds (default 60)")
    fz.add_argument("--max-execs", type=_positive(int), metavar="N",
                    help="also stop after N executions (each job's: guided, and libfuzzer as -runs=N): "
                         "a bound that does not depend on the machine's speed; --time still caps it")
    fz.add_argument("--jobs", type=_positive(int), default=1,
                    help="worker processes sharing one corpus through the run folder (default 1)")
    fz.add_argument("--backend", default="sim", choices=BACKENDS,
                    help="where each input runs: sim (default), verbs (in the soft-RoCE guest here), cuda")
    fz.add_argument("--preset", default=None,
                    help=f"platform preset: which NIC/fabric knobs are pinned ({', '.join(PRESETS)}; default: the "
                         "protocol's home preset, spec for all but the NVLink and device bugs, `epfuzz list`)")
    fz.add_argument("--engine", choices=("guided", "libfuzzer"),
                    help="guided (the default on the sim backend): the in-process search with semantic feedback "
                         "and the schedule sampler; libfuzzer (the default elsewhere, and with libFuzzer flags "
                         "after --): the atheris harness, one process per job (search.md of the documentation, which "
                         "epfuzz list locates)")
    fz.add_argument("--feedback", action="append", default=[], metavar="MODULE:ATTR",
                    help="guided: add a feedback (a epfuzz.search.feedbacks.Feedback, or a list), or `lines` "
                         "(line coverage); imported because named; repeatable")
    fz.add_argument("--moves", action="append", default=[], metavar="MODULE:ATTR",
                    help="guided: add moves (a epfuzz.search.moves.Move, or a list); imported because named; "
                         "repeatable")
    fz.add_argument("--seed", type=int, help="libFuzzer -seed of job 0 (others: seed+job); guided: its RNG seed")
    fz.add_argument("--run-dir", help="where to write the run (default runs/<harness>-guided-<time>; "
                                           "libfuzzer: runs/<harness>-<time>)")
    fz.add_argument("libfuzzer", nargs="*", help="after --: flags passed to libFuzzer")


def _add_analysis_commands(sub: argparse._SubParsersAction) -> None:
    ex = sub.add_parser("explore", help="enumerate every allowed visibility order of a small scenario")
    ex.add_argument("path", help="case file, scenario JSON or raw input (- for stdin)")
    ex.add_argument("--max-states", type=_positive(int), default=500_000, help="give up above this many states")
    _common(ex, backend=False)

    mn = sub.add_parser("minimize", help="shrink a finding to a 1-minimal scenario; write it as a case")
    mn.add_argument("path", help="case file, scenario JSON or raw input (- for stdin)")
    mn.add_argument("-o", "--output", help="case file to write (default runs/minimized/<protocol>-min-<digest>.json); "
                                           "an existing one is refused unless --force")
    mn.add_argument("--force", action="store_true", help="overwrite the -o file if it exists")
    mn.add_argument("--repeats", type=_positive(int), default=5, help="runs per candidate on nondeterministic backends")
    mn.add_argument("--threshold", type=_rate, default=0.5, help="minimum reproduction rate to keep a candidate")
    mn.add_argument("--max-seconds", type=_positive(float), help="stop early and keep the smallest reproducer so far")
    _common(mn)

    xp = sub.add_parser("explain", help="timeline, rule cells and knobs behind a finding (sim)")
    xp.add_argument("path", help="case file, scenario JSON or raw input (- for stdin)")
    xp.add_argument("--plot", help="also draw the timeline to this PNG or SVG file (needs matplotlib)")
    _common(xp, backend=False)

    rp = sub.add_parser("repair", help="the smallest protocol edits that make a finding impossible, with their proof")
    rp.add_argument("path", help="case file, scenario JSON or raw input (- for stdin)")
    rp.add_argument("--max-edits", type=_positive(int), default=1, help="largest set of edits tried (default 1)")
    rp.add_argument("--edits", help="prove exactly these comma-separated edits (a reported proof's replay)")
    rp.add_argument("--campaign-execs", type=int, default=2000,
                    help="guided executions on each repaired protocol (default 2000; 0: none)")
    rp.add_argument("--max-states", type=_positive(int), default=200_000, help="explore's state budget per scenario")
    _common(rp, backend=False)

    sub.add_parser("safety-table", help="which signal x MR x atomic mode x fence x QP x flush READ combinations "
                                        "are unsafe under each preset (exhaustive, small litmus scenarios)")


def _add_upkeep_commands(sub: argparse._SubParsersAction, plugin: bool = False) -> None:
    """`plugin`: the corpus command line gives --protocol, which stands for the harness: no HARNESS word."""
    co = sub.add_parser("corpus", help="merge or prune a corpus by coverage (libFuzzer -merge=1; inputs that "
                                       "trigger a finding are always kept), or pin its verdicts (manifest)")
    cos = co.add_subparsers(dest="action", required=True, parser_class=_Parser, metavar="ACTION")
    cm = cos.add_parser("merge", help="add the inputs of SOURCE... that add coverage (or a finding) to DEST")
    cp = cos.add_parser("prune", help="keep DEST's coverage-adding and finding inputs only")
    cv = cos.add_parser("manifest", help="write DEST.verdicts beside DEST: the sim verdict of each input, which "
                        "`replay --strict` then checks (what `make seeds` writes for the built-in corpora)")
    cv.add_argument("--preset", help="the preset the verdicts hold for: the one `replay` is given "
                                     "(default: the protocol's home preset, where replay decodes raw inputs)")
    for sp in (cm, cp, cv):
        if plugin:
            sp.set_defaults(harness=None)
        else:
            sp.add_argument("harness", help="the harness whose coverage counts (epfuzz list), or omit with --protocol")
        sp.add_argument("dest", help="corpus folder to add to (merge), to shrink (prune) or to pin (manifest)")
        sp.add_argument("--protocol", metavar="MODULE:ATTR",
                        help="your own protocol's corpus (a plug-in, as fuzz --protocol): in place of HARNESS")
    cm.add_argument("sources", nargs="+", help="folders whose coverage-adding inputs are added")

    tr = sub.add_parser("triage", help="group a run's findings by root cause and update its bugs/ and bugs.csv; "
                        "--keep copies one minimized case per new root cause")
    tr.add_argument("run_dir", help="an epfuzz fuzz run folder (or any folder of finding cases)")
    tr.add_argument("--keep", help="folder to write new representatives to (e.g. corpus/regressions)")
    tr.add_argument("--protocol",
                    help="the plug-in protocol the run's findings name (a plug-in's run is not grouped without it "
                         "or --allow-plugins: a case never imports code); also the protocol of raw crash-* "
                         "artifacts in the folder")
    tr.add_argument("--preset", default=None, choices=list(PRESETS),
                    help="preset of raw crash-* artifacts (default: their protocol's home preset, as for run)")
    tr.add_argument("--max-steps", type=_positive(int), default=MAX_STEPS,
                    help=f"bound on candidates tried and explorations made in all (default {MAX_STEPS:,}); "
                         "findings past it are listed as not grouped yet")
    _allow(tr)

    rp2 = sub.add_parser("report", help="exec/s and coverage over time, bugs by root cause (markdown + PNG)")
    rp2.add_argument("run_dir", help="an epfuzz fuzz run folder (has progress.csv)")
    rp2.add_argument("--no-png", action="store_true", help="write report.md only")

    vmp = sub.add_parser("vm", help="the soft-RoCE QEMU guest the verbs backend runs in: build, run -- CMD, shell")
    vmp.add_argument("action", choices=("build", "run", "shell"),
                     help="build: the guest image (cached); run -- CMD: one command in it; shell: interactive")
    vmp.add_argument("rest", nargs=argparse.REMAINDER, help="run: -- and the command to run in the guest")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("epfuzz")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def build_parser(plugin_corpus: bool = False) -> argparse.ArgumentParser:
    p = _Parser(prog="epfuzz", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--log-format", choices=("human", "json"), default="human",
                   help="log lines for people (default, on any stream) or JSON lines for programs")
    p.add_argument("--log-json", action="store_true", help="the same as --log-format json")
    p.add_argument("--debug", action="store_true", help="print the traceback of an unexpected error (exit 3)")
    loud = p.add_mutually_exclusive_group()
    loud.add_argument("-q", "--quiet", action="store_true",
                      help="the summary and the bug table only: no progress line, no line per raw finding, only "
                           "warnings and errors in the log")
    loud.add_argument("-v", "--verbose", dest="log_verbose", action="store_true",
                      help="debug lines in the log too (each bug's and the summary's events, among others)")
    p.add_argument("--version", action="version", version=f"epfuzz {_version()}")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser, metavar="COMMAND")
    _add_run_commands(sub)
    _add_analysis_commands(sub)
    _add_upkeep_commands(sub, plugin_corpus)
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    """`epfuzz fuzz HARNESS [options] -- LIBFUZZER FLAGS`: argparse cannot give a second positional
    list after the options, so for fuzz what follows `--` is split off first (vm run keeps its `--`).
    The command is the first word that is no option and no option's value (`--log-format json list`)."""
    words = list(argv)
    if "--log-format" in words[:-1]:  # its value is not the command
        i = words.index("--log-format")
        words[i:i + 2] = []
    cmd = next((t for t in words if not t.startswith("-")), "")
    known = ("-h", "--help", "--log-json", "--debug", "--version", "-q", "--quiet", "-v", "--verbose")
    unknown = [t for t in words if t.startswith("-") and t not in known and not t.startswith("--log-format=")]
    if not cmd and unknown:  # argparse would only say a COMMAND is missing
        build_parser().error(f"unrecognized arguments: {' '.join(unknown)}")
    # `-q` after the command (`epfuzz fuzz X -q`) means what it means before it: no command has a -q of its
    # own, and a user trial was told "unrecognized arguments"; words after a `--` are not epfuzz's
    stop = argv.index("--") if "--" in argv else len(argv)
    if cmd and any(t in ("-q", "--quiet") for t in argv[:stop]):
        head = [t for t in argv[:stop] if t not in ("-q", "--quiet")]
        argv = ["--quiet", *head, *argv[stop:]]
    extra: list[str] = []
    if cmd == "fuzz" and "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    plugin_corpus = cmd == "corpus" and any(t == "--protocol" or t.startswith("--protocol=") for t in argv)
    a, rest = build_parser(plugin_corpus).parse_known_args(argv)
    if rest:  # the top parser's error said `see epfuzz --help`: point at the help of the command that was given
        prog = " ".join(["epfuzz", a.cmd, *([a.action] if getattr(a, "action", None) else [])])
        _Parser(prog=prog).error(f"unrecognized arguments: {' '.join(rest)}")
    if extra:
        a.libfuzzer = [*a.libfuzzer, *extra]
    return a


def asks_json(words: list[str]) -> bool:
    """Whether the command line asks for JSON lines, read before argparse: its usage errors come before the
    parsed options would configure logging, and were plain lines under `--log-format json` (fixer's leftover)."""
    stop = words.index("--") if "--" in words else len(words)
    head = words[:stop]
    pairs = zip(head, head[1:])
    return ("--log-json" in head or "--log-format=json" in head
            or any(a == "--log-format" and b == "json" for a, b in pairs))
