"""The `epfuzz` command.

Exit codes: 0 clean, 1 finding (or a replayed verdict changed), 2 usage or input
error, 3 harness error (a bug in epfuzz itself), 128 + signal when stopped.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from epfuzz.backends import Outcome, blind_spot, get_backend
from epfuzz.cases.corpus import Case
from epfuzz.cases.replay import load_any
from epfuzz.cli.args import asks_json, parse
from epfuzz.cli.guard import EXIT_CLEAN, EXIT_FINDING, EXIT_HARNESS, EXIT_INPUT, trust, unexpected
from epfuzz.cli.listing import cmd_list
from epfuzz.cli.replay import cmd_replay
from epfuzz.cli.upkeep import cmd_corpus, cmd_report, cmd_triage, known_harness
from epfuzz.encoding import codec
from epfuzz.infra import log as elog
from epfuzz.infra.errors import EpfuzzError, HarnessError, InputError, ProtocolError
from epfuzz.infra.extras import require
from epfuzz.infra.proc import Stopped
from epfuzz.infra.shipped import docs_page, where_to_keep
from epfuzz.ir.presets import PRESETS
from epfuzz.protocols import REGISTRY, get_protocol, limits
from epfuzz.protocols.registry import describe
from epfuzz.triage.findings import KIND_MEANING, replay_command

if TYPE_CHECKING:
    from epfuzz.campaign.common import Summary

EXIT_PIPE = 128 + signal.SIGPIPE


def percent(rate: float) -> str:
    """Hardware reproduces some findings in a few rounds per thousand: "0%" would read as "never"."""
    return f"{rate:.0%}" if rate == 0 or rate >= 0.01 else f"{rate:.2%}" if rate >= 0.0001 else f"{rate:.4%}"


def protocol_label(spec: str) -> str:
    """A plug-in's own `name` beside the `module:Attr` it was loaded by: the name its author knows."""
    name = get_protocol(spec).name
    return spec if name in ("", spec) else f"{spec} ({name!r})"


def _print_outcome(case: Case, out: Outcome, verbose: bool) -> None:
    scn = case.scenario
    print(f"{case.name}: {out.verdict} (protocol {protocol_label(scn.protocol)}, preset {scn.preset}, "
          f"backend {out.backend}, scenario {scn.digest()})")
    if out.runs > 1:
        print(f"  reproduced in {out.hits} of {out.runs} runs ({percent(out.rate)})")
    if out.violation is not None:
        print(f"  {out.violation.summary()}")
        kind = out.violation.kind  # the summary's wording is one for every kind: the kind is said
        print(f"  kind: {kind}" + (f": {KIND_MEANING[kind]}" if kind in KIND_MEANING else ""))
        if out.violation.bad_chunks:
            print("  bad chunks: " + ", ".join(f"{o}:{c}" for o, c in out.violation.bad_chunks[:8]))
    if out.summary:
        for line in out.summary.splitlines():
            print(f"  {line}")
    if verbose:
        print(scn.to_json())


def cmd_run(a: argparse.Namespace) -> int:
    case = load_any(Path(a.path), a.protocol, a.preset, a.raw)
    backend = get_backend(a.backend if a.backend != "sim" else case.backend)  # the case's backend, as replay
    try:
        out = backend.run(case.scenario, get_protocol(case.scenario.protocol), repeats=a.repeats)
    except (limits.OverLimit, MemoryError) as e:
        if isinstance(e, MemoryError) and not REGISTRY.where(e):
            raise  # epfuzz's own allocation: the machine's limit, not the plug-in's finding
        scn = case.scenario
        kind, what = (e.kind, str(e)) if isinstance(e, limits.OverLimit) else ("oom", f"MemoryError{REGISTRY.where(e)}")
        print(f"{case.name}: {kind} (protocol {protocol_label(scn.protocol)}, preset {scn.preset}, "
              f"backend {backend.name}, scenario {scn.digest()})\n  {what}")
        return EXIT_FINDING
    _print_outcome(case, out, a.verbose)
    if out.violation is None and (note := blind_spot(backend, case.scenario)):  # a fix, or what it never shows?
        print(f"  {note}")
    elog.get_logger().debug("run", scenario=case.scenario.digest(), protocol=case.scenario.protocol,
                           preset=case.scenario.preset, backend=backend.name, verdict=out.verdict)
    return EXIT_FINDING if out.violation else EXIT_CLEAN


#: --jobs above this many times the machine's cores is refused: each job is a process of its own, and 1000 of them
#: on 2 cores (a pip trial) only thrashed, and took minutes to stop
JOBS_PER_CORE = 4


