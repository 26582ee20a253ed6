"""The measured tables of the docs, rendered from bench/*.json while the site builds (an MkDocs hook).

A page asks for a table with a marker line of its own, `<!-- bench: NAME -->`; the build replaces it
with the table NAME renders from the files it names, headed by when and where those figures were
measured (the file's own date and machine, else bench/provenance.json's record). Figures are never
pasted into a page, so a page cannot drift from the data; an unknown NAME or a missing field fails the
build. The renderers are the bench scripts' own wherever a script has one.

    python bench/docs_tables.py NAME     # print one table (the names: python bench/docs_tables.py)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
MARKER = re.compile(r"^<!-- bench: ([a-z0-9-]+) -->$", re.M)


def _load(name: str) -> Any:
    return json.loads((BENCH / name).read_text())


def _rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (BENCH / name).read_text().splitlines() if x.strip()]


def _script(name: str) -> Any:
    """A bench script as a module (its renderers), imported the way it runs: bench/ and the root on the path."""
    for p in (str(ROOT), str(BENCH)):
        if p not in sys.path:
            sys.path.insert(0, p)
    return __import__(name)


def _stamp(source: str, doc: Any = None, how: str = "") -> str:
    """'Measured DATE on MACHINE (by HOW; data: bench/SOURCE).' from the data itself or the provenance record."""
    prov = _load("provenance.json").get(source, {})
    own = doc if isinstance(doc, dict) else {}
    date = own.get("date") or prov.get("date")
    machine = own.get("machine") or prov.get("machine")
    if not date or not machine:
        raise KeyError(f"bench/{source}: no date or machine recorded (add them to bench/provenance.json)")
    how = how or prov.get("command", "")
    return f"*Measured {date} on {machine}" + (f", by `{how}`" if how else "") + f"; data: `bench/{source}`.*\n\n"


def results() -> str:
    out = _load("results.json")
    return "*Data: `bench/results.json`, by `make bench`.*\n\n" + _script("run").render(out)


def search_deep() -> str:
    """The deep zoo's headline: median seconds / executions per fuzzer, RMST, the ratio and A12 against random."""
    deep, lf = _load("search-deep.json"), _load("search-deep-libfuzzer.json")
    budget = deep["config"]["budget"]
    head = ["bug", "guided", "random", "sampler", "libFuzzer", "guided RMST s", "random RMST s",
            "random (RMST or median) / guided median", "A12 guided (p)", "A12 sampler"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]

    def cell(r: dict[str, Any]) -> str:
        cens = ">" if r["found"] * 2 <= r["trials"] else ""
        return f"{cens}{r['median_seconds']} s / {cens}{r['median_execs']:,.0f} ({r['found']}/{r['trials']})"

    for bug, row in deep["summary"].items():
        g, r, s = row["guided"], row["random"], row["sampler"]
        rnd = r["rmst_seconds"] if r["found"] * 2 <= r["trials"] else r["median_seconds"]
        lines.append(f"| `{bug}` | {cell(g)} | {cell(r)} | {cell(s)} | {cell(lf['summary'][bug]['libfuzzer'])} | "
                     f"{g['rmst_seconds']} | {r['rmst_seconds']} | {rnd / g['median_seconds']:.0f}x | "
                     f"{g['a12_vs_random']:.2f} ({g['p_vs_random']:.0e}) | {s['a12_vs_random']:.2f} |")
    ratios = [(row["random"]["rmst_seconds"] if row["random"]["found"] * 2 <= row["random"]["trials"]
               else row["random"]["median_seconds"]) / row["guided"]["median_seconds"]
              for row in deep["summary"].values()]
    met = sum(x >= 10 for x in ratios)
    found = sum(row["guided"]["found"] == row["guided"]["trials"] for row in deep["summary"].values())
    n = len(ratios)
    return (_stamp("search-deep.json", deep, f"make bench-search BUDGET={budget:g} TRIALS={deep['config']['trials']}")
            + f"{deep['config']['trials']} trials per (bug, fuzzer), {budget:g} s each. {deep['config']['note']}. "
            f"libFuzzer: {lf['config']['note']} (`bench/search-deep-libfuzzer.json`).\n\n"
            "Median seconds / executions to the bug (`>`: more than half of the trials censored at the budget), "
            "found/trials; Kaplan-Meier RMST; Vargha-Delaney A12 (p: Mann-Whitney U) of time-to-bug against random.\n\n"
            + "\n".join(lines) + "\n\n"
            f"Guided found every deep bug in every trial on {found} of {n}; its median time was at least 10x "
            f"below random's (random's RMST where it mostly did not find the bug, capped by the budget) on {met} "
            f"of {n} ({min(ratios):.0f}x to {max(ratios):.0f}x).\n")


