"""What a person learns from the compiled core's build and from a run on the pure emulator (a user trial: a
failed `python -m epfuzz.core.corebuild` exited 0, its advice named a bare `python`, and `epfuzz fuzz` ran at
half speed after a plain pip install without a word)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from epfuzz.campaign.common import log_start
from epfuzz.core import corebuild, native


def _failing_build(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """`corebuild.build` failing with `error`, with nothing of this tree's built core removed or rewritten."""
    def fail(tmp: str) -> None:
        raise error

    monkeypatch.setattr(corebuild, "_compile", fail)
    monkeypatch.setattr(corebuild, "clean", lambda: 0)


def test_a_failed_build_exits_1_unless_best_effort(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _failing_build(monkeypatch, RuntimeError("gcc failed"))
    assert corebuild.main([]) == 1
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "compiled emulator not built (RuntimeError: gcc failed)" in out
    assert corebuild.main(["--best-effort"]) == 0


def test_a_build_without_the_core_extra_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    _failing_build(monkeypatch, ModuleNotFoundError("No module named 'mypyc'", name="mypyc"))
    assert corebuild.main([]) == 1
    assert f"mypyc is not installed: {sys.executable} -m pip install 'epfuzz[core]'" in capsys.readouterr().out


def test_the_rebuild_advice_names_this_interpreter() -> None:
    assert f"{sys.executable} -m epfuzz.core.corebuild" in native.REBUILD


class _Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def info(self, event: str, **kw: Any) -> None:
        self.events.append(("info", event, kw))

    def warning(self, event: str, **kw: Any) -> None:
        self.events.append(("warning", event, kw))


@pytest.mark.parametrize("path", ["compiled", "pure"])
def test_a_run_says_which_emulator_and_warns_on_the_pure_one(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    monkeypatch.setattr(native, "running", lambda: path)
    log = _Log()
    log_start(log, "sim", seconds=5)
    assert log.events[0] == ("info", "fuzz.start", {"emulator": path, "seconds": 5})
    warned = [e for e in log.events if e[0] == "warning"]
    if path == "compiled":
        assert not warned
    else:
        assert [e[1] for e in warned] == ["fuzz.slower_emulator"]
        assert "epfuzz.core.corebuild" in warned[0][2]["detail"]
    other = _Log()
    log_start(other, "verbs", seconds=5)  # another backend runs no emulator: no word of one
    assert other.events == [("info", "fuzz.start", {"seconds": 5})]


def test_the_build_leaves_no_mypy_cache_in_the_working_directory(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    """Pip trial item 7: run from a user's folder the build left a 13 MB .mypy_cache/ there. mypycify is stood in
    for by what mypy does with its cache (the folder --cache-dir names, else .mypy_cache/ of the working
    directory), and stops the build there: nothing of this tree's built core is touched."""
    import mypyc.build

    class Stop(Exception):
        pass

    seen: list[str] = []

    def mypycify(paths: list[str], **_: Any) -> None:
        cache = next((p.split("=", 1)[1] for p in paths if p.startswith("--cache-dir=")), ".mypy_cache")
        os.makedirs(cache, exist_ok=True)
        seen.append(cache)
        raise Stop

    monkeypatch.setattr(mypyc.build, "mypycify", mypycify)
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.chdir(user)
    with pytest.raises(Stop):
        corebuild._compile(str(tmp_path / "build"))
    assert seen and list(user.iterdir()) == []


def test_a_source_edited_during_the_build_leaves_the_build_stale(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    """The manifest holds the hash of the sources the build read, not of those there when it ends: a source edited
    while the compiler ran (minutes) was recorded as built, and the stale extension ran as current. The compile is
    stood in for by a source's edit (the digest changes under it); the manifest is written to a scratch file."""
    digests = iter(["before", "after"])
    monkeypatch.setattr(native, "digest", lambda: next(digests))
    monkeypatch.setattr(native, "MANIFEST", tmp_path / "manifest.json")
    monkeypatch.setattr(corebuild, "clean", lambda: 0)
    monkeypatch.setattr(corebuild, "_compile", lambda tmp: native.digest())  # the edit, during the compile
    assert corebuild.main([]) == 0
    assert '"sources": "before"' in (tmp_path / "manifest.json").read_text()