def cmd_fuzz(a: argparse.Namespace) -> int:
    from epfuzz.campaign.libfuzzer import fuzz

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1  # usable
    if a.jobs > JOBS_PER_CORE * cores:
        raise InputError(f"--jobs {a.jobs} is more than {JOBS_PER_CORE} x this machine's {cores} core(s), "
                         f"{JOBS_PER_CORE * cores}: each job is a process; give --jobs {cores} (one per core)")
    if a.harness:
        known_harness(a.harness)
    get_backend(a.backend)  # fail at once if it cannot run here
    if a.preset is None:  # the protocol's home preset (where its bug lives); spec for a name not known yet
        from epfuzz.continuous.targets import harness_protocol, home_preset

        a.preset = home_preset(a.protocol or (harness_protocol(a.harness) if a.harness else ""))
    if a.preset not in PRESETS:
        raise InputError(f"unknown preset {a.preset!r}; known: {', '.join(PRESETS)}")
    if a.harness and a.protocol:
        raise InputError(f"name a harness ({a.harness}) or give --protocol ({a.protocol}), not both")
    engine = a.engine or ("guided" if a.backend == "sim" and not a.libfuzzer else "libfuzzer")
    if engine == "guided":
        s = _fuzz_guided(a)
    else:
        if a.feedback or a.moves:
            raise InputError("--feedback and --moves are parts of the guided engine (--engine guided)")
        extra = list(a.libfuzzer)
        if a.max_execs and not any(x.startswith("-runs=") for x in extra):
            extra.append(f"-runs={a.max_execs}")
        s = fuzz(a.harness, a.time, jobs=a.jobs, backend=a.backend, preset=a.preset, extra=extra,
                 run_dir=Path(a.run_dir) if a.run_dir else None, seed=a.seed, protocol=a.protocol)
    print(s.render())
    if getattr(s, "disk_full", ""):  # the summary is out; the reason is the last word (exit 2)
        print(f"epfuzz: {s.disk_full}", file=sys.stderr)
        return EXIT_INPUT
    if s.interrupted:
        return 128 + s.interrupted
    if s.harness_errors:
        return EXIT_HARNESS
    return EXIT_FINDING if s.findings or getattr(s, "resource", None) else EXIT_CLEAN


def _fuzz_guided(a: argparse.Namespace) -> Summary:
    from epfuzz.campaign.guided import fuzz_guided

    if a.backend != "sim":
        raise InputError(f"--engine guided drives the sim backend only (its feedback is the emulator's trace), "
                         f"not {a.backend}; use --engine libfuzzer")
    if a.libfuzzer:
        raise InputError("--engine guided takes no libFuzzer flags (nothing after --); use --engine libfuzzer")
    if not a.harness and not a.protocol:
        raise InputError("name a harness or protocol, or give --protocol module:Attr")
    return fuzz_guided(a.harness, a.time, preset=a.preset, run_dir=Path(a.run_dir) if a.run_dir else None,
                       seed=a.seed, protocol=a.protocol, jobs=a.jobs, feedback=a.feedback, moves=a.moves,
                       max_execs=a.max_execs)


def cmd_explore(a: argparse.Namespace) -> int:
    from epfuzz.sim.explore import explore
    from epfuzz.triage.minimize import too_large_to_explore

    case = load_any(Path(a.path), a.protocol, a.preset, a.raw)
    proto = get_protocol(case.scenario.protocol)
    try:
        res = explore(case.scenario, proto, max_states=a.max_states)
    except InputError as e:  # about this case: name it (new-user trial item 7), and a route that works for it
        raise InputError(f"{a.path}: {too_large_to_explore(str(e), case.scenario, proto)}", path=a.path) from None
    print("search bounded by: " + "; ".join(res.bounds))
    if res.violation:
        print(f"reachable: {res.violation.summary()} ({res.states} states explored)")
        print(f"  visibility order (TLP seqs): {res.order}")
        return EXIT_FINDING
    print(f"unreachable: no visibility order allowed by the rules accepts an unfinished buffer "
          f"({res.states} states explored)")
    return EXIT_CLEAN


def cmd_repair(a: argparse.Namespace) -> int:
    from epfuzz.repair.text import command
    return command(a)


def cmd_minimize(a: argparse.Namespace) -> int:
    from epfuzz.cases.corpus import Exists, write_atomic
    from epfuzz.triage.findings import file_stem, signature
    from epfuzz.triage.minimize import minimize

    taken = f"-o {a.output}: the file exists; --force overwrites it"
    if a.output and not a.force and os.path.lexists(a.output):  # refused before the work, not after it
        raise InputError(taken)
    if a.output:
        in_folder("-o", Path(a.output))
    case = load_any(Path(a.path), a.protocol, a.preset, a.raw)
    proto = get_protocol(case.scenario.protocol)
    m = minimize(case.scenario, proto, backend=a.backend, repeats=a.repeats, threshold=a.threshold,
                 max_seconds=a.max_seconds)
    res, out = m.result, m.outcome
    before, after = m.sizes()
    name = f"{file_stem(res.protocol)}-min-{res.digest()}"  # a plug-in's `:` is no file-name character
    path = Path(a.output) if a.output else Path("runs", "minimized", f"{name}.json")
    new = Case(name, res, codec.encode(res), "finding", a.backend,
               out.violation.summary() if out.violation else "", signature(res, out, proto))
    try:
        # -o names the user's file: kept unless --force; the default name is the result's digest, so the
        # file there already holds this very case
        write_atomic(path, new.to_json().encode(), replace=a.force or not a.output)
    except Exists:  # made while minimize ran
        raise InputError(taken) from None
    print(f"minimized {case.name}: {before} -> {after} input bytes, {m.runs} candidate runs, "
          f"{m.seconds:.2f} s, reproduction rate {percent(m.rate)}")
    print(f"  {out.violation.summary() if out.violation else 'clean'}")
    if not m.complete:
        print("  stopped by --max-seconds: the best case so far, not checked to be 1-minimal")
    print(f"  wrote {path} (scenario JSON + input bytes; {where_to_keep(res.protocol)})")
    print(f"  replay: {replay_command(path, a.backend)}")
    if a.verbose:
        print(res.to_json())
    return EXIT_FINDING


