"""A Griffe extension of the documentation site: Sphinx roles become cross-references.

The docstrings of ``queuesgd`` name other objects with Sphinx roles, such as
``:class:`~queuesgd.AsyncPS``` or ``:func:`derive```, which Markdown prints
as they are. mkdocstrings loads the package with this extension
(mkdocs.yml: ``extensions``), and before any docstring is rendered every role
becomes an mkdocs-autorefs reference, ``<autoref identifier="..." optional>``,
around the name in code. Autorefs links it to the page that documents the
object; an object the site does not document (``numpy.random.Generator``, a
private helper) stays as code, unlinked, without a warning.

A name is looked up the way Sphinx's Python domain does: as written, then
inside the object whose docstring it is and each enclosing object and module
up to the package (so ``:meth:`Formula.latex``` in ``queuesgd.formula``
finds ``queuesgd.formula.Formula.latex``); a leading ``.`` is relative to
the current package (``~.pipeline_graph.pipeline_graph``). ``~`` shows only
the last component; functions and methods get ``()``, as Sphinx writes them.
The docstrings in the repository keep their roles: ``help()`` and other
tools read them unchanged.

:class:`CommentDocstrings` gives a constant documented the Sphinx way, by
``#:`` comment lines right above it, those lines as its docstring: Griffe
reads only a string below an assignment, and mkdocstrings leaves out a member
without a docstring, so no such constant reached the API reference. It runs
first (mkdocs.yml), so the roles of these comments become links too.

:class:`DoctestsToCode` fences a doctest written in a
docstring's text before its first section (a property's one-line example,
without an ``Examples`` heading): Markdown would read its ``>>>`` as three
levels of quotation and its code as prose.
"""

from __future__ import annotations

import ast
import html
import re
from collections.abc import Iterator
from typing import Any

import griffe

#: A Sphinx role of the Python domain: ``:class:`target```, ``:py:func:`title <target>```.
ROLE = re.compile(
    r":(?:py:)?(?P<role>class|func|meth|attr|mod|exc|data|obj|const):`(?P<body>[^`]+)`",
)
#: Roles that Sphinx writes with parentheses after the name.
CALLABLE_ROLES = frozenset({"func", "meth"})
_TITLED = re.compile(r"(?P<title>.*?)\s*<(?P<target>[^<>]+)>\s*$", re.DOTALL)


def lazy_exports(root: griffe.Module) -> dict[str, str]:
    """The names ``root`` exports lazily: its ``_EXPORTS`` mapping of name to defining module.

    ``queuesgd/__init__.py`` imports nothing at import time; its ``__getattr__``
    imports ``_EXPORTS[name]`` on first use, so Griffe, which reads the source,
    sees no ``queuesgd.AsyncPS``. The mapping is read from the source too.
    """
    exports = root.members.get("_EXPORTS")
    if exports is None or isinstance(exports, griffe.Alias) or not isinstance(exports, griffe.Attribute):
        return {}
    try:
        mapping = ast.literal_eval(str(exports.value))
    except (ValueError, SyntaxError):
        return {}
    return mapping if isinstance(mapping, dict) else {}


def _lookup(root: griffe.Module, path: str) -> griffe.Object | griffe.Alias | None:
    """The object of ``path`` under ``root``, or None (an alias that does not resolve counts as absent)."""
    if path == root.path:
        return root
    if not path.startswith(root.path + "."):
        return None
    head, _, rest = path[len(root.path) + 1 :].partition(".")
    module = lazy_exports(root).get(head)
    if module is not None and head not in root.members:
        path = ".".join(filter(None, (module, head, rest)))
    try:
        found = root[path[len(root.path) + 1 :]]
        if isinstance(found, griffe.Alias):
            found.final_target  # noqa: B018 - resolves it, or raises
    except Exception:  # noqa: BLE001 - griffe raises KeyError, AliasResolutionError, CyclicAliasError
        return None
    return found


def _scopes(obj: griffe.Object) -> Iterator[str]:
    """``obj``'s path and those of the objects and modules that enclose it, innermost first."""
    current: griffe.Object | None = obj
    while current is not None:
        yield current.path
        current = current.parent  # type: ignore[assignment]


def resolve(target: str, obj: griffe.Object, root: griffe.Module) -> str:
    """The identifier autorefs should look up for ``target`` as written in ``obj``'s docstring.

    Parameters
    ----------
    target : str
        The role's target, without ``~`` (``queuesgd.AsyncPS``, ``Formula.latex``, ``.costs``).
    obj : griffe.Object
        The object whose docstring holds the role.
    root : griffe.Module
        The top package, where names are looked up.

    Returns
    -------
    str
        The canonical path of the object found (where mkdocstrings documents it), else ``target``
        (or its absolute form, for a relative one) unchanged.
    """
    module = obj if obj.is_module else obj.module
    if target.startswith("."):
        dots = len(target) - len(target.lstrip("."))
        package = module.path if module.is_init_module else module.parent.path  # type: ignore[union-attr]
        base = package.rsplit(".", dots - 1)[0] if dots > 1 else package
        candidates = [f"{base}.{target.lstrip('.')}"]
    else:
        candidates = [target, *(f"{scope}.{target}" for scope in _scopes(obj))]
    for candidate in candidates:
        found = _lookup(root, candidate)
        if found is not None:
            return found.final_target.path if isinstance(found, griffe.Alias) else found.path
    return candidates[0]


