"""The pre-flight run of `epfuzz fuzz --protocol`: the plug-in once on the simplest scenario.

An exception there is the plug-in's, named with its line. A receiver that never completes there, where
no ordering rule let anything pass anything, hangs on every input for a reason no reordering explains
(a `done()` that never returns True, a signal its sender never writes): the campaign reported each input
as a `hang|in-order|no knob` finding and a false alarm of the model (an author's trial); it is the
plug-in's error instead (exit 3), said once. The checks that read no code are `epfuzz.protocols.preflight`.
"""

from __future__ import annotations

from epfuzz.backends import get_backend
from epfuzz.encoding import codec
from epfuzz.infra.errors import EpfuzzError, ProtocolError
from epfuzz.protocols import REGISTRY
from epfuzz.protocols.base import Protocol


def completes(proto: Protocol, spec: str, preset: str) -> None:
    """Refuse (ProtocolError, one line: exit 3) a protocol whose receiver never completes the simplest
    scenario although no ordering rule fired in it: nothing was reordered, so the hang is the plug-in's."""
    scn = codec.decode(b"", spec, preset)
    try:
        out = get_backend("sim").run(scn, proto)
    except EpfuzzError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's code: one line that says where
        raise ProtocolError(f"protocol {spec!r} fails on the simplest scenario: {type(e).__name__}: {e}"
                            f"{REGISTRY.where(e)}") from None
    v = out.violation
    if v is None or v.kind != "hang" or out.rules_fired:
        return
    raise ProtocolError(f"protocol {spec!r} hangs on the simplest scenario, where nothing is reordered "
                        f"({v.what}, epoch {v.epoch}): its receiver's done() never returns True there, or its "
                        "sender never writes what the receiver waits for (`epfuzz run` of any input shows it)")
