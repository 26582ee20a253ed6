"""Which folders `epfuzz replay` reads raw inputs from, and what it says when it cannot (user audit D10)."""

from __future__ import annotations

import shutil
from pathlib import Path

from epfuzz.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "corpus" / "deepep_v2_dispatch_fuzzer"


def _inputs(dest: Path, n: int = 3) -> Path:
    dest.mkdir(parents=True)
    for f in sorted(p for p in SEEDS.iterdir() if len(p.name) == 40)[:n]:
        shutil.copy(f, dest / f.name)
    return dest


def test_a_run_folders_corpus_replays_under_the_protocol_its_name_gives(tmp_path, capsys):
    corpus = _inputs(tmp_path / "deepep_v2_dispatch_fuzzer-guided-20261203-091000" / "corpus")
    assert main(["replay", str(corpus)]) == 0
    assert "replayed 3 case(s)" in capsys.readouterr().out


def test_raw_inputs_under_no_protocols_folder_name_ask_for_protocol(tmp_path, capsys):
    """It said '(3 skipped: not inputs)' of a run's corpus it did not know the protocol of."""
    corpus = _inputs(tmp_path / "myrun" / "corpus")
    (corpus.parent / "progress.csv").write_text("elapsed\n")
    assert main(["replay", str(corpus.parent)]) == 2
    assert capsys.readouterr().err.strip() == ("epfuzz replay: no files found (3 raw input(s) skipped: no folder "
                                               "above them names a protocol, pass --protocol NAME; 1 skipped: not "
                                               "inputs)")
    assert main(["replay", "--protocol", "deepep_v2_dispatch", str(corpus)]) == 0
