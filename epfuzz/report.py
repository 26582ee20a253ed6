"""`epfuzz report RUN_DIR`: exec/s and coverage over time, findings by signature (markdown + PNG)."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from epfuzz.corpus import load_case
from epfuzz.errors import InputError


def load_series(run_dir: Path) -> list[dict[str, float]]:
    path = run_dir / "progress.csv"
    if not path.exists():
        raise InputError(f"{run_dir}: no progress.csv (not an epfuzz fuzz run folder?)")
    with path.open() as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def report(run_dir: Path, png: bool = True) -> tuple[str, Path | None]:
    rows = load_series(run_dir)
    sigs: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for p in sorted(run_dir.glob("finding-*.json")):
        try:
            c = load_case(p)
        except InputError:
            continue
        sigs[c.signature] += 1
        examples.setdefault(c.signature, p.name)
    last = rows[-1] if rows else {}
    md = [f"# epfuzz run {run_dir.name}", "",
          f"- duration: {last.get('seconds', 0):.0f} s, executions: {last.get('execs', 0):.0f} "
          f"({last.get('exec_per_s', 0):.0f} exec/s), coverage: {last.get('cov', 0):.0f}, "
          f"corpus: {last.get('corpus', 0):.0f}",
          f"- peak RSS (all jobs): {max((r['rss_mb'] for r in rows), default=0):.0f} MB", "",
          "| seconds | execs | exec/s | coverage | corpus | findings | RSS MB |",
          "| --- | --- | --- | --- | --- | --- | --- |"]
    step = max(1, len(rows) // 12)
    for r in rows[::step]:
        md.append(f"| {r['seconds']:.0f} | {r['execs']:.0f} | {r['exec_per_s']:.0f} | {r['cov']:.0f} | "
                  f"{r['corpus']:.0f} | {r['findings']:.0f} | {r['rss_mb']:.0f} |")
    md += ["", "## Findings by signature", ""]
    if sigs:
        md += ["| signature | files | example |", "| --- | --- | --- |"]
        md += [f"| `{s}` | {n} | {examples[s]} |" for s, n in sigs.most_common()]
    else:
        md.append("none")
    text = "\n".join(md) + "\n"
    (run_dir / "report.md").write_text(text)
    out_png = None
    if png and rows:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        t = [r["seconds"] for r in rows]
        fig, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
        axes[0].plot(t, [r["exec_per_s"] for r in rows])
        axes[0].set_ylabel("exec/s")
        axes[1].plot(t, [r["cov"] for r in rows], label="coverage")
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
