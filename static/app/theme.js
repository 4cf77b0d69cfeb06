/* Loaded without defer in <head>: the theme is set before the first paint, so a dark-theme
   user never sees a white flash. (A file, not an inline script: the CSP allows no inline code.) */
(function () {
  var t;
  try { t = localStorage.getItem("cs-theme"); } catch (e) { /* storage blocked: follow the system */ }
  document.documentElement.setAttribute("data-theme",
    t || (window.matchMedia && matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light"));
})();
