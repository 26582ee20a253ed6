"""The path a refused file operation names (pip trial item 11): the one the user gave or the command read, in
words that say what the command does (replay never writes). Run as root here, so the system's refusal is stood
in for by the PermissionError it raises."""

from __future__ import annotations

import errno
import os
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


@pytest.mark.parametrize("command", ["triage", "report"])
@pytest.mark.parametrize(("denied", "says"), [(0, "cannot read {}: Permission denied"),
                                              (1, "cannot write into {} (")])
def test_triage_and_report_name_the_run_folder_they_may_not_use(monkeypatch, capsys, tmp_path, command, denied,
                                                                 says):
    """They named noperm/bugs or noperm/progress.csv, a path inside the folder given."""
    from epfuzz.cli import upkeep

    run = tmp_path / "noperm"
    run.mkdir()
    real = os.access
    monkeypatch.setattr(upkeep.os, "access", lambda p, mode: False if Path(p) == run and (
        mode & (os.R_OK if denied == 0 else os.W_OK)) else real(p, mode))
    rc = cli([command, str(run), *(["--no-png"] if command == "report" else [])])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(f"epfuzz: {says.format(run)}") and err.count("\n") == 1, err
    assert list(run.iterdir()) == []


@pytest.mark.parametrize("command", ["triage", "report"])
def test_triage_and_report_say_a_read_only_mount_as_the_other_commands_do(monkeypatch, capsys, tmp_path, command):
    """Trial 0205 item 7: on a read-only mount triage and report said "permission denied", fuzz and minimize
    "Read-only file system" (the system's words). The mount is stood in for by the answers the system gives
    there (root may not mount in every test run): no write access, and the file system's read-only flag."""
    from epfuzz.cli import upkeep

    run = tmp_path / "ro"
    run.mkdir()
    real_access, real_statvfs = os.access, os.statvfs

    class ReadOnly:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(upkeep.os, "access", lambda p, mode: False if Path(p) == run and mode & os.W_OK
                        else real_access(p, mode))
    monkeypatch.setattr(upkeep.os, "statvfs", lambda p: ReadOnly() if Path(p) == run else real_statvfs(p))
    rc = cli([command, str(run), *(["--no-png"] if command == "report" else [])])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(f"epfuzz: cannot write into {run} (") and \
        err.endswith(f"go there): {os.strerror(errno.EROFS)}\n"), err
    assert os.strerror(errno.EROFS) == "Read-only file system"
