"""The package's import structure, read from the source with :mod:`ast`.

Every ``import`` of a ``queuesgd`` module counts, at the top of a module or
inside a function (a function-level import only postpones a cycle, it does not
remove it); imports under ``if TYPE_CHECKING:`` do not run and do not count.

- The module import graph has no cycle.
- No module imports a private name of another module (``from queuesgd.x import
  _y``, or ``x._y`` through an imported module), nor a private module of
  another package (``queuesgd.queueing._exact`` is for ``queuesgd.queueing``
  alone). ``queuesgd._checks`` is the package's shared private helper module
  and may be used everywhere.
- The layering of DESIGN.md: the formalisms and the Markov solvers never
  import what is built on them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "queuesgd"

#: Private modules every module of the package may import.
SHARED_PRIVATE = {"queuesgd._checks"}

#: Known offenders in files other people are changing now (issue 11), each
#: ``(importer, imported module or private name)``. Remove an entry when its
#: file is fixed; the test fails on an entry that no longer occurs, so the list
#: cannot go stale.
PRIVATE_ALLOWLIST: set[tuple[str, str]] = set()
#: Import edges known to close a cycle, ``(importer, imported)``, same rules.
CYCLE_ALLOWLIST: set[tuple[str, str]] = set()

LOWER = ("queuesgd.petri", "queuesgd.queueing", "queuesgd.dag", "queuesgd.markov")
UPPER = ("queuesgd.schemes", "queuesgd.prediction", "queuesgd.cli", "queuesgd.harness", "queuesgd.registry")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_package(mod: str) -> bool:
    return MODULES[mod].name == "__init__.py"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                stack.extend(child.orelse)
            else:
                stack.append(child)


def _resolve(importer: str, node: ast.ImportFrom) -> str:
    """Absolute module name of ``from <module> import ...`` (relative imports too)."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if not _is_package(importer):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


class _Imports:
    """Imports of one module: edges (module, line) and private uses (what, line)."""

    def __init__(self, mod: str) -> None:
        self.mod = mod
        tree = ast.parse(MODULES[mod].read_text(), filename=str(MODULES[mod]))
        self.edges: list[tuple[str, int]] = []
        self.private: list[tuple[str, int]] = []
        aliases: dict[str, str] = {}  # local name -> queuesgd module it is bound to
        nodes = list(_runtime_nodes(tree))
        for node in nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "queuesgd":
                        self._edge(a.name, node.lineno)
                        aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else "queuesgd"
            elif isinstance(node, ast.ImportFrom):
                src = _resolve(mod, node)
                if src.split(".")[0] != "queuesgd":
                    continue
                for a in node.names:
                    sub = f"{src}.{a.name}"
                    if sub in MODULES:  # a submodule
                        self._edge(sub, node.lineno)
                        aliases[a.asname or a.name] = sub
                    else:
                        self._edge(src, node.lineno)
                        if _private(a.name) and src not in SHARED_PRIVATE:
                            self.private.append((f"{src}.{a.name}", node.lineno))
        for node in nodes:  # module._name through an imported module
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and _private(node.attr)
            ):
                target = f"{aliases[node.value.id]}.{node.attr}"
                if target not in MODULES and aliases[node.value.id] not in SHARED_PRIVATE:
                    self.private.append((target, node.lineno))

    def _edge(self, target: str, line: int) -> None:
        if target not in MODULES:
            raise AssertionError(f"{self.mod}:{line} imports {target!r}, which is no module of queuesgd")
        if target != self.mod:
            self.edges.append((target, line))
        if not _private_module_allowed(self.mod, target):
            self.private.append((target, line))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_module_allowed(importer: str, target: str) -> bool:
    """A private module is for the package that holds it (and its subpackages)."""
    if target in SHARED_PRIVATE:
        return True
    parts = target.split(".")
    for i, part in enumerate(parts):
        if _private(part):
            owner = ".".join(parts[:i])
            if not (importer == owner or importer.startswith(owner + ".")) or owner == "queuesgd":
                return False
    return True


IMPORTS = {mod: _Imports(mod) for mod in MODULES}


def _find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph ``edges`` as a list of modules (first repeated last), or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(edges, WHITE)
    for start in sorted(edges):
        if colour[start] != WHITE:
            continue
        path = [start]
        iters = [iter(sorted(edges[start]))]
        colour[start] = GREY
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                colour[path.pop()] = BLACK
                iters.pop()
            elif colour[nxt] == GREY:
                return path[path.index(nxt) :] + [nxt]
            elif colour[nxt] == WHITE:
                colour[nxt] = GREY
                path.append(nxt)
                iters.append(iter(sorted(edges[nxt])))
    return None


