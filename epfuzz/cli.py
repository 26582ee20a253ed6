"""The `epfuzz` command.

Exit codes: 0 clean, 1 finding (or a replayed verdict changed), 2 usage or input
error, 3 harness error (a bug in epfuzz itself).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from epfuzz import codec
from epfuzz import log as elog
from epfuzz.backends import NAMES as BACKENDS
from epfuzz.backends import Outcome, get_backend
from epfuzz.corpus import Case, case_paths, load_case, read_input
from epfuzz.errors import EpfuzzError, HarnessError, InputError
from epfuzz.presets import PRESETS
from epfuzz.protocols import REGISTRY, get_protocol

EXIT_CLEAN, EXIT_FINDING, EXIT_INPUT, EXIT_HARNESS = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        sys.stderr.write(f"epfuzz: {message} (see epfuzz --help)\n")
        raise SystemExit(EXIT_INPUT)


def percent(rate: float) -> str:
    """Hardware reproduces some findings in a few rounds per thousand: "0%" would read as "never"."""
    return f"{rate:.0%}" if rate == 0 or rate >= 0.01 else f"{rate:.2%}" if rate >= 0.0001 else f"{rate:.4%}"


def _protocol_from_path(path: Path) -> str | None:
    for part in reversed(path.resolve().parts[:-1]):
        name = part.removesuffix("_fuzzer")
        if name in REGISTRY.items:
            return name
    return None


def load_any(path: Path, protocol: str | None, preset: str) -> Case:
    """A regression case, a scenario JSON, or raw fuzz bytes (protocol from flag or folder)."""
    head = b""
    try:
        with path.open("rb") as f:
            head = f.read(1)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    if path.suffix == ".json" or head == b"{":
        case = load_case(path)
        if protocol and case.scenario.protocol != protocol:
            case = Case(case.name, case.scenario.replace(protocol=protocol), b"", case.expect)
        return case
    proto = protocol or _protocol_from_path(path)
    if proto is None:
        raise InputError(f"{path}: raw fuzz input; say which protocol with --protocol")
    data = read_input(path)
    return Case(path.name, codec.decode(data, proto, preset), data, "")


def _print_outcome(case: Case, out: Outcome, verbose: bool) -> None:
    scn = case.scenario
    print(f"{case.name}: {out.verdict} (protocol {scn.protocol}, preset {scn.preset}, backend {out.backend}, "
          f"scenario {scn.digest()})")
    if out.runs > 1:
        print(f"  reproduced in {out.hits} of {out.runs} runs ({percent(out.rate)})")
    if out.violation is not None:
        print(f"  {out.violation.summary()}")
        if out.violation.bad_chunks:
            print("  bad chunks: " + ", ".join(f"{o}:{c}" for o, c in out.violation.bad_chunks[:8]))
    if out.summary:
        for line in out.summary.splitlines():
            print(f"  {line}")
    if verbose:
        print(scn.to_json())


def cmd_run(a: argparse.Namespace) -> int:
    case = load_any(Path(a.path), a.protocol, a.preset)
    backend = get_backend(a.backend)
    out = backend.run(case.scenario, get_protocol(case.scenario.protocol), repeats=a.repeats)
    _print_outcome(case, out, a.verbose)
    elog.get_logger().debug("run", scenario=case.scenario.digest(), protocol=case.scenario.protocol,
                           preset=case.scenario.preset, backend=backend.name, verdict=out.verdict)
    return EXIT_FINDING if out.violation else EXIT_CLEAN


def cmd_replay(a: argparse.Namespace) -> int:
    log = elog.get_logger()
    paths = case_paths([Path(p) for p in a.paths])
    if not paths:
        print("epfuzz replay: no files found", file=sys.stderr)
        return EXIT_INPUT
    changed = errors = ok = 0
    for path in paths:
        try:
            case = load_any(path, a.protocol, a.preset)
            scn = case.scenario
            proto = get_protocol(scn.protocol)
            out = get_backend(case.backend if case.backend != "sim" else a.backend).run(scn, proto)
        except EpfuzzError as e:
            print(f"error: {e}", file=sys.stderr)
            errors += 1
            continue
        expect = case.expect or ("clean" if proto.expect == "clean" else "")
        if expect and out.verdict != expect:
            changed += 1
            print(f"CHANGED {path}: expected {expect}, got {out.verdict}"
                  + (f" ({out.violation.summary()})" if out.violation else ""))
        else:
            ok += 1
            if a.verbose:
                print(f"ok {path}: {out.verdict}")
        log.debug("replay.case", path=str(path), verdict=out.verdict, expect=expect or None)
    print(f"replayed {ok + changed} case(s): {ok} as expected, {changed} changed, {errors} unreadable")
    if changed:
        return EXIT_FINDING
    return EXIT_INPUT if errors else EXIT_CLEAN


def cmd_list(a: argparse.Namespace) -> int:
    from epfuzz.campaign import harness_names

    print("harnesses:")
    for h in harness_names():
        print(f"  {h}")
    print("protocols:")
    for name, p in REGISTRY.items.items():
        print(f"  {name} [{p.expect}] {p.doc}")
    print("presets:")
    for p in PRESETS.values():
        print(f"  {p.name}: {p.doc}")
    print("backends:")
    for b in BACKENDS:
        ok, why = get_backend(b, require=False).availability()
        print(f"  {b}: {'available' if ok else 'unavailable'}: {why}")
    return EXIT_CLEAN


def cmd_fuzz(a: argparse.Namespace) -> int:
    from epfuzz.campaign import fuzz

    get_backend(a.backend)  # fail at once if it cannot run here
    if a.preset not in PRESETS:
        raise InputError(f"unknown preset {a.preset!r}; known: {', '.join(PRESETS)}")
    s = fuzz(a.harness, a.time, jobs=a.jobs, backend=a.backend, preset=a.preset, extra=a.libfuzzer,
             run_dir=Path(a.run_dir) if a.run_dir else None, seed=a.seed, protocol=a.protocol)
    print(s.render())
    if s.harness_errors:
        return EXIT_HARNESS
    return EXIT_FINDING if s.findings else EXIT_CLEAN


def cmd_explore(a: argparse.Namespace) -> int:
    from epfuzz.sim.explore import explore

    case = load_any(Path(a.path), a.protocol, a.preset)
    res = explore(case.scenario, get_protocol(case.scenario.protocol), max_states=a.max_states)
    if res.violation:
        print(f"reachable: {res.violation.summary()} ({res.states} states explored)")
        print(f"  visibility order (TLP seqs): {res.order}")
        return EXIT_FINDING
    print(f"unreachable: no visibility order allowed by the rules accepts an unfinished buffer "
          f"({res.states} states explored)")
    return EXIT_CLEAN


def cmd_minimize(a: argparse.Namespace) -> int:
    from epfuzz.corpus import write_atomic
    from epfuzz.findings import signature
    from epfuzz.minimize import minimize

    case = load_any(Path(a.path), a.protocol, a.preset)
    proto = get_protocol(case.scenario.protocol)
    m = minimize(case.scenario, proto, backend=a.backend, repeats=a.repeats, threshold=a.threshold,
                 max_seconds=a.max_seconds)
    res, out = m.result, m.outcome
    before, after = m.sizes()
    name = f"{res.protocol}-min-{res.digest()}"
    path = Path(a.output) if a.output else Path(f"{name}.json")
    new = Case(name, res, codec.encode(res), "finding", a.backend,
               out.violation.summary() if out.violation else "", signature(res, out, proto))
    write_atomic(path, new.to_json().encode())
    print(f"minimized {case.name}: {before} -> {after} input bytes, {m.runs} candidate runs, "
          f"{m.seconds:.2f} s, reproduction rate {percent(m.rate)}")
    print(f"  {out.violation.summary() if out.violation else 'clean'}")
    print(f"  wrote {path} (scenario JSON + input bytes; copy into corpus/regressions/ to keep it)")
    print(f"  replay: epfuzz run {path}")
    if a.verbose:
        print(res.to_json())
    return EXIT_FINDING


def cmd_explain(a: argparse.Namespace) -> int:
    from epfuzz.explain import explain, plot

    case = load_any(Path(a.path), a.protocol, a.preset)
    exp = explain(case.scenario, get_protocol(case.scenario.protocol))
    print(exp.text())
    if a.plot:
        print(f"picture: {plot(exp, Path(a.plot))}")
    return EXIT_FINDING


def cmd_safety(a: argparse.Namespace) -> int:
    from epfuzz.safety import markdown, table

    header, body = table()
    print(markdown(header, body))
    return EXIT_CLEAN


def cmd_corpus(a: argparse.Namespace) -> int:
    from epfuzz import maintain

    if a.action == "merge":
        n = maintain.merge(a.harness, Path(a.dest), [Path(p) for p in a.sources])
        print(f"merged {n} input(s) that add coverage into {a.dest}")
    else:
        before, after = maintain.prune(a.harness, Path(a.dest))
        print(f"pruned {a.dest}: {before} -> {after} input(s), coverage kept")
    return EXIT_CLEAN


def cmd_triage(a: argparse.Namespace) -> int:
    from epfuzz import maintain

    groups = maintain.triage(Path(a.run_dir), a.protocol, Path(a.keep) if a.keep else None, a.preset)
    for sig, paths in groups.items():
        print(f"{len(paths):4d}  {sig}")
    print(f"{len(groups)} signature(s)" + (f"; new representatives written to {a.keep}" if a.keep else ""))
    return EXIT_FINDING if groups else EXIT_CLEAN


def cmd_report(a: argparse.Namespace) -> int:
    from epfuzz.report import report

    text, png = report(Path(a.run_dir), png=not a.no_png)
    print(text)
    if png:
        print(f"plot: {png}")
    return EXIT_CLEAN


def cmd_vm(a: argparse.Namespace) -> int:
    from epfuzz import vm

    return vm.main([a.action, *a.rest])


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="epfuzz", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--log-json", action="store_true", help="log JSON lines even on a terminal")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    def common(sp: argparse.ArgumentParser, backend: bool = True) -> None:
        sp.add_argument("--protocol", help="protocol for raw fuzz inputs (default: from the folder name)")
        sp.add_argument("--preset", default="spec", help="preset for raw fuzz inputs")
        if backend:
            sp.add_argument("--backend", default="sim", choices=BACKENDS)
        sp.add_argument("-v", "--verbose", action="store_true")

    r = sub.add_parser("run", help="run one scenario (JSON, case or raw input): verdict and trace summary")
    r.add_argument("path")
    r.add_argument("--repeats", type=int, default=1, help="repetitions (nondeterministic backends)")
    common(r)
    r.set_defaults(fn=cmd_run)

    rp = sub.add_parser("replay", help="replay cases and corpus inputs; fail if a verdict changed")
    rp.add_argument("paths", nargs="+")
    common(rp)
    rp.set_defaults(fn=cmd_replay)

    ls = sub.add_parser("list", help="harnesses, protocols, presets, backends (and why one cannot run)")
    ls.set_defaults(fn=cmd_list)

    fz = sub.add_parser("fuzz", help="fuzz a harness for a bounded time and summarise")
    fz.add_argument("harness", nargs="?", help="a harness name (epfuzz list), or omit with --protocol")
    fz.add_argument("--protocol", help="fuzz your own protocol: module:Attr (a Protocol instance or class)")
    fz.add_argument("--time", type=int, default=60, help="seconds (default 60)")
    fz.add_argument("--jobs", type=int, default=1)
    fz.add_argument("--backend", default="sim", choices=BACKENDS)
    fz.add_argument("--preset", default="spec")
    fz.add_argument("--seed", type=int, help="libFuzzer -seed of job 0 (others: seed+job)")
    fz.add_argument("--run-dir", help="where to write the run (default runs/<harness>-<time>)")
    fz.add_argument("libfuzzer", nargs="*", help="after --: flags passed to libFuzzer")
    fz.set_defaults(fn=cmd_fuzz)

    ex = sub.add_parser("explore", help="enumerate every allowed visibility order of a small scenario")
    ex.add_argument("path")
    ex.add_argument("--max-states", type=int, default=500_000)
    common(ex, backend=False)
    ex.set_defaults(fn=cmd_explore)
    mn = sub.add_parser("minimize", help="shrink a finding to a 1-minimal scenario; write it as a case")
    mn.add_argument("path")
    mn.add_argument("-o", "--output", help="case file to write (default <protocol>-min-<digest>.json)")
    mn.add_argument("--repeats", type=int, default=5, help="runs per candidate on nondeterministic backends")
    mn.add_argument("--threshold", type=float, default=0.5, help="minimum reproduction rate to keep a candidate")
    mn.add_argument("--max-seconds", type=float, help="stop early and keep the smallest reproducer so far")
    common(mn)
    mn.set_defaults(fn=cmd_minimize)

    xp = sub.add_parser("explain", help="timeline, rule cells and knobs behind a finding (sim)")
    xp.add_argument("path")
    xp.add_argument("--plot", help="also draw the timeline to this PNG or SVG file (needs matplotlib)")
    common(xp, backend=False)
    xp.set_defaults(fn=cmd_explain)
    st = sub.add_parser("safety-table", help="which signal x MR x atomic mode x fence x QP combinations are "
                                             "unsafe under each preset (exhaustive, small litmus scenarios)")
    st.set_defaults(fn=cmd_safety)

    co = sub.add_parser("corpus", help="merge or prune a corpus by coverage (libFuzzer -merge=1)")
    co.add_argument("action", choices=("merge", "prune"))
    co.add_argument("harness")
    co.add_argument("dest", help="corpus folder to add to (merge) or to shrink (prune)")
    co.add_argument("sources", nargs="*", help="merge: folders whose coverage-adding inputs are added")
    co.set_defaults(fn=cmd_corpus)

    tr = sub.add_parser("triage", help="group a run's findings by signature; keep one minimized case per group")
    tr.add_argument("run_dir")
    tr.add_argument("--keep", help="folder to write new representatives to (e.g. corpus/regressions)")
    tr.add_argument("--protocol", help="protocol of raw crash-* artifacts in the folder")
    tr.add_argument("--preset", default="spec")
    tr.set_defaults(fn=cmd_triage)

    rp2 = sub.add_parser("report", help="exec/s and coverage over time, findings by signature (markdown + PNG)")
    rp2.add_argument("run_dir")
    rp2.add_argument("--no-png", action="store_true")
    rp2.set_defaults(fn=cmd_report)

    vmp = sub.add_parser("vm", help="the soft-RoCE QEMU guest: build, run -- CMD, shell")
    vmp.add_argument("action", choices=("build", "run", "shell"))
    vmp.add_argument("rest", nargs=argparse.REMAINDER)
    vmp.set_defaults(fn=cmd_vm)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    elog.configure(json_lines=True if a.log_json else None)
    try:
        return int(a.fn(a))
    except HarnessError as e:
        print(f"epfuzz: harness error (a bug in epfuzz): {e}", file=sys.stderr)
        return EXIT_HARNESS
    except EpfuzzError as e:
        print(f"epfuzz: {e}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        return 130
    except json.JSONDecodeError as e:  # pragma: no cover - load paths wrap this already
        print(f"epfuzz: {e}", file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":
    raise SystemExit(main())
