"""The plug-in API reference in docs/plugins.md, generated from the code into the markdown itself.

The page's API sections were mkdocstrings directives (`::: epfuzz.ir.ops`): filled in on the site, empty in
the markdown a pip install carries, which is what the README and `epfuzz list` point to (an author's trial,
M3: no op signatures, no `Layout`/`MemoryView` methods). Each section is now the text this module writes
between `<!-- apiref MODULE: NAME ... -->` and `<!-- /apiref -->`, the same on the site and in the markdown;
tests/zoo/test_apiref.py fails when the committed text is not what the code gives.

    python -m epfuzz.protocols.apiref docs/plugins.md           # rewrite the sections
    python -m epfuzz.protocols.apiref --check docs/plugins.md   # exit 1 where one is stale
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from epfuzz.protocols.base import Protocol, Receiver

SECTION = re.compile(r"(<!-- apiref ([\w.]+): ([\w ]+) -->\n)(.*?)(<!-- /apiref -->)", re.S)
#: the interfaces whose methods a subclass implements: an override with no docstring of its own adds nothing
INTERFACES = (Protocol, Receiver)
#: how a module's classes are written in the text (`ops.Write`, as a plug-in names them)
PREFIX = {"epfuzz.ir.ops": "ops."}


def _param(p: inspect.Parameter) -> str:
    ann = "" if p.annotation is inspect.Parameter.empty else f": {p.annotation}"
    default = "" if p.default is inspect.Parameter.empty else f" = {p.default!r}"
    star = "*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else ""
    return f"{star}{p.name}{ann}{default}"


def signature(fn: Callable[..., Any]) -> str:
    """'(a: int, b: str = 'x') -> bool' without `self`, annotations as written in the source."""
    sig = inspect.signature(fn)
    params = [_param(p) for name, p in sig.parameters.items() if name != "self"]
    ret = "" if sig.return_annotation is inspect.Signature.empty else f" -> {sig.return_annotation}"
    return f"({', '.join(params)}){ret}"


def _fields(cls: type) -> str:
    out = []
    for f in dataclasses.fields(cls):
        default = "" if f.default is dataclasses.MISSING else f" = {f.default!r}"
        out.append(f"{f.name}: {f.type}{default}")
    return f"({', '.join(out)})"


def _head(cls: type, prefix: str) -> str:
    if dataclasses.is_dataclass(cls):
        return f"{prefix}{cls.__name__}{_fields(cls)}"
    init = cls.__dict__.get("__init__")
    if init is None or getattr(cls, "_is_protocol", False):  # an ABC, a typing.Protocol: no constructor to call
        return f"class {prefix}{cls.__name__}"
    return f"{prefix}{cls.__name__}{signature(init).removesuffix(' -> None')}"


#: a class attribute with its `#:` comment, as the source writes them (`#: ...` lines, then `name: type = value`)
ATTRIBUTE = re.compile(r"((?:^    #: .*\n)+)^    (\w+): (.+?) = (.+)$", re.M)


def _attributes(cls: type) -> list[str]:
    """One line per documented class attribute of a class that is no dataclass (its fields are in its head)."""
    if dataclasses.is_dataclass(cls):
        return []
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return []
    out = []
    for m in ATTRIBUTE.finditer(source):
        doc = " ".join(line.strip().removeprefix("#:").strip() for line in m.group(1).splitlines())
        out.append(f"- `{m.group(2)}: {m.group(3)} = {m.group(4).split('  #')[0].strip()}`: {doc}")
    return out


def _first_paragraph(doc: str | None) -> str:
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split()) if doc else ""


def _members(cls: type) -> list[str]:
    """One line per public method or property the class defines (an interface override without a docstring
    of its own left out: the interface's entry says it)."""
    out = []
    for name, obj in cls.__dict__.items():
        if name.startswith("_"):
            continue
        fn = obj.fget if isinstance(obj, property) else obj.__func__ if isinstance(obj, staticmethod) else obj
        if not inspect.isfunction(fn):
            continue
        overrides = any(name in base.__dict__ for base in INTERFACES if base is not cls and issubclass(cls, base))
        if overrides and not fn.__doc__:
            continue
        sig = f" -> {inspect.signature(fn).return_annotation}" if isinstance(obj, property) else signature(fn)
        doc = _first_paragraph(fn.__doc__)
        out.append(f"- `{name}{sig}`" + (f": {doc}" if doc else "") + (" (property)" if isinstance(obj, property)
                                                                          else ""))
    return out


def render(module: str, names: list[str]) -> str:
    """The markdown of `names` of `module`: each class's signature, its docstring, its methods."""
    mod = importlib.import_module(module)
    prefix = PREFIX.get(module, "")
    parts = []
    for name in names:
        cls = getattr(mod, name)
        doc = inspect.cleandoc(cls.__doc__) if cls.__doc__ and cls.__doc__ != _default_doc(cls) else ""
        text = f"#### `{_head(cls, prefix)}`\n\n" + (f"{doc}\n\n" if doc else "")
        members = _attributes(cls) + _members(cls)
        parts.append(text + ("\n".join(members) + "\n\n" if members else ""))
    return "".join(parts)


def _default_doc(cls: type) -> str | None:
    """The docstring dataclasses writes for a class of none ('Write(qp: int, ...)'), not worth repeating."""
    return f"{cls.__name__}{inspect.signature(cls)}".replace(" -> None", "") if dataclasses.is_dataclass(cls) else None


def rewrite(text: str) -> str:
    """`text` with every apiref section regenerated."""
    return SECTION.sub(lambda m: m.group(1) + "\n" + render(m.group(2), m.group(3).split()) + m.group(5), text)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name in [a for a in argv if a != "--check"]:
        path = Path(name)
        text = path.read_text()
        new = rewrite(text)
        if new != text:
            stale.append(name)
            if not check:
                path.write_text(new)
    if check and stale:
        print(f"stale API reference in {', '.join(stale)}: run python -m epfuzz.protocols.apiref {' '.join(stale)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
