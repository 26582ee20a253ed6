"""The run folder of `epfuzz fuzz`: new or empty, claimed by one run, given back by a run that wrote nothing.

Every engine (guided, libFuzzer here, libFuzzer in the guest) claims its folder here and fuzzes inside
`Claim.released_on_failure`, so a retry with the same --run-dir after a failed start is not refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from epfuzz.infra.errors import InputError

#: how many `-N` suffixes a default run folder name tries before giving up
RUN_DIR_TRIES = 1000


#: what claims a --run-dir the user names: every engine's run folder has it, and creating it is atomic
CLAIM = "corpus"


#: the subfolders an engine makes in its run folder before it writes anything into them
OWN = (CLAIM, "artifacts", "jobs")


@dataclass(frozen=True)
class Claim:
    """A run folder claimed for one run; `made` when this run created the folder itself (a --run-dir the
    user named may have been there already, empty: it is theirs, and stays)."""

    path: Path
    made: bool

    @contextlib.contextmanager
    def released_on_failure(self) -> Iterator[Path]:
        """The folder, given back if the campaign fails before writing into it: a named --run-dir whose
        guest failed to boot kept its claimed, empty corpus/, and the retry was refused as not empty."""
        try:
            yield self.path
        except BaseException:
            self.release()
            raise

    def untouched(self) -> bool:
        """Whether nothing was written into the folder: it holds only empty folders of OWN."""
        try:
            return all(p.name in OWN and p.is_dir() and not p.is_symlink() and not any(p.iterdir())
                       for p in self.path.iterdir())
        except OSError:
            return False

    def release(self) -> None:
        """Remove what the claim and the engine made (OWN, then the folder if this run made it), only while
        all of it is empty: anything written stays as the run's record, and so does the claim."""
        if not self.untouched():
            return
        with contextlib.suppress(OSError):  # the failure being raised is the one to report
            for p in list(self.path.iterdir()):
                p.rmdir()  # refuses a folder something wrote into since the look above
            if self.made:
                self.path.rmdir()


def fresh_run_dir(run_dir: Path | None, default: Path) -> Claim:
    """The run folder, which must be new or empty: a reused folder's old findings and corpus would
    be read back as this run's (a fixed protocol reported its buggy twin's bugs). The `default` name (one per
    second) is claimed by creating it, with `-2`, `-3`, ... after a name taken: two runs started in the same
    second collided, the second refused with "name a new --run-dir" though the user had named none. A named
    one, which may exist already (empty), is claimed by creating its `corpus/` in it: checked, then created
    later, two runs started at once both passed the check and shared the folder."""
    if run_dir is None:
        for n in range(1, RUN_DIR_TRIES + 1):
            path = default if n == 1 else default.with_name(f"{default.name}-{n}")
            try:
                path.mkdir(parents=True)
                return Claim(path, made=True)
            except FileExistsError:
                continue
        raise InputError(f"run folders {default} to -{RUN_DIR_TRIES} all exist; name a new --run-dir")
    path = run_dir
    taken = InputError(f"run folder {path} already exists and is not empty; name a new --run-dir")
    try:
        path.mkdir(parents=True)
        made = True
    except FileExistsError:
        made = False
        if not path.is_dir():
            raise InputError(f"run folder {path} is a file, not a folder; name a new --run-dir") from None
    if any(path.iterdir()):
        raise taken
    try:
        (path / CLAIM).mkdir()
    except FileExistsError:  # another run claimed it since the look above
        raise taken from None
    return Claim(path, made)