def test_module_import_graph_has_no_cycle() -> None:
    edges = {
        mod: {t for t, _ in imp.edges if (mod, t) not in CYCLE_ALLOWLIST} for mod, imp in IMPORTS.items()
    }
    cycles = []
    while (cycle := _find_cycle(edges)) is not None:  # one cycle per loop, then cut its last edge
        cycles.append(" -> ".join(cycle))
        edges[cycle[-2]].discard(cycle[-1])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)
    present = {(m, t) for m, imp in IMPORTS.items() for t, _ in imp.edges}
    assert CYCLE_ALLOWLIST <= present, f"stale CYCLE_ALLOWLIST entries: {sorted(CYCLE_ALLOWLIST - present)}"


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The checker itself: a three-module loop and a diamond (no loop)."""
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}) is None


def test_no_private_name_crosses_modules() -> None:
    found = {(m, what) for m, imp in IMPORTS.items() for what, _ in imp.private}
    bad = sorted(
        f"{m}:{line} uses {what}"
        for m, imp in IMPORTS.items()
        for what, line in imp.private
        if (m, what) not in PRIVATE_ALLOWLIST
    )
    assert not bad, "private names across modules:\n" + "\n".join(bad)
    assert PRIVATE_ALLOWLIST <= found, f"stale PRIVATE_ALLOWLIST entries: {sorted(PRIVATE_ALLOWLIST - found)}"


@pytest.mark.parametrize(
    ("importer", "target", "allowed"),
    [
        ("queuesgd.queueing.mva", "queuesgd.queueing._exact", True),
        ("queuesgd.harness.runners", "queuesgd.harness._torch", True),
        ("queuesgd.schemes.ps.sync_ps", "queuesgd._checks", True),
        ("queuesgd.schemes.ps.sync_ps", "queuesgd.queueing._exact", False),
        ("queuesgd.cli", "queuesgd.harness._torch", False),
        ("queuesgd.cli", "queuesgd._other", False),
    ],
)
def test_private_module_rule(importer: str, target: str, allowed: bool) -> None:
    assert _private_module_allowed(importer, target) is allowed


def test_formalisms_never_import_upward() -> None:
    bad = sorted(
        f"{m}:{line} imports {t}"
        for m, imp in IMPORTS.items()
        if m.startswith(LOWER)
        for t, line in imp.edges
        if any(t == u or t.startswith(u + ".") for u in UPPER)
    )
    assert not bad, "layering (DESIGN.md) broken:\n" + "\n".join(bad)


def test_only_the_entry_points_import_the_cli() -> None:
    """``queuesgd.cli`` is the top layer: the library and the harness never import it (its shared
    parser and error handling live below, in ``queuesgd.command_line``)."""
    allowed = ("queuesgd.cli", "queuesgd.__main__")
    bad = sorted(
        f"{m}:{line} imports {t}"
        for m, imp in IMPORTS.items()
        if not any(m == a or m.startswith(a + ".") for a in allowed)
        for t, line in imp.edges
        if t == "queuesgd.cli" or t.startswith("queuesgd.cli.")
    )
    assert not bad, "layering (docs/design.md) broken:\n" + "\n".join(bad)


#: Family subpackages of ``queuesgd.schemes`` and the family-to-family edges
#: documented in ``queuesgd/schemes/__init__.py`` (a scheme that truly builds on
#: another family). Every other scheme module imports only the shared modules
#: (``base``, ``costs``, ``laws``, ``memory``, ``predictors``).
SCHEME_FAMILIES = ("allreduce", "barrier", "eager", "fine", "parallel", "ps", "ssp")
FAMILY_EDGES = {
    ("allreduce", "barrier"),
    ("allreduce", "fine"),
    ("fine", "barrier"),
    ("parallel", "barrier"),
    ("parallel", "fine"),
    ("ps", "barrier"),
    ("ps", "fine"),
    ("ssp", "barrier"),
}


def _family(mod: str) -> str | None:
    """``ps`` for ``queuesgd.schemes.ps.sync_ps``; ``"shared"`` for ``queuesgd.schemes.base``; else None."""
    parts = mod.split(".")
    if parts[:2] != ["queuesgd", "schemes"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in SCHEME_FAMILIES else "shared"


def test_scheme_families_import_only_shared_modules_and_documented_families() -> None:
    on_disk = {p.name for p in (ROOT / "schemes").iterdir() if (p / "__init__.py").is_file()}
    assert on_disk == set(SCHEME_FAMILIES)
    found, bad = set(), []
    for m, imp in IMPORTS.items():
        src = _family(m)
        if src is None or m == "queuesgd.schemes":
            continue
        for t, line in imp.edges:
            dst = _family(t)
            if dst is None or dst == src or dst == "shared" or t == "queuesgd.schemes":
                continue
            found.add((src, dst))
            if src == "shared" or (src, dst) not in FAMILY_EDGES:
                bad.append(f"{m}:{line} imports {t} ({src} -> {dst})")
    assert not bad, "scheme family layering broken:\n" + "\n".join(sorted(set(bad)))
    assert FAMILY_EDGES <= found, f"stale FAMILY_EDGES entries: {sorted(FAMILY_EDGES - found)}"
