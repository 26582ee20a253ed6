"""An error inside the guest reaches the host as the same error with its one line, never a traceback."""

from __future__ import annotations

import sys
import types

import pytest

from epfuzz.backends import verbs
from epfuzz.encoding import codec
from epfuzz.guest import vm
from epfuzz.infra.errors import EpfuzzError, Unsupported

STALLED = ("backend verbs: the end of the epoch saw no completion for 4 s (4 s in all): 2 sends and 0 receives "
           "outstanding; the run is inconclusive")


class _Stalls:
    def run(self, *_: object) -> dict[str, object]:
        raise Unsupported(STALLED)


def test_an_inconclusive_guest_run_is_unsupported_on_the_host_with_its_one_line(monkeypatch, tmp_path, capsys):
    case = tmp_path / "scenario.json"
    case.write_text(codec.decode(b"", "dispatch_any", "spec").to_json())
    runner = types.ModuleType("epfuzz.backends.verbs_runner")  # the real one needs pyverbs (the guest's)
    runner.local_runner = lambda: _Stalls()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "epfuzz.backends.verbs_runner", runner)
    assert verbs.guest_main([str(case), "1"]) == 1
    guest_lines = ["Booting", *capsys.readouterr().out.splitlines(), "EPFUZZ-GUEST-EXIT 1"]
    monkeypatch.setattr(vm, "run", lambda *a, **k: (1, guest_lines))
    with pytest.raises(Unsupported) as e:
        verbs._in_guest(codec.decode(b"", "dispatch_any", "spec"), 1)
    assert str(e.value) == STALLED  # a harness skips it, as it skips a local inconclusive run


def test_an_unknown_error_class_from_the_guest_is_still_one_line():
    err = verbs._guest_error(verbs.ERROR_MARK + '{"kind": "NewError", "message": "m"}')
    assert type(err) is EpfuzzError and str(err) == "m"


@pytest.mark.parametrize(("name", "why"), [("stale_quiet", "stale frontier"), ("stale_quiet_fixed", "SrcClear"),
                                           ("source_no_flush", "SrcStore"), ("source_no_flush_fixed", "SrcStore"),
                                           ("tma_flag", "TMA bulk store"), ("tma_flag_fixed", "TMA bulk store"),
                                           ("mixed_plane", "TMA bulk store")])
def test_the_sender_side_source_ops_are_refused_with_their_reason_before_any_guest(name, why, monkeypatch):
    """epfuzz.model.source's ops and the stale-frontier quiet are the sim's alone: refused before the guest is
    booted (it is never asked), whatever runs here."""
    from epfuzz.protocols import get_protocol

    monkeypatch.setattr(verbs, "_in_guest", lambda *a: pytest.fail("the guest was started"))
    scn = codec.load_dict({"protocol": name, "payload": {"num_tokens": 2}})
    with pytest.raises(Unsupported, match=why):
        verbs.VerbsBackend().run(scn, get_protocol(name))
    assert verbs.refusal(codec.load_dict({"protocol": "dispatch_any"}), get_protocol("dispatch_any")) == ""
