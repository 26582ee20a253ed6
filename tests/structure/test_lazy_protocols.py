"""Importing the protocol API imports no protocol family (issue 28): the registry's built-in entries
are names with the module that defines each, imported on first use.

`import epfuzz.model.oracle` loaded 25 epfuzz modules, every family among them, for code that needs
`Consume` and `Layout`. Each check runs in a fresh interpreter: this one has imported everything.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from epfuzz.protocols import BUILTIN, BUILTIN_MODULES, FAMILY_PROTOCOLS, REGISTRY, ZOO_FAMILIES

PROTOCOLS_DIR = Path(__file__).resolve().parents[2] / "epfuzz" / "protocols"


def loaded_after(code: str) -> list[str]:
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(m for m in sys.modules if m.startswith('epfuzz'))))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def modules_after(code: str) -> list[str]:
    """The epfuzz modules (not packages: a package's __init__ is a folder's docstring) loaded by `code`."""
    probe = (f"import json, sys\n{code}\nprint(json.dumps(sorted(m for m in sys.modules if m.startswith('epfuzz') "
             "and not hasattr(sys.modules[m], '__path__'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def families(mods: list[str]) -> list[str]:
    return [m for m in mods if m in FAMILY_PROTOCOLS]


def test_importing_the_oracle_or_the_protocol_api_imports_no_family():
    for code in ("import epfuzz.model.oracle", "import epfuzz.protocols",
                 "from epfuzz.protocols import Protocol, Receiver, get_protocol, REGISTRY, BUILTIN"):
        mods = loaded_after(code)
        assert families(mods) == [], (code, mods)
        assert "epfuzz.protocols.dispatch" not in mods, (code, mods)
        assert len(modules_after(code)) <= 14, (code, modules_after(code))  # 23 with every family


def test_a_protocol_asked_for_imports_its_family_alone():
    mods = loaded_after("from epfuzz.protocols import get_protocol\nget_protocol('deep_gdr')")
    assert families(mods) == ["epfuzz.protocols.deep"], mods
    mods = loaded_after("from epfuzz.protocols import get_protocol\nget_protocol('inband_tag_fixed')")
    assert families(mods) == ["epfuzz.protocols.inband_tag"], mods


def test_every_protocol_and_the_zoo_import_them_all_in_the_tables_order():
    mods = loaded_after("from epfuzz.protocols import ZOO")
    assert set(families(mods)) >= set(ZOO_FAMILIES), mods
    # a partial load first (deep, then deepep) does not change the order `list` and the seeds use
    order = subprocess.run(
        [sys.executable, "-c", "from epfuzz.protocols import REGISTRY, get_protocol\nget_protocol('deep_gdr')\n"
         "get_protocol('dispatch_any')\nprint(' '.join(REGISTRY.items))"],
        capture_output=True, text=True, check=True).stdout.split()
    assert order == list(BUILTIN)


def test_the_table_names_what_each_family_defines_and_every_family_is_in_it():
    for module, names in FAMILY_PROTOCOLS.items():
        assert tuple(p.name for p in __import__(module, fromlist=["PROTOCOLS"]).PROTOCOLS) == names, module
    assert list(REGISTRY.items)[:len(BUILTIN)] == list(BUILTIN) == list(BUILTIN_MODULES)
    defining = set()
    for path in PROTOCOLS_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        if any(isinstance(n, (ast.Assign, ast.AnnAssign)) and ast.unparse(
                n.targets[0] if isinstance(n, ast.Assign) else n.target) == "PROTOCOLS" for n in tree.body):
            defining.add(f"epfuzz.protocols.{path.stem}")
    assert defining == set(FAMILY_PROTOCOLS), "a family module missing from protocols.FAMILY_PROTOCOLS"


def test_items_keep_the_tables_order_whatever_was_asked_for_first():
    """`get` imports one family at a time, in the order a process happens to ask; `items` must not
    depend on that order (a test once saw signal_reset_race before flag_write_signal after some
    earlier test had asked for it)."""
    from epfuzz.protocols import BUILTIN_MODULES
    from epfuzz.protocols.registry import Registry

    reg = Registry(builtin=BUILTIN_MODULES)
    for name in reversed(list(BUILTIN_MODULES)):
        reg.get(name)
    assert list(reg.items)[:len(BUILTIN_MODULES)] == list(BUILTIN_MODULES)
