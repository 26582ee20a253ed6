"""What epfuzz cites (a documentation page, a folder of cases) exists in the user's install.

A pip-only trial was sent to "docs/search.md" by `epfuzz fuzz --help` and to "docs/hardening.md" by a
campaign's summary from an empty folder, where no docs/ exists, and nothing said where the installed
package keeps its pages and cases. Run here from an empty folder, with the checkout's copies standing
in for the wheel's (tests/packaging/test_wheel.py checks the wheel's own).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from epfuzz.campaign.common import resource_table
from epfuzz.cli.args import build_parser
from epfuzz.cli.commands import main
from epfuzz.infra.shipped import docs_page, where_to_keep

ROOT = Path(__file__).resolve().parents[2]


def _cited_pages(text: str) -> list[str]:
    """Paths of markdown files (`report.md`, a file a command writes, is no path)."""
    return re.findall(r"[^\s(]*/[^\s(]*\.md\b", text)


def _help_texts(parser) -> list[str]:  # type: ignore[no-untyped-def]
    out = [parser.description or ""]
    for action in parser._actions:
        out.append(action.help or "")
        if isinstance(action.choices, dict):   # a subcommand's own parser
            for sub in action.choices.values():
                out += _help_texts(sub)
    return out


def test_every_page_a_help_text_cites_is_one_this_install_carries_and_list_locates():
    """By name, not path: argparse wraps a long path at its hyphens (site-, newline, packages), and `epfuzz list`
    prints the folder."""
    texts = " ".join(" ".join(_help_texts(build_parser())).split())
    cited = re.findall(r"\(([\w-]+\.md) of the documentation, which epfuzz list locates\)", texts)
    assert sorted(set(cited)) == ["hardening.md", "search.md"], cited   # --allow-plugins (each), fuzz --engine
    assert not re.findall(r"docs/[\w-]+\.md", texts)
    assert all((ROOT / "docs" / page).is_file() for page in cited)


def test_a_summary_cites_the_hardening_page_of_this_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    (line,) = [x for x in resource_table([("hang", Path("in"), "replay")]) if ".md" in x]
    (page,) = _cited_pages(line)
    assert Path(page) == ROOT / "docs" / "hardening.md"
    assert docs_page("no-such-page.md") == "docs/no-such-page.md of epfuzz's sources"


def test_list_says_where_the_docs_the_examples_and_the_cases_are(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]):
    monkeypatch.chdir(tmp_path)
    assert main(["list"]) == 0
    tail = capsys.readouterr().out.split("files this install carries:\n")[1].splitlines()
    assert tail == [f"  documentation: {ROOT / 'docs'}",
                    f"  examples (the tutorial's plug-ins): {ROOT / 'examples'}",
                    f"  cases and seed corpora (regressions/: the pinned cases): {ROOT / 'corpus'}"]


CASE = "corpus/regressions/deepep661-c2b.json"


def test_a_missing_checkout_path_names_this_installs_copy_and_runs_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """The README's `epfuzz run corpus/regressions/...` from a folder without corpus/: one line saying where
    the installed copy is, not a run of that other file."""
    monkeypatch.chdir(tmp_path)
    assert main(["run", CASE]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (f"epfuzz: {CASE}: cannot read: No such file or directory; this install carries it "
                                 f"as {ROOT / CASE}\n")
    assert main(["run", "corpus/regressions/no-such-case.json"]) == 2
    assert "carries" not in capsys.readouterr().err
    assert main(["replay", "corpus/regressions"]) == 2
    assert f"this install carries it as {ROOT / 'corpus/regressions'}" in capsys.readouterr().err


def test_minimize_says_how_to_keep_its_case_where_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]):
    monkeypatch.chdir(tmp_path)
    assert main(["minimize", str(ROOT / CASE), "-o", "m.json"]) == 1
    wrote = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  wrote "))
    assert wrote == ("  wrote m.json (scenario JSON + input bytes; keep it with your cases: epfuzz replay FOLDER "
                     "checks each against its expected verdict)")
    (tmp_path / "corpus" / "regressions").mkdir(parents=True)   # a checkout's root
    assert main(["minimize", str(ROOT / CASE), "-o", "m2.json"]) == 1
    assert "; copy into corpus/regressions/ to keep it: make replay checks it)" in capsys.readouterr().out
    # a plug-in's case is checked only with its folder allowed (new-user trial item 3)
    assert where_to_keep("myproto:SeqFlag") == ("copy into corpus/regressions/ to keep it: make replay "
                                                "ALLOW_PLUGINS=DIR (the folder its module is in) checks it")
