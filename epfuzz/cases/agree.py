"""A case file's own copies of its scenario's fields, checked before the scenario is loaded (`parse_case`)."""

from __future__ import annotations

from typing import Any

from epfuzz.infra.errors import InputError
from epfuzz.protocols import REGISTRY


def agree_first(obj: dict[str, Any], where: str) -> None:
    """A case's protocol and preset against its scenario's, before the scenario is loaded (`parse_case`): loaded
    first, a case naming two protocols was refused for what the scenario's alone could not take (trial 0205
    item 7). A scenario protocol that is no protocol at all is left to the loader: its "did you mean" is the fix."""
    inner = obj.get("scenario")
    for key in ("protocol", "preset"):
        if isinstance(inner, dict) and key in obj and key in inner and obj[key] != inner[key] and (
                key == "preset" or ":" in str(inner[key]) or REGISTRY.known(str(inner[key]))):
            raise InputError(f"{where}: {key!r} is {obj[key]!r} but its scenario's is {inner[key]!r}", path=where)
