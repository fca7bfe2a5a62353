// Typesets the math of pymdownx.arithmatex (generic mode) with the vendored KaTeX (docs/assets/katex/).
// Arithmatex writes inline math as <span class="arithmatex">\(...\)</span> and display math as
// <div class="arithmatex">\[...\]</div>; each element is rendered in place, once. A formula KaTeX
// cannot parse is shown as its source in red (class katex-error), which tests/test_docs_site.py
// looks for.
(function () {
  "use strict";

  function typeset(root) {
    root.querySelectorAll(".arithmatex").forEach(function (el) {
      if (el.getAttribute("data-typeset") === "1") {
        return;
      }
      var tex = el.textContent.trim();
      var display = el.tagName === "DIV";
      if (/^\\[([]/.test(tex) && /\\[)\]]$/.test(tex)) {
        tex = tex.slice(2, -2);
      }
      katex.render(tex, el, { displayMode: display, throwOnError: false });
      el.setAttribute("data-typeset", "1");
    });
  }

  if (typeof document$ !== "undefined") {
    // Material for MkDocs: runs on every page load, instant navigation included.
    document$.subscribe(function () {
      typeset(document.body);
    });
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () {
      typeset(document.body);
    });
  } else {
    typeset(document.body);
  }
})();
