"""The fields a (protocol, preset) pair pins: the one place the IR meets the registries.

It sits above both the Scenario IR and the protocol registry (which builds on the
IR), so neither has to import the other's users; `epfuzz.encoding.codec` asks here which
fields to hold fixed.
"""

from __future__ import annotations

from typing import Any

from epfuzz.ir.presets import get_preset
from epfuzz.protocols import get_protocol


def fixed_fields(protocol: str, preset: str) -> dict[str, Any]:
    """Fields pinned by the protocol (how it registers/signals) and the preset (platform).

    Raises `InputError` for an unknown name.
    """
    out = dict(get_preset(preset).fixed)
    out.update(get_protocol(protocol).fixed)
    return out
