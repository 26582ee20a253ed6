"""The run folder `epfuzz fuzz` picks when the user names none (cf trial 7)."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from epfuzz.campaign.rundir import fresh_run_dir
from epfuzz.infra.errors import InputError


def test_two_runs_started_in_the_same_second_get_two_folders(tmp_path):
    """The second of two runs started in one second exited 2 with "already exists ... name a new --run-dir",
    though no --run-dir was given: the default name is claimed by creating it, and a taken one gets -2, -3."""
    default = tmp_path / "runs" / "deepep_v2_dispatch_fuzzer-guided-20261204-120000"
    got: list[Path] = []
    start = threading.Barrier(4)

    def claim() -> None:
        start.wait()
        got.append(fresh_run_dir(None, default).path)

    threads = [threading.Thread(target=claim) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(p.name for p in got) == sorted([default.name] + [f"{default.name}-{n}" for n in (2, 3, 4)])
    assert all(p.is_dir() and not any(p.iterdir()) for p in got)
    (tmp_path / "runs" / f"{default.name}-5").write_text("a file")  # a name taken by anything is skipped
    assert fresh_run_dir(None, default).path.name == f"{default.name}-6"


def test_a_run_dir_the_user_names_must_still_be_new_or_empty(tmp_path):
    named = tmp_path / "mine"
    named.mkdir()
    assert fresh_run_dir(named, tmp_path / "default").path == named and not (tmp_path / "default").exists()
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
            got.append(fresh_run_dir(named, tmp_path / "default").path)
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
    assert fresh_run_dir(empty, tmp_path / "default").path == empty
    with pytest.raises(InputError, match="already exists and is not empty; name a new --run-dir"):
        fresh_run_dir(empty, tmp_path / "default")


def test_a_claim_is_given_back_only_while_nothing_was_written(tmp_path):
    """A campaign that fails before writing gives its claim back: what it made goes (its corpus/ and the
    folder, if it made that), a folder the user made stays, and a folder something was written into keeps
    everything (the claim included: that run's record is not the next run's)."""
    made = fresh_run_dir(tmp_path / "new" / "run", tmp_path / "default")
    (made.path / "artifacts").mkdir()
    with pytest.raises(RuntimeError, match="boot"), made.released_on_failure():
        raise RuntimeError("the guest did not boot")
    assert not made.path.exists() and (tmp_path / "new").is_dir()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    claim = fresh_run_dir(theirs, tmp_path / "default")
    with pytest.raises(KeyboardInterrupt), claim.released_on_failure():
        raise KeyboardInterrupt
    assert theirs.is_dir() and not any(theirs.iterdir())
    assert fresh_run_dir(theirs, tmp_path / "default").path == theirs  # the retry is not refused
    written = fresh_run_dir(tmp_path / "written", tmp_path / "default")
    (written.path / "progress.csv").write_text("seconds\n")
    with pytest.raises(RuntimeError), written.released_on_failure():
        raise RuntimeError("failed after writing")
    assert sorted(p.name for p in written.path.iterdir()) == ["corpus", "progress.csv"]
    kept = fresh_run_dir(tmp_path / "kept", tmp_path / "default")
    (kept.path / "corpus" / "0123").write_bytes(b"an input")
    with pytest.raises(RuntimeError), kept.released_on_failure():
        raise RuntimeError("failed after its first input")
    assert (kept.path / "corpus" / "0123").read_bytes() == b"an input"


def test_a_named_run_dir_whose_guest_fails_to_start_can_be_named_again(tmp_path, monkeypatch, capsys):
    """`epfuzz fuzz --backend verbs --run-dir D` on a host without RDMA boots the soft-RoCE guest after
    claiming D; a guest that failed to start left D/corpus/ behind, empty, and the retry was refused as
    "not empty" instead of failing for its own reason again. Here the guest cannot start for real: the
    tools the verbs backend asks for are on PATH, apt-cache (which the guest image is built with) is not."""
    from epfuzz.backends import get_backend
    from epfuzz.cli.commands import main as cli

    if get_backend("verbs", require=False).runs_locally():
        pytest.skip("this host runs verbs itself (RDMA devices): no guest is started")
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("qemu-system-x86_64", "mmdebstrap", "cpio"):
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} is not installed: the verbs backend refuses before any run folder is claimed")
        (tools / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(tools))
    for named, premade in ((tmp_path / "runs" / "mine", False), (tmp_path / "theirs", True)):
        if premade:
            named.mkdir()
        for _ in range(2):
            capsys.readouterr()
            assert cli(["fuzz", "deepep_v2_dispatch", "--backend", "verbs", "--time", "5",
                        "--run-dir", str(named)]) == 2
            err = capsys.readouterr().err
            assert "apt-cache is not installed" in err and "not empty" not in err, err
            assert named.is_dir() == premade and (not premade or not any(named.iterdir()))


def test_a_guest_campaign_that_wrote_nothing_ends_with_the_guests_error_of_its_kind():
    """What the host raises, read off the guest's --log-json error event: a plug-in's bug stays exit 3 (protocol
    error), a plug-in the guest cannot import exit 2, as the same failure on the host would be."""
    import json

    from epfuzz.campaign.guest import _stopped_before_writing
    from epfuzz.infra.errors import EpfuzzError, InputError, ProtocolError

    def said(message: str) -> list[str]:
        return ["epfuzz-guest: init", json.dumps({"event": "error", "level": "error", "message": message})]

    head = "the campaign in the guest stopped before writing anything"
    bug = _stopped_before_writing(3, said("protocol error (a bug in the protocol plug-in): boom (at p.py:3, in f)"))
    assert type(bug) is ProtocolError and str(bug) == f"{head} (exit 3): boom (at p.py:3, in f)"
    gone = _stopped_before_writing(2, said("cannot load protocol 'p:P': No module named 'p'"))
    assert type(gone) is EpfuzzError and not isinstance(gone, InputError)
    assert str(gone) == f"{head} (exit 2): cannot load protocol 'p:P': No module named 'p'"
    assert str(_stopped_before_writing(137, ["Killed"])) == f"{head} (exit 137); the guest's lines above say why"
