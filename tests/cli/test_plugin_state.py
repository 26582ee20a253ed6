"""A plug-in receiver's `state()` need only be hashable, as the tutorial and `Receiver.state` say (new-user trial
item 1): an int bitmask crashed the compiled emulator ("tuple object expected; got int", said as a bug in epfuzz)
while EPFUZZ_PURE=1 ran it, and an unhashable list was "a bug in epfuzz" on both paths."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_plugin_errors import RECEIVER, one_line

STATES = '''

class IntRx(Rx):
    def state(self):  # a bitmask: hashable, not a tuple
        return sum(1 << c for c, got in enumerate(self.got) if got)

    def restore(self, state):
        self.got = [bool(state >> c & 1) for c in range(len(self.got))]


class SetRx(Rx):
    def state(self):
        return frozenset(c for c, got in enumerate(self.got) if got)

    def restore(self, state):
        self.got = [c in state for c in range(len(self.got))]


class ListRx(Rx):
    def state(self):
        return list(self.got)


class IntFlag(Flag):
    def receiver(self, scn, layout):
        return IntRx(layout)


class SetFlag(Flag):
    def receiver(self, scn, layout):
        return SetRx(layout)


class ListFlag(Flag):
    def receiver(self, scn, layout):
        return ListRx(layout)
'''


def epfuzz(cwd: Path, *args: str, pure: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EPFUZZ_DEBUG": "", "EPFUZZ_PURE": "1" if pure else ""}
    return subprocess.run([sys.executable, "-m", "epfuzz", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    text = RECEIVER.replace("LIMIT", "99").replace("FIXED", '{"knobs.mr_relaxed": True}') + STATES
    (tmp_path / "mine.py").write_text(text)
    (tmp_path / "input").write_bytes(bytes(64))
    return tmp_path


@pytest.mark.parametrize("attr", ["IntFlag", "SetFlag"])
def test_a_hashable_state_that_is_no_tuple_explores_alike_compiled_and_pure(folder, attr):
    """`explore` merges states by `state()`: the trial's int bitmask failed there (and in grouping)."""
    compiled = epfuzz(folder, "explore", "input", "--protocol", f"mine:{attr}")
    pure = epfuzz(folder, "explore", "input", "--protocol", f"mine:{attr}", pure=True)
    assert compiled.returncode in (0, 1), compiled.stderr
    assert "a bug in epfuzz" not in compiled.stderr
    assert (compiled.returncode, compiled.stdout) == (pure.returncode, pure.stdout)
    tuple_state = epfuzz(folder, "explore", "input", "--protocol", "mine:Flag")
    assert (tuple_state.returncode, tuple_state.stdout) == (compiled.returncode, compiled.stdout)


@pytest.mark.parametrize("pure", [False, True])
def test_an_unhashable_state_is_the_plugins_error_naming_its_line(folder, pure):
    p = epfuzz(folder, "explore", "input", "--protocol", "mine:ListFlag", pure=pure)
    assert p.returncode == 3, p.stdout + p.stderr
    line = one_line(p)
    assert "protocol error (a bug in the protocol plug-in)" in line and "a bug in epfuzz" not in line
    assert "'mine:ListFlag': its receiver's state() returned an unhashable list" in line
    assert f"(at {folder / 'mine.py'}:" in line and "in state)" in line


def test_a_campaign_refuses_an_unhashable_state_before_it_starts(folder):
    p = epfuzz(folder, "fuzz", "--protocol", "mine:ListFlag", "--time", "30", "--run-dir", "r")
    assert p.returncode == 3, p.stdout + p.stderr
    line = one_line(p)
    assert "its receiver's state() returned an unhashable list" in line and "in state)" in line
    assert not (folder / "r").exists()
