from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def root() -> Path:
    return ROOT


# the suite's own plug-ins (examples.seqflag, tests.*) are allowed the way a user allows theirs,
# `--allow-plugins <repo root>`: a case or scenario naming them imports them; any other plug-in
# name read from data is refused (tests/cli/test_hardening.py checks that refusal in fresh processes)
def _allow_suite_plugins() -> None:
    from epfuzz.protocols import REGISTRY

    REGISTRY.policy.allow_path(ROOT)


_allow_suite_plugins()
