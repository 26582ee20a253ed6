"""What a protocol plug-in is checked for before it is used: slips its author can be told about in one line.

`fields` and `expect_rule` run when a plug-in is loaded (every command): a `fixed` pin or a
`signature_knobs` entry that names no scenario field, an `expect` mapping key that names no preset, an
`expect` word that is no verdict. A misspelt signature knob (`payload.num_epochs`) passed the campaign's
pre-flight and crashed at the first finding as "unexpected error (a bug in epfuzz): AttributeError" (an
author's trial); they are plain data, so they are read without running any of the plug-in's code.

The run of the plug-in on the simplest scenario before a campaign is `epfuzz.campaign.preflight`
(it needs the sim, a layer above this one).
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Iterable, Mapping

from epfuzz.infra.errors import InputError
from epfuzz.protocols.base import Protocol


def scenario_fields() -> tuple[str, ...]:
    """Every scenario field's dotted path (`knobs.mr_relaxed`, `payload.epochs`, ...)."""
    from epfuzz.ir.scenario import iter_leaf_fields

    return tuple(path for path, _ in iter_leaf_fields())


def _no_field(spec: str, key: object, what: str, known: Iterable[str]) -> InputError:
    close = difflib.get_close_matches(str(key), list(known), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    return InputError(f"protocol {spec!r} {what} {key!r}, which is no scenario field{hint}")


def fields(proto: Protocol, spec: str) -> None:
    """Refuse (InputError, one line) a `fixed` pin or a `signature_knobs` entry that is no scenario field,
    with the close field name where there is one."""
    known = scenario_fields()
    for key in proto.fixed:
        if key not in known:
            raise _no_field(spec, key, "pins", known)
    knobs = proto.signature_knobs
    if knobs is None:
        return
    if isinstance(knobs, str) or not isinstance(knobs, (tuple, list)):  # ("a.b") is a str, not a 1-tuple
        raise InputError(f"protocol {spec!r}: signature_knobs is {knobs!r}, not a tuple of scenario fields "
                         "(one field is written (\"payload.epochs\",), with the comma)")
    for key in knobs:
        if key not in known:
            raise _no_field(spec, key, "lists in signature_knobs", known)


def _source(proto: Protocol) -> str:
    """' (FILE, class NAME)' of the plug-in's class, for an error its author fixes in that file."""
    cls = type(proto)
    try:
        file = inspect.getsourcefile(cls) or ""
    except TypeError:  # a class of no file (built in, made by exec)
        file = ""
    return f" ({file}, class {cls.__name__})" if file else f" (class {cls.__name__})"


def expect_rule(proto: Protocol, spec: str) -> None:
    """Refuse (InputError, one line) an `expect` that can give no verdict: a mapping key that is no preset name
    nor "*" (a misspelt "mlx5-pci-atomics" was found only at the first finding, as "expect gives None", or never
    where no finding came), or a word that is not "finding" or "clean". A callable is the author's code: it is
    checked where it is called (`Protocol.expected`)."""
    from epfuzz.ir.presets import PRESETS

    rule = proto.expect
    if callable(rule):
        return
    values = [rule] if isinstance(rule, str) else list(rule.values()) if isinstance(rule, Mapping) else [rule]
    for value in values:
        if value not in ("finding", "clean"):
            raise InputError(f"protocol {spec!r}{_source(proto)}: expect gives {value!r}, "
                             'not "finding" or "clean"')
    if not isinstance(rule, Mapping):
        return
    for key in rule:
        if key != "*" and key not in PRESETS:
            close = difflib.get_close_matches(str(key), list(PRESETS), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise InputError(f"protocol {spec!r}{_source(proto)}: expect names preset {key!r}, which is no preset"
                             f"{hint} (known: {', '.join(PRESETS)}; \"*\" for every other)")
