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
