"""The wheel carries what a pip user has no checkout for (issue 28, and a pip-only trial): `corpus/` (the
seed corpora and pinned cases) as `epfuzz/_corpus/`, so a pip-installed `epfuzz fuzz NAME` starts from the
same seeds as the checkout; `docs/` (the documentation pages) as `epfuzz/_docs/` and `examples/` (the
tutorial's plug-ins) as `epfuzz/_examples/`, which `epfuzz list` and the messages that cite a page point at.
The long description is README.md with its links to files of the repository reworded: on a pip user's
machine they lead nowhere. Everything else is configured in pyproject.toml; `epfuzz.continuous.targets` and
`epfuzz.infra.shipped` find the copies."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def shipped() -> dict[str, str]:
    """`epfuzz.infra.shipped.SHIPPED` (checkout folder -> its copy in the package), the one list of them, read
    from that file's text: this runs in pip's isolated build environment, where epfuzz (and what it imports)
    cannot be imported."""
    path = HERE / "epfuzz" / "infra" / "shipped.py"
    for node in ast.parse(path.read_text(), str(path)).body:
        target, value = ((node.target, node.value) if isinstance(node, ast.AnnAssign)
                         else (node.targets[0], node.value) if isinstance(node, ast.Assign) else (None, None))
        if isinstance(target, ast.Name) and target.id == "SHIPPED" and value is not None:
            try:
                folders = ast.literal_eval(value)
            except ValueError:
                break
            if isinstance(folders, dict):
                return folders
    raise SystemExit(f"setup.py: {path} has no SHIPPED = {{...}} literal to read the shipped folders from")


SHIPPED = shipped()


class BuildPyWithCorpus(build_py):
    """build_py, then corpus/ (seed folders, their .verdicts, regressions/, cuda/), docs/ and examples/ into
    the package."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads them in place
            return
        for name, copy in SHIPPED.items():
            src = HERE / name
            if src.is_dir():
                self._copy(src, Path(self.build_lib) / "epfuzz" / copy)

    @staticmethod
    def _copy(src: Path, dest: Path) -> None:
        shutil.rmtree(dest, ignore_errors=True)
        for path in sorted(src.rglob("*")):
            rel = path.relative_to(src)
            if path.is_file() and not any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, dest / rel)


def long_description() -> str:
    """README.md for the package index and `pip show`: a link to a page of docs/ names the page, which the
    package carries (`epfuzz list` prints the folder); a link to another file of the repository is its name."""
    text = (HERE / "README.md").read_text()
    text = re.sub(r"\[([^\]]+)\]\(docs/([\w-]+\.md)(#[\w-]+)?\)", r"\1 (`\2`)", text)
    text = re.sub(r"\[([^\]]+)\]\((?!https?:)[^)#]+\)", r"\1", text)
    return text


setup(cmdclass={"build_py": BuildPyWithCorpus}, long_description=long_description(),
      long_description_content_type="text/markdown")
