"""The one small interface every backend implements (sim, verbs, cuda).

A backend says whether it can run here (and why not), where it runs (in this
process, or only inside the epfuzz QEMU guest), whether a verdict is reproducible
from the scenario alone (deterministic) or needs repetitions and a rate, and which
scenario fields tell one of its bugs from another; and it runs one scenario. The
harness, the campaign and crash dedup ask these questions instead of comparing
backend names, so a new backend is one class.
"""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from epfuzz.ir.scenario import Scenario
from epfuzz.model.oracle import Violation
from epfuzz.protocols.base import Protocol

if TYPE_CHECKING:
    from epfuzz.protocols.base import Protocol

#: the scenario fields that decide whether an RDMA ordering bug exists: the dedup signature's knobs
#: when the protocol names none of its own
SIGNATURE_FIELDS = ("signal.kind", "signal.other_qp", "signal.fence", "knobs.mr_relaxed",
                    "knobs.nic_relaxed_ordering", "knobs.atomic_mode", "knobs.hca_o920",
                    "knobs.adaptive_routing", "knobs.ido")


class Where(enum.Enum):
    """Where a backend's runs happen, as seen from this process."""

    HERE = "here"        # in this process
    GUEST = "guest"      # only inside the epfuzz soft-RoCE QEMU guest (epfuzz/guest/vm.py)


@dataclass
class Outcome:
    backend: str
    violation: Violation | None
    runs: int = 1                     # repetitions of the scenario
    hits: int = 0                     # repetitions that produced a violation
    rules_fired: frozenset[str] = frozenset()
    summary: str = ""                 # a short trace summary for `epfuzz run`
    detail: Any = None                # backend-specific (the SimRun for sim)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return "finding" if self.violation is not None else "clean"

    @property
    def rate(self) -> float:
        return self.hits / self.runs if self.runs else 0.0


class Backend(abc.ABC):
    name: str = ""
    deterministic: bool = True

    @abc.abstractmethod
    def availability(self) -> tuple[bool, str]:
        """(can run here, why not / how): checked before any fuzzing starts."""

    def where(self) -> Where:
        """Where a run happens: a GUEST backend cannot be driven from this process by a fuzz
        harness, so the campaign moves the whole harness into the guest instead."""
        return Where.HERE

    def signature_fields(self, proto: Protocol) -> tuple[str, ...]:
        """The scenario fields (dotted paths) that tell one finding of this backend from another:
        the protocol's own list, else the RDMA knobs that decide whether an ordering bug exists
        (for a plug-in, less the `signal.*` fields its ops never follow: epfuzz.model.follows)."""
        if proto.signature_knobs:
            return proto.signature_knobs
        if type(proto).__module__.split(".")[0] == "epfuzz":
            return SIGNATURE_FIELDS
        from epfuzz.model.follows import followed
        from epfuzz.protocols import REGISTRY

        spec = next((k for k, v in REGISTRY.loaded.items() if v is proto), None)
        if spec is None:
            return SIGNATURE_FIELDS
        keep = followed(proto, spec)
        return tuple(f for f in SIGNATURE_FIELDS if not f.startswith("signal.") or f in keep)

    def cannot_show(self) -> dict[str, str]:
        """The rule cells (named as the sim's `rules_fired` names them) this backend's platform never
        exhibits, each with why: a finding that needs one is clean here whatever the protocol does, so a
        clean run of it proves no fix (a pip user read soft-RoCE's clean run of a C2b case as one)."""
        return {}

    @abc.abstractmethod
    def run(self, scn: Scenario, proto: Protocol, repeats: int = 1) -> Outcome:
        """Run the scenario of the (already resolved) protocol; never raise for a protocol
        violation, report it."""