def cmd_explain(a: argparse.Namespace) -> int:
    from epfuzz.triage.explain import explain
    from epfuzz.triage.plot import plot

    if a.plot:
        require("matplotlib", "explain --plot")
    case = load_any(Path(a.path), a.protocol, a.preset, a.raw)
    target = _plot_path(Path(a.plot), case.name) if a.plot else None  # refused before the work, not after
    exp = explain(case.scenario, get_protocol(case.scenario.protocol))
    print(exp.text())
    if target is not None:
        print(f"picture: {plot(exp, target)}")
    return EXIT_FINDING


PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def in_folder(option: str, path: Path) -> None:
    """Refuse an output file whose folder is not there, before the work: a typo (`typo/dir/m.json`,
    `/nonexistent/dir/x.png`) made those folders (pip trial item 4); only the default runs/ is made."""
    parent = path.parent
    if not parent.is_dir():
        what = "is not a folder" if parent.exists() else "does not exist"
        raise InputError(f"{option} {path}: its folder {parent} {what} (nothing is created for you)")


def _plot_path(path: Path, name: str) -> Path:
    """The file `--plot` names: a folder gets `<case>-timeline.png` in it, a name without a suffix
    `.png` (what matplotlib would write, now also what is printed); another suffix is refused (29)."""
    if path.is_dir():
        return path / f"{name}-timeline.png"
    in_folder("--plot", path)
    if not path.suffix:
        return path.with_suffix(".png")
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise InputError(f"--plot {path}: a picture is a {', '.join(PLOT_SUFFIXES)} file, not {path.suffix}")
    return path


def cmd_safety(a: argparse.Namespace) -> int:
    from epfuzz.triage.safety import markdown, table

    header, body = table()
    print(markdown(header, body))
    return EXIT_CLEAN


def cmd_vm(a: argparse.Namespace) -> int:
    from epfuzz.guest import vm

    return vm.main([a.action, *a.rest])


COMMANDS = {"run": cmd_run, "replay": cmd_replay, "list": cmd_list, "fuzz": cmd_fuzz, "explore": cmd_explore,
            "minimize": cmd_minimize, "explain": cmd_explain, "safety-table": cmd_safety, "corpus": cmd_corpus,
            "triage": cmd_triage, "report": cmd_report, "vm": cmd_vm, "repair": cmd_repair}


def _quiet_stdout() -> None:
    """A reader that went away (`| head`): send what is left nowhere, so exit does not complain."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if asks_json(words):
        elog.configure(json_lines=True)
    a = parse(words)
    debug = a.debug or os.environ.get("EPFUZZ_DEBUG", "") not in ("", "0")
    if a.quiet:  # the environment carries it to the campaign's workers and libFuzzer jobs
        os.environ["EPFUZZ_QUIET"] = "1"
    elog.configure(json_lines=a.log_json or a.log_format == "json",
                   level=logging.WARNING if elog.quiet() else logging.DEBUG if a.log_verbose else logging.INFO)
    try:
        trust(a)
        with limits.watch():  # plug-in code runs under per-call time and memory limits (epfuzz.protocols.limits)
            rc = int(COMMANDS[a.cmd](a))
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers, not at exit
        return rc
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_PIPE
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except Stopped as e:  # SIGTERM/SIGHUP during a command that cleans up after itself
        return 128 + e.signum
    except limits.OverLimit as e:  # the plug-in looped, hogged memory or exited: a finding of that kind
        print(f"epfuzz: {e} (a finding of kind {e.kind}; {docs_page('hardening.md')})", file=sys.stderr)
        return EXIT_FINDING
    except SystemExit as e:
        if not REGISTRY.where(e):
            raise
        print(f"epfuzz: protocol error (a bug in the protocol plug-in): {describe(e)}{REGISTRY.where(e)}",
              file=sys.stderr)
        return EXIT_HARNESS
    except HarnessError as e:
        print(f"epfuzz: harness error (a bug in epfuzz): {e}", file=sys.stderr)
        return EXIT_HARNESS
    except ProtocolError as e:
        print(f"epfuzz: protocol error (a bug in the protocol plug-in): {e}", file=sys.stderr)
        return EXIT_HARNESS
    except EpfuzzError as e:  # a JSON log's error event names the file it is about, where there is one
        elog.error_line(str(e), getattr(e, "path", None))
        return EXIT_INPUT
    except Exception as e:
        return unexpected(e, debug, a.cmd)


if __name__ == "__main__":
    raise SystemExit(main())
