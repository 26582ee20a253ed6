"""The plug-in pre-flight every campaign engine runs before it fuzzes a protocol named to it.

One function, called by the engines (`fuzz`, `fuzz_guided`) and by nothing else: `epfuzz fuzz --protocol`
ran two copies of it (one in the CLI, one in the engines) and a campaign started from Python got only the
one without the hang check. The checks that read no code are `epfuzz.protocols.preflight`.
"""

from __future__ import annotations

from epfuzz.infra.errors import EpfuzzError, InputError, ProtocolError


def preflight(protocol: str, preset: str) -> None:
    """Load a protocol named for a campaign and run it once on the simplest scenario before fuzzing it: a
    protocol that breaks the API (an abstract receiver, an exception in its sender, a pin out of range or
    of no field) fails here in one line, instead of every input of the campaign failing without a word.

    A receiver that never completes there, where no ordering rule let anything pass anything, hangs on
    every input for a reason no reordering explains (a `done()` that never returns True, a signal its
    sender never writes): the campaign reported each input as a `hang|in-order|no knob` finding and a
    false alarm of the model (an author's trial); it is the plug-in's error instead (exit 3), said once.
    Every engine calls this, and nothing else does: the CLI and a campaign started from Python get the
    same checks, run once (the checks that read no code are `epfuzz.protocols.preflight`)."""
    import json

    from epfuzz.backends import get_backend
    from epfuzz.encoding import codec
    from epfuzz.protocols import REGISTRY, get_protocol
    from epfuzz.protocols.base import check_state

    proto = REGISTRY.load_plugin(protocol) if ":" in protocol else get_protocol(protocol)  # named by the caller
    scn = codec.decode(b"", protocol, preset)
    for key in proto.fixed:
        try:
            scn.get_path(key)
        except AttributeError:
            raise InputError(f"protocol {protocol!r} pins {key!r}, which is no scenario field") from None
    try:
        codec.load_dict(json.loads(scn.to_json()))  # a pinned value out of range is named here
    except InputError as e:
        raise InputError(f"protocol {protocol!r}: its pins make an invalid scenario: {e}") from None
    try:
        out = get_backend("sim").run(scn, proto)
        rx = proto.receiver(scn, proto.layout(scn))
        rx.start_epoch(0)
        check_state(rx, protocol)  # what exploration (grouping, during the campaign) hashes
    except EpfuzzError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's code: one line that says where
        raise ProtocolError(f"protocol {protocol!r} fails on the simplest scenario: {type(e).__name__}: {e}"
                            f"{REGISTRY.where(e)}") from None
    v = out.violation
    if v is None or v.kind != "hang" or out.rules_fired:
        return
    raise ProtocolError(f"protocol {protocol!r} hangs on the simplest scenario, where nothing is reordered "
                        f"({v.what}, epoch {v.epoch}): its receiver's done() never returns True there, or its "
                        "sender never writes what the receiver waits for (`epfuzz run` of any input shows it)")