def search_sets() -> str:
    """Issue 27's table: both deep sets and the shallow zoo, bounded in executions, each target checked
    against the data (met or missed, with the bugs that miss it), so the page says what the figures say.

    A bug is judged as deep or shallow by the criterion (bench/search.py DEEP_CRITERION) applied to the
    random trials of the same file, not by its name or set: a pair of a deep set that random finds in most
    trials is kept in its set and judged by the shallow zoo's target."""
    d = _load("search-issue27.json")
    c, summ = d["config"], d["summary"]
    cap = c["execs"]
    search = _script("search")
    klass = search.depth(d["trials"], cap)
    declared = {"deep": search.bugs("deep"), "deep2": search.bugs("deep2")}
    sets = {k: [b for b in v if b in summ] for k, v in declared.items()}
    sets["zoo"] = [b for b in summ if b not in sets["deep"] + sets["deep2"]]
    unmeasured = [b for v in declared.values() for b in v if b not in summ]
    # where random never found a deep bug within the cap, its RMST ratio is bounded by the cap: a second
    # file runs random and guided on such bugs to a longer horizon, and the ratio is judged there too
    longer = _load("search-issue27-long.json") if (ROOT / "bench" / "search-issue27-long.json").exists() else None
    long_cap = longer["config"]["execs"] if longer else 0
    # a bug whose 20-trial medians were re-estimated from more trials (same cap): its harness ratio is judged there
    more = _load("search-issue27-40.json") if (ROOT / "bench" / "search-issue27-40.json").exists() else None
    head = ["set", "bug", "guided", "sampler", "random", "libfuzzer-cfl", "random RMST / guided RMST (execs)",
            "A12 guided (execs)", "cfl / guided median"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]

    def cell(r: dict[str, Any]) -> str:
        cens = ">" if r["found"] * 2 <= r["trials"] else ""
        return f"{cens}{r['median_execs']:,.0f} ({r['found']}/{r['trials']})"

    miss: dict[str, list[str]] = {k: [] for k in ("found", "sampler", "random10", "a12", "zoo2x", "cfl3x")}
    for name, bugs in sets.items():
        for bug in bugs:
            row = summ[bug]
            g, s, r, lf = row["guided"], row["sampler"], row["random"], row["libfuzzer-cfl"]
            ratio = r["rmst_execs"] / g["rmst_execs"]
            shown = f"{ratio:.1f}x"
            lrow = longer["summary"].get(bug, {}) if longer else {}
            if "guided" in lrow and "random" in lrow:
                ratio = lrow["random"]["rmst_execs"] / lrow["guided"]["rmst_execs"]
                shown += f" ({ratio:.1f}x at {long_cap:,})"
            cfl = lf["median_execs"] / max(g["median_execs"], 1)
            cfl_shown = f"{cfl:.1f}x"
            mrow = more["summary"].get(bug, {}) if more else {}
            if "guided" in mrow and "libfuzzer-cfl" in mrow:
                cfl = mrow["libfuzzer-cfl"]["median_execs"] / max(mrow["guided"]["median_execs"], 1)
                cfl_shown += f" ({cfl:.1f}x over {mrow['guided']['trials']} trials)"
            shallow = klass[bug] == "shallow"
            label = name if name == "zoo" or not shallow else f"{name} (shallow)"
            lines.append(f"| {label} | `{bug}` | {cell(g)} | {cell(s)} | {cell(r)} | {cell(lf)} | {shown} | "
                         f"{g['a12_execs_vs_random']:.2f} | {cfl_shown} |")
            if shallow:
                if g["rmst_execs"] > 2 * r["rmst_execs"]:
                    miss["zoo2x"].append(bug)
                continue
            for key, bad in (("found", g["found"] * 20 < 19 * g["trials"]),
                             ("sampler", g["median_execs"] >= s["median_execs"]), ("random10", ratio < 10),
                             ("a12", g["a12_execs_vs_random"] < 0.71), ("cfl3x", cfl > 3)):
                if bad:
                    miss[key].append(bug)
    what = {"found": "every deep bug of both sets found in >= 19/20 trials",
            "sampler": "guided's median executions below the sampler's on each deep bug",
            "random10": f"random's RMST >= 10x guided's on each deep bug (random censored at {cap:,} executions, "
                        "so a ratio is at most the cap over guided's RMST; where random found a bug in no trial "
                        f"within the cap, both ran again to {long_cap:,} executions and that ratio is judged: "
                        "`bench/search-issue27-long.json`)" if longer else
                        f"random's RMST >= 10x guided's on each deep bug (random censored at {cap:,} executions, "
                        "so a ratio is at most the cap over guided's RMST)",
            "a12": "A12 >= 0.71 against random on each deep bug",
            "zoo2x": "shallow bugs (the zoo and the deep sets' shallow ones): guided's RMST within 2x of random's",
            "cfl3x": "the ClusterFuzzLite harness within 3x of guided's median executions on each deep bug"
                     + (" (where both were re-run with more trials, `bench/search-issue27-40.json`, judged on those "
                        "medians)" if more else "")}
    checks = [f"- {what[k]}: " + ("met" if not v else f"**missed** on {len(v)} ({', '.join(f'`{b}`' for b in v)})")
              for k, v in miss.items()]
    moved = [b for k in ("deep", "deep2") for b in sets[k] if klass[b] == "shallow"]
    deep_n = sum(klass[b] == "deep" for k in ("deep", "deep2") for b in sets[k])
    rule = (f"Which bugs are deep is decided by a criterion that looks at random only: {search.DEEP_CRITERION}, "
            f"from this file's random trials. By it {deep_n} bugs of the two deep sets are deep"
            + (f"; {', '.join(f'`{b}`' for b in moved)} (marked shallow) keep their pairs in their set but are "
               "judged by the shallow target" if moved else "") + "."
            + (f" Declared in a deep set but not in this file yet (no figures, no class): "
               f"{', '.join(f'`{b}`' for b in unmeasured)}." if unmeasured else ""))
    return (_stamp("search-issue27.json", d, f"python bench/search.py --set all --trials {c['trials']} "
                   f"--execs {cap} --budget {c['budget']:g} --jobs {c['jobs']}")
            + f"{c['trials']} trials per (bug, fuzzer) from nothing, at most {cap:,} executions each. {c['note']}.\n\n"
            "Median executions to the bug (`>`: more than half of the trials censored), found/trials; the ratio "
            "of Kaplan-Meier RMSTs in executions; Vargha-Delaney A12 of executions against random; the "
            "ClusterFuzzLite harness's median over guided's.\n\n" + rule + "\n\n" + "\n".join(lines)
            + "\n\nIssue 27's targets, "
            "checked against these figures when this page was built:\n\n" + "\n".join(checks) + "\n")