def convert(text: str, obj: griffe.Object, root: griffe.Module) -> str:
    """``text`` with every Sphinx role replaced by an optional autorefs reference.

    Parameters
    ----------
    text : str
        A docstring.
    obj : griffe.Object
        Its object (names are looked up from there).
    root : griffe.Module
        The top package.

    Returns
    -------
    str
        The docstring, with ``<autoref identifier="..." optional><code>name</code></autoref>``
        for each role.
    """

    def replace(match: re.Match[str]) -> str:
        body = match["body"].strip()
        titled = _TITLED.match(body)
        title, target = (titled["title"], titled["target"]) if titled else (None, body)
        short = target.startswith("~")
        target = target.lstrip("~")
        if title is None:
            title = target.lstrip(".").rsplit(".", 1)[-1] if short else target.lstrip(".")
            if match["role"] in CALLABLE_ROLES and not title.endswith(")"):
                title += "()"
        identifier = html.escape(resolve(target, obj, root))
        return f'<autoref identifier="{identifier}" optional><code>{html.escape(title)}</code></autoref>'

    return ROLE.sub(replace, text)


def _objects(module: griffe.Module) -> Iterator[griffe.Object]:
    """``module`` and every object defined in it or its submodules (aliases left out)."""
    stack: list[griffe.Object] = [module]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(member for member in current.members.values() if not member.is_alias)  # type: ignore[misc]


class SphinxRolesToAutorefs(griffe.Extension):
    """Rewrite the Sphinx roles of a loaded package's docstrings as autorefs references."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Convert every docstring of ``pkg`` once the whole package is loaded."""
        for obj in _objects(pkg):
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = convert(obj.docstring.value, obj, pkg)


#: A NumPy-style section heading: a title, then a line of at least 3 dashes.
_SECTION = re.compile(r"^[ \t]*\S[^\n]*\n[ \t]*-{3,}[ \t]*$", re.M)


def fence_doctests(text: str) -> str:
    r"""``text`` with each doctest before its first section fenced as Python code.

    A doctest runs from a ``>>>`` line to the next blank line (its output
    included); those inside sections (``Examples``) are left to the NumPy
    parser, which renders them as code.

    Parameters
    ----------
    text : str
        A docstring.

    Returns
    -------
    str
        The docstring, each such doctest between a ```` ```python ```` line and a ```` ``` ```` line.

    Examples
    --------
    >>> fence_doctests("A sum.\n\n>>> 1 + 1\n2\n")
    'A sum.\n\n```python\n>>> 1 + 1\n2\n```\n'
    """
    section = _SECTION.search(text)
    end = section.start() if section else len(text)
    lines, out, i = text[:end].split("\n"), [], 0
    while i < len(lines):
        if not lines[i].lstrip().startswith(">>>"):
            out.append(lines[i])
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].strip():
            j += 1
        out += ["```python", *lines[i:j], "```"]
        i = j
    return "\n".join(out) + text[end:]


class DoctestsToCode(griffe.Extension):
    """Fence the doctests that a loaded package's docstrings hold outside their sections."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Fence every such doctest of ``pkg`` once the whole package is loaded."""
        for obj in _objects(pkg):
            if obj.docstring is not None and ">>>" in obj.docstring.value:
                obj.docstring.value = fence_doctests(obj.docstring.value)


#: A Sphinx ``#:`` documentation comment line (what follows it is the text).
_DOC_COMMENT = re.compile(r"^\s*#:(?: |$)(.*)$")


def comment_docstring(lines: list[str], lineno: int) -> str | None:
    """The text of the ``#:`` comment lines right above line ``lineno`` (1-based), or None.

    Parameters
    ----------
    lines : list of str
        The lines of the module.
    lineno : int
        The first line of the assignment.

    Returns
    -------
    str or None
        The comments' text, their ``#:`` removed, one line each; None where the line above is not one.

    Examples
    --------
    >>> comment_docstring(["#: The answer,", "#: exactly.", "ANSWER = 42"], 3)
    'The answer,\\nexactly.'
    >>> comment_docstring(["# a comment", "ANSWER = 42"], 2) is None
    True
    """
    text: list[str] = []
    i = lineno - 2
    while i >= 0 and (found := _DOC_COMMENT.match(lines[i])):
        text.insert(0, found.group(1))
        i -= 1
    return "\n".join(text) if text else None


class CommentDocstrings(griffe.Extension):
    """Give each attribute documented by ``#:`` comments, and without a docstring, those comments as one."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Read the comments of every attribute of ``pkg`` once the whole package is loaded."""
        for obj in _objects(pkg):
            if not obj.is_attribute or obj.docstring is not None or obj.lineno is None:
                continue
            text = comment_docstring(obj.lines_collection[obj.filepath], obj.lineno)  # type: ignore[index]
            if text is not None:
                parser = obj.module.docstring.parser if obj.module.docstring else None
                obj.docstring = griffe.Docstring(text, lineno=obj.lineno, parent=obj, parser=parser)
