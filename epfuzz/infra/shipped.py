"""Where this install keeps what it carries beside the code: the documentation pages, the tutorial's
example plug-ins, the seed corpora and pinned cases.

From a checkout they are its own `docs/`, `examples/` and `corpus/`; a wheel carries copies inside the
package (`epfuzz/_docs/`, `_examples/`, `_corpus/`: setup.py puts them there), since a pip user has no
checkout and epfuzz is not on PyPI to point at. Messages and help texts name a page by the path this
returns, so what they cite exists in the user's install (a trial was sent to "docs/search.md" from an
empty folder); `epfuzz list` prints the folders.
"""

from __future__ import annotations

from pathlib import Path

#: the epfuzz package folder
PACKAGE = Path(__file__).resolve().parent.parent
#: checkout folder -> the copy of it a wheel carries inside the package: the one list of them. setup.py copies
#: them at build time, reading this assignment from this file's text (pip's isolated build cannot import
#: epfuzz), so it stays a plain dict literal; the compiled core's build leaves them out of mypy's tree
SHIPPED: dict[str, str] = {"corpus": "_corpus", "docs": "_docs", "examples": "_examples"}


def source_root(package: Path) -> Path | None:
    """The checkout the epfuzz package at `package` sits in (a pyproject.toml of the epfuzz project
    beside it), or None for an installed package."""
    try:
        text = (package.parent / "pyproject.toml").read_text()
    except OSError:
        return None
    return package.parent if 'name = "epfuzz"' in text else None


def _folder(checkout_name: str) -> Path | None:
    root = source_root(PACKAGE)
    if root is not None and (root / checkout_name).is_dir():
        return root / checkout_name
    shipped = PACKAGE / SHIPPED[checkout_name]
    return shipped if shipped.is_dir() else None


def docs_folder() -> Path | None:
    """The documentation pages (markdown, the docs site's sources), or None when this install has none."""
    return _folder("docs")


def examples_folder() -> Path | None:
    """The example plug-in package the tutorial fuzzes (`examples.seqflag:...`), or None."""
    return _folder("examples")


def corpus_folder() -> Path | None:
    """The seed corpora and pinned cases (`epfuzz.continuous.targets.corpus_root` finds the same folder
    for the harnesses, from a layer this one may not import)."""
    return _folder("corpus")


def shown(path: Path) -> str:
    """A path as typed from the working directory: relative below it, absolute elsewhere."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def docs_page(name: str) -> str:
    """Where page `name` (e.g. "search.md") of this install's documentation is, for a message to cite;
    when the install carries no documentation, the page's name in the repository's docs/."""
    folder = docs_folder()
    if folder is not None and (folder / name).is_file():
        return shown(folder / name)
    return f"docs/{name} of epfuzz's sources"


def carried() -> list[str]:
    """`epfuzz list`'s lines: where this install's documentation, examples and cases are."""
    folders = (("documentation", docs_folder()), ("examples (the tutorial's plug-ins)", examples_folder()),
               ("cases and seed corpora (regressions/: the pinned cases)", corpus_folder()))
    return [f"{what}: {shown(f) if f is not None else 'not in this install'}" for what, f in folders]

def installed_copy(path: Path) -> Path | None:
    """This install's file (or folder) that a missing `corpus/...`, `docs/...` or `examples/...` path names:
    the README's commands name checkout paths, which a pip user lacks. Only ever cited in an error, never
    read in the path's place: a case another folder holds may not be the one meant."""
    if path.is_absolute() or len(path.parts) < 2 or path.exists():
        return None
    top = {"corpus": corpus_folder, "docs": docs_folder, "examples": examples_folder}.get(path.parts[0])
    folder = top() if top is not None else None
    copy = folder.joinpath(*path.parts[1:]) if folder is not None else None
    return copy if copy is not None and copy.exists() else None


def where_to_keep(protocol: str = "") -> str:
    """What `minimize` says about keeping its case: the checkout's corpus/regressions/ is what `make replay`
    checks; elsewhere (a pip install) there is no such folder to copy into. A plug-in's case (`protocol`
    module:Attr) is checked only with its module's folder allowed, or it is unreadable (new-user trial item 3)."""
    if Path("corpus", "regressions").is_dir():
        allow = " ALLOW_PLUGINS=DIR (the folder its module is in)" if ":" in protocol else ""
        return f"copy into corpus/regressions/ to keep it: make replay{allow} checks it"
    return "keep it with your cases: epfuzz replay FOLDER checks each against its expected verdict"


def missing(path: Path) -> str:
    """What an error about a path that is not there adds: this install's copy of a checkout path
    (`installed_copy`), else for a relative path the folder it was looked for from. A printed replay command
    names its run folder relative to the folder epfuzz ran in (docs/usage.md): pasted in another folder, the
    bare "No such file or directory" did not say that the path was right, only the folder wrong."""
    copy = installed_copy(path)
    if copy is not None:
        return f"; this install carries it as {shown(copy)}"
    if path.is_absolute() or str(path) == "-":
        return ""
    return f" (relative to the current folder {Path.cwd()}; printed replay commands run from the folder epfuzz ran in)"