def search_throughput() -> str:
    """The guided engine's --jobs scaling and a long run's decay (each row carries its date and machine)."""
    return "*Data: `bench/search_throughput.json`, by `bench/search_throughput.py`.*\n\n" + \
        _script("search_throughput").render(_load("search_throughput.json"))


def ab() -> str:
    """Issue 31's rates against older trees, both trees measured in one invocation on one machine."""
    doc, guided = _load("throughput_ab.json"), _load("guided_ab.json")
    stamp = _stamp("throughput_ab.json", doc, f"bench/throughput_ab.py --base {doc['base'].split()[0]} "
                                              f"--repeat {doc['repeat']} --parallel {doc['parallel']}")
    stamp += _stamp("guided_ab.json", guided, f"bench/guided_ab.py --base {guided['base'].split()[0]} "
                                              f"--steps {guided['steps']} --repeat {guided['repeat']}")
    return stamp + _script("throughput_ab").render(doc, guided)


def search_zoo() -> str:
    zoo = _load("search-zoo.json")
    return (_stamp("search-zoo.json", zoo, f"bench/search.py --budget {zoo['config']['budget']:g}")
            + _script("search").render(zoo))


def depth() -> str:
    d = _load("depth.json")
    dates = sorted({t["date"] for t in d.values()})
    return (_stamp("depth.json", {"date": " and ".join(dates)},
                   "python bench/depth.py --seeds 20 --cap 10000 --stop-when-decided NAME...")
            + _script("depth").render(d))


def minimization() -> str:
    m = _load("minimization.json")
    lines = ["| finding | minimizer | input bytes | shape (channels, QPs, tokens, epochs, slot bytes, overtakes) "
             "| time |", "| --- | --- | --- | --- | --- |"]
    keys = ("channels", "qps", "tokens", "epochs", "slot_bytes", "overtakes")
    for name, label in (("fuzz_found", "fuzz-found (seed 5)"), ("noisy_661", "noisy #661 (tests/quality)")):
        for step, what in (("found", "as found"), ("libfuzzer_minimize_crash", "libFuzzer -minimize_crash"),
                           ("epfuzz_minimize", "epfuzz minimize")):
            r = m[name][step]
            shape = ", ".join(str(r["shape"][k]) for k in keys)
            secs = f"{r['seconds']} s" if "seconds" in r else ""
            lines.append(f"| {label if step == 'found' else ''} | {what} | {r['bytes']} | {shape} | {secs} |")
    return _stamp("minimization.json", m, "python bench/minimization.py") + "\n".join(lines) + "\n"


