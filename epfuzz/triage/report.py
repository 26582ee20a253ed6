"""`epfuzz report RUN_DIR`: exec/s and features (coverage) over time, bugs by root cause (markdown + PNG)."""

from __future__ import annotations

import csv
import sys
from collections import Counter
from pathlib import Path

from epfuzz.cases.corpus import load_case, write_atomic
from epfuzz.infra.errors import InputError
from epfuzz.triage.findings import case_protocol, triage_command

COLUMNS = ("seconds", "execs", "exec_per_s", "cov", "corpus", "findings", "rss_mb")


def load_series(run_dir: Path) -> list[dict[str, float]]:
    """progress.csv's rows; a row cut short (a run killed mid-write, a full disk) is skipped and counted
    on stderr, a file that is no progress.csv at all is one line, exit 2 (a truncated one was exit 3)."""
    path = run_dir / "progress.csv"
    if not path.exists():
        raise InputError(f"{run_dir}: no progress.csv (not an epfuzz fuzz run folder?)", path=run_dir)
    try:
        with path.open(newline="", errors="replace") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames is None or not set(COLUMNS) <= set(reader.fieldnames):
                raise InputError(f"{path}: not a progress.csv (its header is not {','.join(COLUMNS)})", path=path)
            rows, bad = [], 0
            for row in reader:
                try:
                    rows.append({k: float(row[k]) for k in COLUMNS})
                except (TypeError, ValueError):
                    bad += 1
    except (OSError, csv.Error) as e:
        raise InputError(f"{path}: cannot read: {e}", path=path) from None
    if bad:
        sys.stderr.write(f"epfuzz: {path}: skipped {bad} row(s) cut short or garbled\n")
    return rows


def _bugs(run_dir: Path) -> list[tuple[str, int, str]]:
    """(root cause, raw findings, example case): the fuzz summary's table (bugs.csv), or for an older
    run folder the raw signatures of its finding cases."""
    index = run_dir / "bugs.csv"
    if index.exists():
        out, bad = [], 0
        try:
            with index.open(newline="", errors="replace") as f:
                for r in csv.DictReader(f):
                    try:
                        out.append((str(r["root_cause"]), int(r["count"]), Path(str(r["case"])).name))
                    except (KeyError, TypeError, ValueError):
                        bad += 1
        except (OSError, csv.Error) as e:
            raise InputError(f"{index}: cannot read: {e}", path=index) from None
        if bad:
            sys.stderr.write(f"epfuzz: {index}: skipped {bad} row(s) cut short or garbled\n")
        return out
    sigs: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for p in sorted(run_dir.glob("finding-*.json")):
        try:
            c = load_case(p)
        except InputError:
            continue
        sigs[c.signature] += 1
        examples.setdefault(c.signature, p.name)
    return [(s, n, examples[s]) for s, n in sigs.most_common()]


def _unaccounted(run_dir: Path) -> list[str]:
    """Said under "none": the raw findings in the folder that no bug groups and ungrouped.txt does not
    list, with the command that groups them. An older triage emptied bugs.csv when a plug-in did not load,
    and report said "none" of a run with 18 findings (an author's trial); whether ungrouped.txt exists said
    nothing of which findings it lists (a stale one hid them all), nor of whether there is a bugs.csv."""
    left = run_dir / "ungrouped.txt"
    listed = set(left.read_text(errors="replace").splitlines()[1:]) if left.exists() else set()
    raw = [p for p in sorted(run_dir.glob("finding-*.json")) if p.name not in listed]
    if not raw:
        return []
    state = "bugs.csv groups none of them" if (run_dir / "bugs.csv").exists() else "there is no bugs.csv"
    return ["", f"but {len(raw)} raw finding(s) (finding-*.json) are in the folder and {state}: "
                f"`{triage_command(run_dir, case_protocol(raw[0]))}` groups them"]


