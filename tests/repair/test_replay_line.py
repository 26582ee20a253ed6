"""`repair`'s "replay the proof" line pastes: for a plug-in's case it names the plug-in with --protocol
(a case never imports code), and it carries the options that loaded the case (an author's trial pasted
`epfuzz repair min_a.json --edits ...` and was refused)."""

from __future__ import annotations

import shlex
import subprocess

from epfuzz.cli.commands import main
from tests.conftest import ROOT
from tests.triage.findings import raw_findings

SPEC = "examples.seqflag:SeqFlag"


def test_a_plugin_cases_proof_replay_names_its_protocol_and_pastes(tmp_path, capsys):
    case = raw_findings(tmp_path, SPEC, 1, seed=3)[0]
    assert main(["repair", str(case), "--protocol", SPEC, "--campaign-execs", "0", "--max-states", "20000"]) == 0
    out = capsys.readouterr().out.splitlines()
    line = next(x for x in out if "replay the proof: " in x)
    status = next(x for x in out if x.startswith("repair 1: "))  # "[proven]", or its bound (adaptive routing)
    command = line.split("replay the proof: ", 1)[1]
    assert f" --protocol {SPEC} " in command, command
    p = subprocess.run(shlex.split(command), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "[proven" in status and status in p.stdout.splitlines(), p.stdout + p.stderr


def test_the_replay_keeps_the_options_that_loaded_a_raw_input(tmp_path, capsys):
    from epfuzz.cases.corpus import load_case

    found = raw_findings(tmp_path / "found", "deepep_v2_dispatch", 1, preset="mlx5-pci-atomic", seed=1)[0]
    raw = tmp_path / "input"
    raw.write_bytes(load_case(found).input)
    main(["repair", str(raw), "--protocol", "deepep_v2_dispatch", "--preset", "mlx5-pci-atomic", "--raw",
          "--campaign-execs", "0", "--max-states", "2000"])
    lines = [x for x in capsys.readouterr().out.splitlines() if "replay the proof: " in x]
    assert lines
    for line in lines:
        assert "--protocol deepep_v2_dispatch --preset mlx5-pci-atomic --raw" in line, line


def test_the_replay_names_the_preset_only_where_the_user_gave_one():
    """--preset defaults to none (the protocol's home preset): the line said `--preset ''`, which the parser
    refuses, on every repair the user gave no --preset (review 1205); a --preset spec given is kept (for a
    tma_flag input it is not the home preset)."""
    from epfuzz.cli.args import parse
    from epfuzz.repair.text import loading_options

    assert loading_options(parse(["repair", "case.json"]), "deepep_v2_dispatch") == ""
    assert loading_options(parse(["repair", "input", "--protocol", "tma_flag", "--preset", "spec"]),
                           "tma_flag") == " --protocol tma_flag --preset spec"
