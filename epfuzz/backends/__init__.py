"""Backends by name, each behind the same three-method interface."""

from __future__ import annotations

from epfuzz.backends.base import Backend, Outcome
from epfuzz.infra.errors import BackendUnavailable, InputError
from epfuzz.ir.scenario import Scenario


def _make(name: str) -> Backend:
    if name == "sim":
        from epfuzz.backends.sim import SimBackend
        return SimBackend()
    if name == "verbs":
        from epfuzz.backends.verbs import VerbsBackend
        return VerbsBackend()
    if name == "cuda":
        from epfuzz.backends.cuda import CudaBackend
        return CudaBackend()
    raise InputError(f"unknown backend {name!r}; known: {', '.join(NAMES)}")


NAMES = ("sim", "verbs", "cuda")
_cache: dict[str, Backend] = {}


def get_backend(name: str, *, require: bool = True) -> Backend:
    """The backend; with `require`, one that cannot run here raises with the reason."""
    b = _cache.get(name) or _cache.setdefault(name, _make(name))
    if require:
        ok, why = b.availability()
        if not ok:
            raise BackendUnavailable(f"backend {name} cannot run here: {why}")
    return b


def blind_spot(backend: Backend, scn: Scenario) -> str:
    """The line saying that `backend` cannot show the finding `scn` is on the sim (a rule cell the sim's
    finding needs is one the backend declares it never exhibits), or "": a backend that declares nothing
    costs no sim run."""
    blind = backend.cannot_show()
    if not blind:
        return ""
    from epfuzz.protocols import get_protocol

    ref = get_backend("sim", require=False).run(scn, get_protocol(scn.protocol))
    hit = sorted(r for r in ref.rules_fired if r in blind) if ref.violation is not None else []
    if not hit:
        return ""
    why = "; ".join(dict.fromkeys(blind[r] for r in hit))
    return (f"backend {backend.name} cannot show {', '.join(hit)}, which this finding needs on the sim ({why}): "
            "clean here does not mean fixed")


__all__ = ["Backend", "Outcome", "NAMES", "blind_spot", "get_backend"]
