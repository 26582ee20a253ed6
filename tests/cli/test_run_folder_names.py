"""The run folder `epfuzz fuzz` picks when the user names none (cf trial 7)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from epfuzz.campaign.common import fresh_run_dir
from epfuzz.infra.errors import InputError


def test_two_runs_started_in_the_same_second_get_two_folders(tmp_path):
    """The second of two runs started in one second exited 2 with "already exists ... name a new --run-dir",
    though no --run-dir was given: the default name is claimed by creating it, and a taken one gets -2, -3."""
    default = tmp_path / "runs" / "deepep_v2_dispatch_fuzzer-guided-20261204-120000"
    got: list[Path] = []
    start = threading.Barrier(4)

    def claim() -> None:
        start.wait()
        got.append(fresh_run_dir(None, default))

    threads = [threading.Thread(target=claim) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(p.name for p in got) == sorted([default.name] + [f"{default.name}-{n}" for n in (2, 3, 4)])
    assert all(p.is_dir() and not any(p.iterdir()) for p in got)
    (tmp_path / "runs" / f"{default.name}-5").write_text("a file")  # a name taken by anything is skipped
    assert fresh_run_dir(None, default).name == f"{default.name}-6"


def test_a_run_dir_the_user_names_must_still_be_new_or_empty(tmp_path):
    named = tmp_path / "mine"
    named.mkdir()
    assert fresh_run_dir(named, tmp_path / "default") == named and not (tmp_path / "default").exists()
    (named / "old-finding.json").write_text("{}")
    with pytest.raises(InputError, match="already exists and is not empty; name a new --run-dir"):
        fresh_run_dir(named, tmp_path / "default")


def test_a_run_dir_the_user_names_is_claimed_by_one_run_only(tmp_path):
    """--run-dir was checked (new or empty) and created later: two runs started at once both passed the
    check and wrote into one folder, each reading the other's findings back as its own. It is claimed as
    it is checked: one run gets it, the others are refused as for a folder in use."""
    named = tmp_path / "runs" / "mine"
    got: list[Path] = []
    refused: list[str] = []
    start = threading.Barrier(4)

    def claim() -> None:
        start.wait()
        try:
            got.append(fresh_run_dir(named, tmp_path / "default"))
        except InputError as e:
            refused.append(str(e))

    threads = [threading.Thread(target=claim) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [named] and len(refused) == 3, (got, refused)
    assert all(r == f"run folder {named} already exists and is not empty; name a new --run-dir" for r in refused)
    with pytest.raises(InputError, match="already exists and is not empty; name a new --run-dir"):
        fresh_run_dir(named, tmp_path / "default")  # and once claimed, it stays claimed
    empty = tmp_path / "empty"
    empty.mkdir()  # an empty folder the user made is claimed the same way
    assert fresh_run_dir(empty, tmp_path / "default") == empty
    with pytest.raises(InputError, match="already exists and is not empty; name a new --run-dir"):
        fresh_run_dir(empty, tmp_path / "default")
