"""The path a refused file operation names (pip trial item 11): the one the user gave or the command read, in
words that say what the command does (replay never writes). Run as root here, so the system's refusal is stood
in for by the PermissionError it raises."""

from __future__ import annotations

import errno
import tempfile
from pathlib import Path

import pytest

from epfuzz.cases import corpus
from epfuzz.cli import commands
from epfuzz.cli.commands import main as cli


def _refuse(path: str):
    def command(_a: object) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", path)
    return command


@pytest.mark.parametrize(("command", "args", "says"), [
    ("replay", ["replay", "noperm/c.json"], "epfuzz: cannot read noperm: Permission denied\n"),
    ("run", ["run", "noperm/c.json"], "epfuzz: cannot read noperm: Permission denied\n"),
    ("minimize", ["minimize", "noperm/c.json"], "epfuzz: cannot write or read noperm: Permission denied\n"),
])
def test_a_refused_path_is_said_as_read_by_a_command_that_only_reads(monkeypatch, capsys, command, args, says):
    monkeypatch.setitem(commands.COMMANDS, command, _refuse("noperm"))
    assert cli(args) == 2
    assert capsys.readouterr().err == says


def test_an_atomic_write_refused_names_the_file_asked_for_not_its_temporary(monkeypatch, tmp_path):
    """`minimize -o noperm/m.json` said `cannot write or read noperm/.m.json.tv9itn_d`, mkstemp's name."""
    target = tmp_path / "m.json"

    def mkstemp(prefix: str = "", dir: str | Path | None = None) -> tuple[int, str]:
        raise PermissionError(errno.EACCES, "Permission denied", f"{dir}/{prefix}tv9itn_d")

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    with pytest.raises(PermissionError) as e:
        corpus.write_atomic(target, b"{}")
    assert e.value.filename == str(target) and e.value.errno == errno.EACCES
    assert list(tmp_path.iterdir()) == []
