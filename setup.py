"""The wheel carries the seed corpora and pinned cases (issue 28): `corpus/` is copied into the built
package as `epfuzz/_corpus/`, so a pip-installed `epfuzz fuzz NAME` starts from the same seeds as the
checkout. Everything else is configured in pyproject.toml; `epfuzz.continuous.targets` finds the copy."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyWithCorpus(build_py):
    """build_py, then corpus/ (seed folders, their .verdicts, regressions/, cuda/) into the package."""

    def run(self) -> None:
        super().run()
        src = HERE / "corpus"
        if self.editable_mode or not src.is_dir():  # an editable install reads corpus/ in place
            return
        dest = Path(self.build_lib) / "epfuzz" / "_corpus"
        shutil.rmtree(dest, ignore_errors=True)
        for path in sorted(src.rglob("*")):
            rel = path.relative_to(src)
            if path.is_file() and not any(part.startswith(".") for part in rel.parts):
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, dest / rel)


setup(cmdclass={"build_py": BuildPyWithCorpus})
