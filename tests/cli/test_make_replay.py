"""`make replay` with a plug-in case among the regressions (new-user trial item 3): tutorial section 3 said a case
copied into corpus/regressions/ is kept checked by `make replay`, and for a plug-in case, the only kind the
tutorial makes, it was "1 unreadable ... FAIL (exit 2)", with no way to pass --allow-plugins through make."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_plugin_errors import RECEIVER

ROOT = Path(__file__).resolve().parents[2]


def make_replay(*variables: str) -> subprocess.CompletedProcess[str]:
    """The Makefile's replay line, without its `install` prerequisite (`-o`: no venv or compiled-core rebuild
    here) and with this interpreter as epfuzz."""
    return subprocess.run(["make", "--no-print-directory", "-o", "install", "replay",
                           f"EPFUZZ={sys.executable} -m epfuzz", *variables],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(shutil.which("make") is None, reason="no `make` on this host")
def test_make_replay_checks_a_plugin_case_in_the_folders_allow_plugins_names(tmp_path):
    plugins, regressions = tmp_path / "plugins", tmp_path / "regressions"
    plugins.mkdir()
    regressions.mkdir()
    (plugins / "mine.py").write_text(RECEIVER.replace("LIMIT", "99").replace("FIXED", '{"knobs.mr_relaxed": True}'))
    shipped = json.loads((ROOT / "corpus" / "regressions" / "deepep661-c2b.json").read_text())
    case = {"name": "mine-c2b", "protocol": "mine:Flag", "preset": shipped["preset"], "backend": "sim",
            "expect": "finding", "scenario": {**shipped["scenario"], "protocol": "mine:Flag"}}
    (regressions / "mine-c2b.json").write_text(json.dumps(case))

    refused = make_replay(f"REGRESSIONS={regressions}")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "'mine:Flag' is a plug-in" in refused.stderr and ", 1 unreadable," in refused.stdout

    allowed = make_replay(f"REGRESSIONS={regressions}", f"ALLOW_PLUGINS={tmp_path / 'elsewhere'} {plugins}")
    assert allowed.returncode == 2 and "--allow-plugins" in allowed.stderr  # each folder is passed on: one is bad
    (tmp_path / "elsewhere").mkdir()
    allowed = make_replay(f"REGRESSIONS={regressions}", f"ALLOW_PLUGINS={tmp_path / 'elsewhere'} {plugins}")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    summary = allowed.stdout.splitlines()[-1]
    assert ", 0 changed, " in summary and ", 0 unreadable, " in summary and summary.endswith("PASS"), summary
