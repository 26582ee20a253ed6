"""An unknown harness or protocol name: one short line naming what the user typed, with close names
(user trial: one 3,000-character line of ~95 harnesses that named '<typed>_fuzzer')."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from epfuzz.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and len(err[0]) < 300, err
    return err[0]


def test_a_mistyped_harness_is_named_as_typed_with_close_matches(capsys):
    assert main(["fuzz", "deepep_v2_dispatc"]) == 2
    assert _one_line(capsys) == ("epfuzz: unknown harness 'deepep_v2_dispatc'; did you mean deepep_v2_dispatch, "
                                 "deepep_ll_dispatch, deepep_v2_dispatch_fixed? (`epfuzz list` lists them)")


def test_a_harness_like_nothing_gets_no_guesses(capsys):
    assert main(["fuzz", "no_such_proto"]) == 2
    assert _one_line(capsys) == "epfuzz: unknown harness 'no_such_proto' (`epfuzz list` lists them)"


@pytest.mark.parametrize("argv", [["corpus", "prune", "deepep_v2_dispatc_fuzzer", "DEST"],
                                  ["corpus", "merge", "deepep_v2_dispatc_fuzzer", "DEST", "SRC"]])
def test_corpus_names_a_mistyped_harness_the_same_way(argv, tmp_path, capsys):
    argv = [str(tmp_path / w) if w in ("DEST", "SRC") else w for w in argv]
    assert main(argv) == 2
    assert _one_line(capsys).startswith("epfuzz: unknown harness 'deepep_v2_dispatc_fuzzer'; did you mean "
                                        "deepep_v2_dispatch_fuzzer,")
    assert not (tmp_path / "DEST").exists()


def test_a_case_naming_an_unknown_protocol_gets_the_same_short_line(tmp_path, capsys):
    case = json.loads((ROOT / "corpus" / "regressions" / "deepep661-c2b.json").read_text())
    case["scenario"]["protocol"] = "deepep_v2_dispatc"
    f = tmp_path / "typo.json"
    f.write_text(json.dumps(case))
    assert main(["run", str(f)]) == 2
    line = _one_line(capsys)
    assert line.startswith(f"epfuzz: {f}: unknown protocol 'deepep_v2_dispatc'; did you mean deepep_v2_dispatch,")
    assert line.endswith("`epfuzz list` lists them)")
