// Search results: Sphinx builds each result's text snippet from the page's HTML after the page has
// loaded, so the formulas in a snippet arrive as raw TeX (\( ... \)). Typeset each snippet as it
// is added; MathJax is served from the book itself, like on every other page.
document.addEventListener("DOMContentLoaded", () => {
  const results = document.getElementById("search-results");
  if (!results) return;
  new MutationObserver((records) => {
    const snippets = records
      .flatMap((record) => [...record.addedNodes])
      .filter((node) => node.nodeType === Node.ELEMENT_NODE && node.matches("p.context"));
    if (snippets.length && window.MathJax && MathJax.startup && MathJax.typesetPromise) {
      MathJax.startup.promise.then(() => MathJax.typesetPromise(snippets));
    }
  }).observe(results, {childList: true, subtree: true});
});

// Figures on a phone: the pages draw their figures for a desktop column (6-11 inches at 110 dpi, 700-1200 px).
// Squeezed into a phone's 350 px, a figure of two or three panels shrinks its labels to 4-6 px. On a narrow
// screen each figure keeps at least LEGIBLE of its drawn width (labels about 9 px) and its box scrolls sideways,
// as wide tables and formulas do (course_reader.css); tests/test_browser.py checks both at 390 px.
const LEGIBLE = 0.6;
const NARROW = window.matchMedia("(max-width: 575.98px)");
function keepFiguresLegible() {
  for (const img of document.querySelectorAll("article.bd-article .cell_output img, article.bd-article figure img")) {
    img.style.minWidth = NARROW.matches && img.naturalWidth ? `${Math.round(LEGIBLE * img.naturalWidth)}px` : "";
  }
}
window.addEventListener("load", keepFiguresLegible);
NARROW.addEventListener("change", keepFiguresLegible);
