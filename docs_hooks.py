"""MkDocs hooks of the documentation site (mkdocs.yml: ``hooks``).

The pages in ``docs/`` link to a few files of the repository outside
``docs/`` (the validation report, the benchmarks' and the catalog's READMEs,
the examples) with relative links such as ``../validation/REPORT.md``, which
work when reading the repository. The site has no such paths, so these hooks
copy those files into the site under ``repository/`` and point the links
there. The copied Markdown files' own links to ``docs/`` pages (such as
``../docs/derive.md`` in ``examples/README.md``) are pointed at those pages.
A link outside ``docs/`` to any other file stays as written, and
``mkdocs build --strict`` fails on it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

#: Repository files the site carries, relative to the repository root.
REPOSITORY_FILES = (
    "validation/REPORT.md",
    "validation/real-apriori.svg",
    "validation/real-gpu.svg",
    "validation/emulated-network.svg",
    "benchmarks/README.md",
    "models/README.md",
    "examples/README.md",
    "CHANGELOG.md",
)
#: Carried too: the examples (notebooks, their data and their generator), as downloads.
REPOSITORY_GLOBS = ("examples/*.ipynb", "examples/*.csv", "examples/*.py")
#: Where they go in the site.
PREFIX = "repository"

_LINK = re.compile(r"(\]\()([^)\s#]+)((?:#[^)\s]*)?\))")


def _root(config: Any) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def _carried(root: Path) -> list[str]:
    globbed = sorted(p.relative_to(root).as_posix() for g in REPOSITORY_GLOBS for p in root.glob(g))
    return [rel for rel in (*REPOSITORY_FILES, *globbed) if (root / rel).is_file()]


def on_files(files: Files, config: Any, **_: Any) -> Files:
    """Add the repository files (and the examples, as downloads) to the site."""
    root = _root(config)
    for rel in _carried(root):
        files.append(File.generated(config, f"{PREFIX}/{rel}", abs_src_path=str(root / rel)))  # type: ignore[arg-type]
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, **_: Any) -> str:
    """Point links to carried files at their copies, and the carried files' links at ``docs/`` pages."""
    carried = set(_carried(_root(config)))
    src = page.file.src_uri
    site_dir = posixpath.dirname(src)
    is_carried = src.startswith(PREFIX + "/")
    # Where the page lies in the repository: its links are relative to that.
    repo_dir = posixpath.dirname(src[len(PREFIX) + 1 :]) if is_carried else posixpath.join("docs", site_dir)

    def fix(match: re.Match[str]) -> str:
        target = match.group(2)
        if "://" in target or target.startswith(("/", "mailto:")):
            return match.group(0)
        joined = posixpath.normpath(posixpath.join(repo_dir, target))
        if joined.startswith("docs/"):
            if not is_carried:
                return match.group(0)  # a page's link to another page: MkDocs resolves it
            site_target = joined[len("docs/") :]
        else:
            found = [rel for rel in (joined, posixpath.join(joined, "README.md")) if rel in carried]
            if not found:
                return match.group(0)
            site_target = posixpath.join(PREFIX, found[0])
        return match.group(1) + posixpath.relpath(site_target, site_dir or ".") + match.group(3)

    return _LINK.sub(fix, markdown)