def _incomplete(run_dir: Path) -> list[str]:
    """Said under the totals of a run that never reached its summary: every engine writes `stats.json` as its
    run ends (after a signal or a full disk too, where there is room), so a run folder without one was killed
    (SIGKILL, the OOM killer, a machine lost); a SIGKILLed run read as finished (ops trial 1205 item 9)."""
    if (run_dir / "stats.json").exists():
        return []
    raw = sorted(run_dir.glob("finding-*.json"))
    group = "" if not raw or (run_dir / "bugs.csv").exists() else (
        f"; its raw findings are not grouped: `{triage_command(run_dir, case_protocol(raw[0]))}` groups them")
    return ["- **incomplete**: the run did not reach its summary (no stats.json, which every engine writes as its "
            "run ends: it was killed, by SIGKILL or the OOM killer, or its disk filled); the totals are its last "
            f"progress row's{group}"]


def report(run_dir: Path, png: bool = True) -> tuple[str, Path | None]:
    rows = load_series(run_dir)
    bugs = _bugs(run_dir)
    last = rows[-1] if rows else {}
    md = [f"# epfuzz run {run_dir.name}", "",
          f"- duration: {last.get('seconds', 0):.0f} s, executions: {last.get('execs', 0):.0f} "
          f"({last.get('exec_per_s', 0):.0f} exec/s), features: {last.get('cov', 0):.0f}, "
          f"corpus: {last.get('corpus', 0):.0f}",
          f"- peak RSS (all jobs): {max((r['rss_mb'] for r in rows), default=0):.0f} MB", *_incomplete(run_dir), "",
          "| seconds | execs | exec/s | features | corpus | findings | RSS MB |",
          "| --- | --- | --- | --- | --- | --- | --- |"]
    step = max(1, len(rows) // 12)
    for r in rows[::step] + ([rows[-1]] if rows and (len(rows) - 1) % step else []):  # always the final row
        md.append(f"| {r['seconds']:.0f} | {r['execs']:.0f} | {r['exec_per_s']:.0f} | {r['cov']:.0f} | "
                  f"{r['corpus']:.0f} | {r['findings']:.0f} | {r['rss_mb']:.0f} |")
    md += ["", "## Findings by root cause", ""]
    if bugs:
        md += ["| root cause | raw findings | example case |", "| --- | --- | --- |"]
        # a root cause is '|'-separated: escaped, or it splits the table's columns
        md += [f"| `{s.replace('|', chr(92) + '|')}` | {n} | {ex} |" for s, n, ex in bugs]
    else:
        md.append("none")
        md += _unaccounted(run_dir)
    left = run_dir / "ungrouped.txt"
    if left.exists():  # what the summary's grouping left: `epfuzz triage RUN` groups it
        why, *names = left.read_text().splitlines()
        spec = case_protocol(run_dir / names[0]) if names else ""  # a plug-in's run needs it named to group
        md += ["", f"{len(names)} raw finding(s) not grouped yet ({why}): `{triage_command(run_dir, spec)}` "
                   "groups them"]
    text = "\n".join(md) + "\n"
    write_atomic(run_dir / "report.md", text.encode())
    out_png = None
    if png and rows:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        t = [r["seconds"] for r in rows]
        fig, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
        axes[0].plot(t, [r["exec_per_s"] for r in rows])
        axes[0].set_ylabel("exec/s")
        axes[1].plot(t, [r["cov"] for r in rows], label="features")
        axes[1].plot(t, [r["corpus"] for r in rows], label="corpus")
        axes[1].legend()
        axes[2].plot(t, [r["rss_mb"] for r in rows], label="RSS MB")
        axes[2].plot(t, [r["findings"] for r in rows], label="findings")
        axes[2].legend()
        axes[2].set_xlabel("seconds")
        fig.suptitle(run_dir.name)
        fig.tight_layout()
        out_png = run_dir / "report.png"
        fig.savefig(out_png)
        plt.close(fig)
    return text, out_png
