from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(autouse=True, scope="session")
def _own_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The root-cause cache (`epfuzz.triage.cache`) of the test run, not the user's: a test that
    groups findings must not be answered by what an earlier session grouped (subprocesses inherit it)."""
    import os

    os.environ["EPFUZZ_CACHE_DIR"] = str(tmp_path_factory.mktemp("epfuzz-cache"))


# the suite's own plug-ins (examples.seqflag, tests.*) are allowed the way a user allows theirs,
# `--allow-plugins <repo root>`: a case or scenario naming them imports them; any other plug-in
# name read from data is refused (tests/cli/test_hardening.py checks that refusal in fresh processes)
def _allow_suite_plugins() -> None:
    from epfuzz.protocols import REGISTRY

    REGISTRY.policy.allow_path(ROOT)


_allow_suite_plugins()
