"""The documentation site builds with ``mkdocs build --strict`` and no warning.

Strict mode fails on a broken link or anchor, a page of ``docs/`` that is
neither in the nav nor excluded, and a docstring that mkdocstrings cannot
parse (griffe's warnings). Skipped only where MkDocs is not installed: the
``docs`` extra is part of ``dev``, which CI installs.

The built HTML is then checked as a reader gets it: no Sphinx role or raw
LaTeX outside code and math, no doctest outside a code block, no Markdown
left as text (a list inside a paragraph, a stray backtick or dollar, a pipe
table's rule, emphasis inside a word, a Python power such as 2**31 outside
code), math on the scheme pages, every ``#:``-documented public constant in
the API reference, the validation report's tables leading with the result,
no broken local link; the Markdown indents list contents by 4 spaces
(Python-Markdown flattens less without a trace in the text), names the
language of every fenced block, and installs queuesgd only from a checkout
(it is not on PyPI); and in headless Chromium at 1280 px (skipped, saying
why, where none is installed; ``.ci/run`` installs Debian's), KaTeX
typesets every formula of two scheme pages and the report's measured,
predicted and error columns lie within the window.
"""

from __future__ import annotations

import ast
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The site, built once for this module's tests, and the build's result."""
    pytest.importorskip("mkdocs")
    site = tmp_path_factory.mktemp("docs") / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", site],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    return site, result


def test_site_builds_strict_without_warnings(built: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    site, result = built
    log = result.stdout + result.stderr
    warnings = [line for line in log.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert result.returncode == 0 and not warnings, log[-6000:]
    # The API reference rendered the docstrings, and the carried repository files are in the site.
    api = (site / "api" / "predict" / "index.html").read_text()
    assert "queuesgd.prediction.predict" in api and "Parameters" in api
    assert (site / "repository" / "CHANGELOG" / "index.html").is_file()
    assert (site / "repository" / "examples" / "index.html").is_file()


def test_docs_point_at_nothing_outside_the_repository() -> None:
    # The notes of the machines queuesgd was developed on are not something users have: the docs say it.
    outside = re.compile(r"/work/|harness-notes")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted((ROOT / "docs").rglob("*.md"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if outside.search(line)
    ]
    assert not offenders, "\n".join(offenders)


# ---- the built HTML, as a reader gets it (issue 26) ------------------------------------------------

#: Code, scripts and typeset math: where LaTeX and ``>>>`` belong.
_CODE_OR_MATH = re.compile(
    r"<(pre|code|script|style|textarea)\b.*?</\1>|<(span|div) class=\"arithmatex\">.*?</\2>", re.S
)
#: What must not reach a reader as text: Sphinx roles, raw LaTeX (any command: ``\\max``, ``\\lambda``).
_RAW = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):|\\[A-Za-z]+|\^\{|_\{")
_TAG = re.compile(r"<[^>]+>")
_HREF = re.compile(r'<a [^>]*href="([^"#?]*)(?:[#?][^"]*)?"')
#: The per-configuration tables of the validation report lead with these columns.
REPORT_LEAD = ["scheme", "n", "measured", "predicted"]


def _pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if p.name != "404.html")


def _prose(html_text: str) -> str:
    """The text of a page outside code and math (tags removed)."""
    return _TAG.sub(" ", _CODE_OR_MATH.sub(" ", html_text))


def _header_rows(html_text: str) -> list[list[str]]:
    """The header cells of every table of a page, as text."""
    return [
        [_TAG.sub("", cell).strip() for cell in re.findall(r"<th[^>]*>(.*?)</th>", head, re.S)]
        for head in re.findall(r"<thead>(.*?)</thead>", html_text, re.S)
    ]


def test_html_has_no_role_or_raw_latex_text(built: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    site, result = built
    assert result.returncode == 0
    offenders = []
    for page in _pages(site):
        found = _RAW.findall(_prose(page.read_text(encoding="utf-8")))
        if found:
            offenders.append(f"{page.relative_to(site)}: {sorted(set(found))}")
    assert not offenders, "\n".join(offenders)


def test_no_doctest_outside_code(built: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    site, _ = built
    offenders = []
    for page in _pages(site):
        text = page.read_text(encoding="utf-8")
        quotes = re.findall(r"<blockquote>(.*?)</blockquote>", text, re.S)
        # A `>>>` Markdown reads as three quote levels (a docstring's doctest outside its Examples section).
        nested = re.search(r"<blockquote>\s*<blockquote>\s*<blockquote>", text)
        quoted = any("&gt;&gt;&gt;" in q or "&gt;=" in q for q in quotes)
        if quoted or nested or "&gt;&gt;&gt;" in _prose(text):
            offenders.append(str(page.relative_to(site)))
    assert not offenders, offenders


#: A paragraph, list item or cell and its contents.
_BLOCK = re.compile(r"<(p|li|td|th|dd)\b[^>]*>(.*?)</\1>", re.S)
#: Markdown a page meant but Python-Markdown left as text (outside code and math), each with what
#: usually causes it.
_LEFT_AS_TEXT = {
    "a list inside a paragraph (no blank line before the list, or a continuation indented < 4)": re.compile(
        r"\n[ \t]*[-*][ \t]+\S"
    ),
    "a code span broken across blocks (a stray backtick)": re.compile(r"`"),
    "a '$' that is not math (arithmatex did not pair it)": re.compile(r"\$"),
    "a pipe table that did not become a table (no blank line before it)": re.compile(r"\|\s*:?-{3,}"),
    # One `**` stays as text, a pair sets what lies between in bold (_INNER_EMPHASIS): `2**31`, 2^31.
    "a Python power outside code (write it as code, `2**31`)": re.compile(r"[\w)\]]\*\*[\w(]"),
}
#: Emphasis inside a word: ``2**31 ... 10**6`` or ``a*b*c`` outside code set in bold or italics.
_INNER_EMPHASIS = re.compile(r"[A-Za-z0-9]<(em|strong)>(?:(?!</\1>).)*</\1>[A-Za-z0-9]", re.S)


def _article(html_text: str) -> str:
    """The page's own content (Material's ``<article>``), without the navigation around it."""
    start, end = html_text.find("<article"), html_text.find("</article>")
    return html_text[start:end] if 0 <= start < end else html_text


def test_no_markdown_left_as_text(built: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    site, _ = built
    offenders = []
    for page in _pages(site):
        name = page.relative_to(site)
        article = _CODE_OR_MATH.sub(" ", _article(page.read_text(encoding="utf-8")))
        texts = [html.unescape(_TAG.sub("", inner)) for _, inner in _BLOCK.findall(article)]
        for what, pattern in _LEFT_AS_TEXT.items():
            for text in texts:
                if found := pattern.search(text):
                    offenders.append(
                        f"{name}: {what}: {text[max(0, found.start() - 60) : found.end() + 20]!r}"
                    )
        for inner in _INNER_EMPHASIS.finditer(article):
            offenders.append(f"{name}: emphasis inside a word: {inner.group(0)[:80]!r}")
    assert not offenders, "\n".join(offenders)


def _rendered_markdown() -> list[Path]:
    """The Markdown files the site renders: ``docs/`` and the repository files the hooks carry."""
    pytest.importorskip("mkdocs")
    sys.path.insert(0, str(ROOT))
    try:
        import docs_hooks
    finally:
        sys.path.remove(str(ROOT))
    carried = [ROOT / rel for rel in docs_hooks.REPOSITORY_FILES if rel.endswith(".md")]
    return sorted((ROOT / "docs").rglob("*.md")) + carried


_FENCE = re.compile(r" *(`{3,}|~{3,})")
_ITEM = re.compile(r" {1,3}(?:[-*+]|\d+\.) +\S")


def test_markdown_indents_list_contents_by_four_spaces() -> None:
    # Python-Markdown nests a list, and keeps a paragraph, table or fenced block inside a list item,
    # only at 4 spaces: at 1 to 3 a nested list is flattened into its parent, and a block after a
    # blank line ends the list (an ordered list then restarts at 1). The HTML shows neither as text.
    offenders = []
    for path in _rendered_markdown():
        fence, math, blank = "", False, True
        for n, line in enumerate(path.read_text().splitlines(), 1):
            stripped, indent = line.strip(), len(line) - len(line.lstrip(" "))
            if fence:
                fence = "" if stripped.startswith(fence) else fence
            else:
                if stripped and 0 < indent < 4 and not math and (blank or _ITEM.match(line)):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line}")
                if opened := _FENCE.match(line):
                    fence = opened.group(1)
                elif stripped == "$$":
                    math = not math
            blank = not stripped
    assert not offenders, "\n".join(offenders)


#: A fence line: its backticks or tildes, and its info string (the language).
_FENCE_INFO = re.compile(r" *(`{3,}|~{3,})(.*)")


def test_every_fenced_block_names_a_language() -> None:
    # A bare ``` block gets no highlighting (or a guessed one), and a reader cannot tell a command
    # from its output; each block names what it holds: python, console (a `$ ...` session), sh,
    # text (output, tables, trees), json. The name must be a Pygments lexer (what pymdownx.highlight
    # uses), and a doctest (a block opening with `>>>`) stays Python. pytest's --doctest-glob reads
    # the `>>>` lines whatever the fence says, so the tag changes no doctest.
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    offenders = []
    for path in _rendered_markdown():
        fence, where, language, first = "", "", "", True
        for n, line in enumerate(path.read_text().splitlines(), 1):
            found = _FENCE_INFO.match(line)
            if fence:
                if found and found.group(1).startswith(fence) and not found.group(2).strip():
                    fence = ""
                elif first and line.lstrip().startswith(">>>") and language not in ("python", "pycon"):
                    offenders.append(f"{where}: a doctest fenced as {language!r}, not python")
                first = False
                continue
            if found:
                fence, first = found.group(1), True
                language = found.group(2).strip().split(" ")[0].lstrip("{.")
                where = f"{path.relative_to(ROOT)}:{n}"
                if not language:
                    offenders.append(f"{where}: a fenced block with no language")
                    continue
                try:
                    get_lexer_by_name(language)
                except ClassNotFound:
                    offenders.append(f"{where}: {language!r} is not a Pygments lexer")
    assert not offenders, "\n".join(offenders)


#: An install of queuesgd by name, which PyPI does not have (``pip install queuesgd[plot]``, quoted or not).
_INSTALL_BY_NAME = re.compile(r"pip install\s+(?:-U\s+)?\\?[\"']?queuesgd\b")


def test_install_instructions_install_from_the_checkout() -> None:
    # queuesgd is not on PyPI: every install line, in the pages, the docstrings the API reference
    # renders, the error messages, the benchmarks and the notebooks, is getting-started's
    # `pip install -e ".[EXTRA]"` from a checkout.
    sources = [
        *_rendered_markdown(),
        ROOT / "README.md",
        *sorted((ROOT / "queuesgd").rglob("*.py")),
        *sorted(ROOT.glob("benchmarks/*.py")),
        *sorted(ROOT.glob("examples/*.py")),
        *sorted(ROOT.glob("examples/*.ipynb")),  # the site carries them as downloads
    ]
    offenders = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sources
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if _INSTALL_BY_NAME.search(line)
    ]
    assert not offenders, "\n".join(offenders)
    started = (ROOT / "docs" / "getting-started.md").read_text()  # which says so, once
    assert "not published on PyPI" in started and 'pip install -e ".[plot]"' in started


#: A module-level constant's assignment (``NAME = ...`` or ``NAME: T = ...``).
_CONSTANT = re.compile(r"([A-Z][A-Z0-9_]*)\s*(?::[^=]+)?=")


def _exported(tree: ast.Module) -> set[str] | None:
    """The names a module's ``__all__`` lists (a lazy package's ``_EXPORTS`` keys), or None without one."""
    values = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    if "__all__" not in values:
        return None
    try:
        return set(ast.literal_eval(values["__all__"]))
    except ValueError:  # sorted(_EXPORTS) + [...]: the lazy packages
        strings = {n.value for n in ast.walk(values["__all__"]) if isinstance(n, ast.Constant)}
        return strings | set(ast.literal_eval(values["_EXPORTS"])) if "_EXPORTS" in values else strings


def documented_constants() -> list[str]:
    """``module.NAME`` of every public module constant documented by ``#:`` comment lines above it.

    Public: no part of the module's path starts with ``_``, and the name is in its ``__all__`` (any
    name without a leading ``_`` where the module has none). Read from the source, not with Griffe.
    """
    found = []
    for path in sorted((ROOT / "queuesgd").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if any(part.startswith("_") for part in parts):
            continue
        text = path.read_text()
        exported = _exported(ast.parse(text))
        lines = text.splitlines()
        for above, line in zip(lines, lines[1:]):
            if above.startswith("#:") and (match := _CONSTANT.match(line)):
                if exported is None or match.group(1) in exported:
                    found.append(".".join((*parts, match.group(1))))
    return found


def test_every_documented_constant_is_in_the_api_reference(
    built: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    # Griffe reads no `#:` comment, and mkdocstrings leaves out a member without a docstring, so no such
    # constant was rendered; docs_griffe.CommentDocstrings makes the comments docstrings. A constant
    # appears on its module's page, under a package that exports it, or on api/constants.md.
    site, _ = built
    ids = {
        anchor
        for page in (site / "api").rglob("*.html")
        for anchor in re.findall(r'id="(queuesgd\.[^"]+)"', page.read_text(encoding="utf-8"))
    }
    constants = documented_constants()
    assert len(constants) >= 200
    missing = []
    for constant in constants:
        parts = constant.split(".")
        if not any(".".join((*parts[:k], parts[-1])) in ids for k in range(1, len(parts))):
            missing.append(constant)
    assert not missing, f"{len(missing)} of {len(constants)} not in the API reference:\n" + "\n".join(missing)


def test_scheme_pages_and_derive_have_math(built: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    site, _ = built
    pages = sorted((site / "schemes").glob("*/index.html")) + [site / "derive" / "index.html"]
    assert len(pages) >= 11
    for page in pages:
        assert 'class="arithmatex"' in page.read_text(encoding="utf-8"), page
    # The Formula shown on derive.md is its _repr_latex_ (what Jupyter renders).
    import queuesgd as q

    latex = q.derive(q.SyncPS()).latex()
    assert f"$$\n{latex}\n$$" in (ROOT / "docs" / "derive.md").read_text()


def test_report_tables_lead_with_the_result(built: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    site, _ = built
    text = (site / "repository" / "validation" / "REPORT" / "index.html").read_text(encoding="utf-8")
    heads = _header_rows(text)
    lead = [h for h in heads if h[:2] == ["scheme", "n"]]
    assert len(lead) >= 3, heads
    for head in lead:
        assert head[:4] == REPORT_LEAD and head[4] in ("error", "difference"), head
    assert "<details>" in text or "<details " in text  # the provenance, collapsed


def test_local_links_resolve(built: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    site, _ = built
    broken = []
    for page in _pages(site):
        for href in _HREF.findall(page.read_text(encoding="utf-8")):
            if not href or "://" in href or href.startswith(("mailto:", "data:", "javascript:")):
                continue
            target = (page.parent / href).resolve()
            if not (target.is_file() or (target / "index.html").is_file()):
                broken.append(f"{page.relative_to(site)} -> {href}")
    assert not broken, "\n".join(broken[:50])


# ---- in a browser: headless Chromium (Debian's chromium; .ci/run installs it where it can) ---------

#: Measures, once the page has loaded and KaTeX has run, what the test asserts.
_PROBE = """
<script>
window.addEventListener("load", function () {
  setTimeout(function () {
    var out = {
      math: document.querySelectorAll(".arithmatex").length,
      typeset: document.querySelectorAll(".arithmatex .katex").length,
      errors: document.querySelectorAll(".katex-error").length,
      width: window.innerWidth,
      columns: [],
    };
    document.querySelectorAll("table").forEach(function (table) {
      var cells = Array.prototype.slice.call(table.querySelectorAll("thead th"));
      var names = cells.map(function (c) { return c.textContent.trim(); });
      if (names[0] === "scheme" && names[1] === "n") {
        cells.slice(2, 5).forEach(function (c) {
          out.columns.push([c.textContent.trim(), c.getBoundingClientRect().right]);
        });
      }
    });
    var pre = document.createElement("pre");
    pre.id = "queuesgd-probe";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }, 500);
});
</script>
"""
_CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
    "--virtual-time-budget=15000",
    "--dump-dom",
)
BROWSER_SECONDS = 90


def _chromium() -> str:
    for name in (os.environ.get("QUEUESGD_CHROMIUM", ""), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return str(shutil.which(name))
    pytest.skip("no headless Chromium (Debian: apt-get install chromium; or set QUEUESGD_CHROMIUM)")


def _probe(chromium: str, page: Path, profile: Path) -> dict:
    """Open ``page`` at 1280 px in headless Chromium and return what :data:`_PROBE` measured."""
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    try:
        done = subprocess.run(
            [chromium, *_CHROMIUM_FLAGS, f"--user-data-dir={profile}", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=BROWSER_SECONDS,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"Chromium did not render {page} within {BROWSER_SECONDS} s")
    finally:
        page.write_text(text, encoding="utf-8")
    found = re.search(r'<pre id="queuesgd-probe">(.*?)</pre>', done.stdout, re.S)
    assert found, f"no probe output from Chromium for {page}: {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def test_browser_typesets_math_and_report_fits(
    built: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    site, _ = built
    chromium = _chromium()
    for name in ("cutoffs", "sync-ps"):
        seen = _probe(chromium, site / "schemes" / name / "index.html", tmp_path / f"profile-{name}")
        assert seen["math"] >= 5 and seen["typeset"] == seen["math"] and seen["errors"] == 0, (name, seen)
    seen = _probe(chromium, site / "repository" / "validation" / "REPORT" / "index.html", tmp_path / "p-r")
    assert seen["width"] == 1280 and len(seen["columns"]) >= 9, seen
    for name, right in seen["columns"]:
        assert name in ("measured", "predicted", "error", "difference") and right <= 1280, seen
