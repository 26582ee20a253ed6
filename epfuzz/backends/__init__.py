"""Backends by name, each behind the same three-method interface."""

from __future__ import annotations

from epfuzz.backends.base import Backend, Outcome
from epfuzz.infra.errors import BackendUnavailable, InputError


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


__all__ = ["Backend", "Outcome", "NAMES", "get_backend"]
