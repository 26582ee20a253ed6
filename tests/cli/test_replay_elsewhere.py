"""A printed replay command pasted in another folder (new-user trial, leftover item 3).

The commands name their run folder relative to the folder epfuzz ran in (docs/usage.md: short lines that
paste there); pasted elsewhere they said only "runs/...: cannot read: No such file or directory", as if the
path were wrong. The one line now says which folder the relative path was looked for from, and why."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from epfuzz.cli.commands import main
from epfuzz.triage.findings import replay_command, triage_command

ROOT = Path(__file__).resolve().parents[2]
C2B = ROOT / "corpus" / "regressions" / "deepep661-c2b.json"


def _args(command: str, verb: str) -> list[str]:
    """The printed command's arguments after the epfuzz program (`epfuzz`, `.venv/bin/epfuzz` or `python -m epfuzz`)."""
    words = shlex.split(command)
    return words[words.index(verb):]


def test_a_replay_command_pasted_in_another_folder_names_the_path_and_the_folder(tmp_path, monkeypatch, capsys):
    here, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (here / "runs" / "r1" / "bugs").mkdir(parents=True)
    elsewhere.mkdir()
    shutil.copy(C2B, here / "runs" / "r1" / "bugs" / "c2b.json")
    monkeypatch.chdir(here)
    run = _args(replay_command(Path("runs/r1/bugs/c2b.json")), "run")
    triage = _args(triage_command(Path("runs/r1")), "triage")
    assert run[1] == "runs/r1/bugs/c2b.json" and triage[1] == "runs/r1"   # relative, as the docs say
    assert main(run) == 1   # where epfuzz ran: the finding
    capsys.readouterr()
    monkeypatch.chdir(elsewhere)
    assert main(run) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"epfuzz: runs/r1/bugs/c2b.json: cannot read: No such file or directory (relative to the current "
                   f"folder {elsewhere}; printed replay commands run from the folder epfuzz ran in)"]
    assert main(triage) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"epfuzz: no such folder: runs/r1 (relative to the current folder {elsewhere}; printed replay "
                   "commands run from the folder epfuzz ran in)"]


@pytest.mark.parametrize("verb", ["explain", "minimize", "repair", "replay"])
def test_every_command_reading_a_case_says_so(verb, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main([verb, "runs/r1/bugs/c2b.json"]) == 2
    assert f"relative to the current folder {tmp_path}; printed replay commands" in capsys.readouterr().err


def test_an_absolute_path_that_is_not_there_adds_nothing(tmp_path, capsys):
    assert main(["run", str(tmp_path / "x.json")]) == 2
    assert capsys.readouterr().err == f"epfuzz: {tmp_path / 'x.json'}: cannot read: No such file or directory\n"
