"""The layering stays visible in the imports: a lower layer never imports a higher one (lazy
imports inside functions included), and no module imports another module's private name.

    tools (CLI, comparisons, fuzz)  >  studies (sweeps, store, plots)  >  interop (ASTRA-sim)  >  collectives (workload + system layers)
      >  traces | network_backends (side by side, neither imports the other)
      >  astra_configs  >  foundation (the package root: errors, jsonio, specs, resources, _core)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import REPO

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ALLOWED = {
    "foundation": {"foundation"},
    "astra_configs": {"foundation", "astra_configs"},
    "traces": {"foundation", "astra_configs", "traces"},
    "network_backends": {"foundation", "astra_configs", "network_backends"},
    "collectives": {"foundation", "astra_configs", "traces", "network_backends", "collectives"},
    "interop": {"foundation", "astra_configs", "traces", "network_backends", "collectives", "interop"},
    "studies": {"foundation", "astra_configs", "traces", "network_backends", "collectives", "interop", "studies"},
    "tools": {"foundation", "astra_configs", "traces", "network_backends", "collectives", "interop", "studies", "tools"},
}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ALLOWED else "foundation"


def modules() -> dict[str, Path]:
    """Every module of the package, by name, from pyproject's package-dir map."""
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = tool["package-dir"]
    out = {}
    for package in tool["packages"]:
        parent = max((p for p in dirs if package == p or package.startswith(p + ".")), key=len)
        folder = REPO / dirs[parent] / package[len(parent):].lstrip(".").replace(".", "/")
        for path in folder.glob("*.py"):
            out[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return out


def imports(module: str, source: str, is_package: bool) -> list[tuple[str, list[str], int]]:
    """(imported tracefabric module, names taken from it, line) for every import in `source`."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno) for a in node.names if a.name.split(".")[0] == "tracefabric"]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if target.split(".")[0] == "tracefabric":
                found.append((target, [a.name for a in node.names], node.lineno))
    return sorted(found, key=lambda f: f[2])


def violations(module: str, source: str, is_package: bool, known: set[str]) -> list[str]:
    out = []
    for target, names, line in imports(module, source, is_package):
        for name in names or [None]:
            full = f"{target}.{name}" if name and f"{target}.{name}" in known else target
            if layer(full) not in ALLOWED[layer(module)]:
                out.append(f"{module}:{line}: a {layer(module)} module imports {full} ({layer(full)})")
            if name and name.startswith("_") and name != "_core" and full == target:
                out.append(f"{module}:{line}: imports {target}'s private name {name}")
    return out


def test_no_module_imports_a_higher_layer_or_a_private_name():
    found = modules()
    assert len(found) >= 35
    assert {layer(m) for m in found} == set(ALLOWED)
    known = set(found) | {"tracefabric._core"}
    problems = [v for m, path in sorted(found.items())
                for v in violations(m, path.read_text(), path.stem == "__init__", known)]
    assert problems == []


def test_the_checker_catches_both_kinds():
    known = {"tracefabric.traces.synthesis", "tracefabric.tools.cli", "tracefabric.traces.chakra_io"}
    src = ("def f():\n    from ..tools.cli import main\n"
           "from .chakra_io import _framed, framed\n"
           "from tracefabric.network_backends.packet import simulate\n")
    assert violations("tracefabric.traces.synthesis", src, False, known) == [
        "tracefabric.traces.synthesis:2: a traces module imports tracefabric.tools.cli (tools)",
        "tracefabric.traces.synthesis:3: imports tracefabric.traces.chakra_io's private name _framed",
        "tracefabric.traces.synthesis:4: a traces module imports tracefabric.network_backends.packet (network_backends)",
    ]
    # A package's relative import starts from the package itself; the extension module is allowed.
    assert violations("tracefabric.collectives", "from .. import _core\nfrom .workload import check\n", True, known) == []