def soak() -> str:
    s = _load("soak.json")
    each = round(s["total_seconds"] / max(1, len(s["rows"])))
    lines = [f"{s['total_seconds']} s in all, {s['jobs']} libFuzzer jobs, each fixed protocol for about {each} s.",
             "", "| fixed protocol | execs | exec/s | findings | hung | RSS MB (2nd quarter -> last quarter, peak) |",
             "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| `{r['protocol']}` | {r['execs']:,} | {r['exec_per_s']} | {r['findings']} | {r['hung']} | "
              f"{r['rss_mid_mb']} -> {r['rss_end_mb']}, {r['peak_rss_mb']:.0f} |" for r in s["rows"]]
    grew = max(r["peak_rss_mb"] - r["rss_mid_mb"] for r in s["rows"])
    pct = max((r["peak_rss_mb"] - r["rss_mid_mb"]) / r["rss_mid_mb"] for r in s["rows"])
    lines += ["", f"Peak RSS at most {grew:.0f} MB ({pct:.0%}) above the second quarter's in any run; "
              f"{sum(r['findings'] for r in s['rows'])} findings, {sum(r['hung'] for r in s['rows'])} hung."]
    return _stamp("soak.json", s, "make soak") + "\n".join(lines) + "\n"


def fixed_budget() -> str:
    text = (BENCH / "fixed_budget.md").read_text()
    # rows are measured in parts, on several days and hosts: each row names its own, the stamp their span
    dates = sorted(set(re.findall(r"\| (\d{4}-\d{2}-\d{2}) \|", text)))
    machines = sorted(set(re.findall(r"\| \d{4}-\d{2}-\d{2} \| ([^|]+?) \|$", text, re.M)))
    span = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}" if dates else None
    table = "\n".join(x for x in text.splitlines() if x.startswith("|"))
    return (_stamp("fixed_budget.md", {"date": span, "machine": "; ".join(machines) or None},
                   "python bench/fixed_budget.py") + text.splitlines()[0] + "\n\n" + table + "\n")


def litmus() -> str:
    return _stamp("cuda/litmus.jsonl") + _script("cuda_litmus").markdown(_rows("cuda/litmus.jsonl"))


def agreement() -> str:
    table = _script("cuda_agreement").cmd_table(BENCH / "cuda/agreement-sim.jsonl",
                                                [BENCH / "cuda/agreement-cuda.jsonl",
                                                 BENCH / "cuda/agreement-cuda-plan.jsonl"],
                                                BENCH / "cuda/agreement-verbs.jsonl")
    return "".join(_stamp(f"cuda/agreement-{k}.jsonl") for k in ("sim", "cuda", "verbs")) + table + "\n"


def safety() -> str:
    """Computed, not measured: exhaustive exploration of small litmus scenarios, rerun at every build."""
    from epfuzz.triage.safety import markdown, table

    header, body = table()
    return "*Computed by `epfuzz safety-table` when this site was built (exhaustive, deterministic).*\n\n" + \
        markdown(header, body) + "\n"


TABLES: dict[str, Callable[[], str]] = {
    "results": results, "search-deep": search_deep, "search-sets": search_sets,
    "search-throughput": search_throughput, "search-zoo": search_zoo, "depth": depth,
    "minimization": minimization, "soak": soak, "fixed-budget": fixed_budget, "litmus": litmus,
    "agreement": agreement, "safety": safety, "ab": ab,
}


def render_page(markdown: str) -> str:
    """Every marker of a page replaced by its table (an unknown name raises: the build fails)."""
    def one(m: re.Match[str]) -> str:
        if m.group(1) not in TABLES:
            raise KeyError(f"unknown bench table {m.group(1)!r}; known: {', '.join(TABLES)}")
        return TABLES[m.group(1)]().rstrip("\n")
    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:  # the MkDocs hook (mkdocs.yml: hooks)
    return render_page(markdown)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Print one measured table of the docs, rendered from bench/*.json.",
                                 epilog="names: " + ", ".join(TABLES))
    ap.add_argument("name", nargs="?", choices=tuple(TABLES), metavar="NAME", help="the table (see the names below)")
    a = ap.parse_args(argv)
    if a.name is None:  # the way to list the names (the module's docstring says so)
        ap.error("which table? names: " + ", ".join(TABLES))
    print(TABLES[a.name]())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
