// specbound: each formula's element holds readable text (what a page shows before MathJax runs, and what the
// search shows in its snippets) and its LaTeX in the attribute data-tex (docs/_ext/specbound_docs.py,
// readable_formulas). Before MathJax typesets the page, the LaTeX is put back for it to find.
window.MathJax = {
  startup: {
    pageReady() {
      document.querySelectorAll("[data-tex]").forEach((element) => {
        element.textContent = element.getAttribute("data-tex");
      });
      return MathJax.startup.defaultPageReady();
    },
  },
};
