"""setup.py copies the folders `epfuzz.infra.shipped.SHIPPED` names into the wheel, reading them from that
file's text (pip's isolated build cannot import epfuzz): what it reads must be the mapping the package uses to
find the copies, and a SHIPPED that is no longer a plain literal must stop the build in one line, not ship a
wheel without its data. The wheel itself is tests/packaging/test_wheel.py's (slow)."""

from __future__ import annotations

import runpy
import shutil
from pathlib import Path
from typing import Any

import pytest
import setuptools

from epfuzz.infra.shipped import SHIPPED

ROOT = Path(__file__).resolve().parents[2]


def _run_setup(root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """setup.py's globals after it ran, with `setuptools.setup` recording its arguments instead of building."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(setuptools, "setup", lambda **kw: calls.append(kw))
    out = runpy.run_path(str(root / "setup.py"))
    assert len(calls) == 1 and "build_py" in calls[0]["cmdclass"]
    return out


def test_setup_reads_the_package_s_shipped_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run_setup(ROOT, monkeypatch)["SHIPPED"] == SHIPPED
    assert set(SHIPPED) == {"corpus", "docs", "examples"} and all(v.startswith("_") for v in SHIPPED.values())


def test_a_shipped_list_setup_cannot_read_stops_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "epfuzz" / "infra").mkdir(parents=True)
    shutil.copy(ROOT / "setup.py", tmp_path / "setup.py")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    text = (ROOT / "epfuzz" / "infra" / "shipped.py").read_text()
    computed = text.replace('SHIPPED: dict[str, str] = {"corpus"', 'SHIPPED: dict[str, str] = dict(**{"corpus"', 1)
    computed = computed.replace('"_examples"}\n', '"_examples"})\n', 1)
    assert computed != text
    (tmp_path / "epfuzz" / "infra" / "shipped.py").write_text(computed)
    with pytest.raises(SystemExit, match=r"setup\.py: .*shipped\.py has no SHIPPED = \{\.\.\.\} literal"):
        _run_setup(tmp_path, monkeypatch)
