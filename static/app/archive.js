/* Archive browser: an entry loaded into the content panel is scrolled to and focused (it
 * sits below the entry tables), and on a page opened from a search hit the hit item is. */
(function () {
  "use strict";

  function reveal(el) {
    if (!el) return;
    el.scrollIntoView({ block: "start" });
    el.focus({ preventScroll: true });
  }

  document.addEventListener("htmx:afterSwap", function (e) {
    var target = e.detail.target;
    if (!target || target.id !== "entry-content") return;
    reveal(target.querySelector(".archive-item.hit-item") || target.querySelector("[data-entry-heading]"));
    var link = e.detail.requestConfig && e.detail.requestConfig.elt;
    var row = link && link.closest && link.closest("tr");
    if (row) {
      document.querySelectorAll("#entries-list tr[aria-current]").forEach(function (r) { r.removeAttribute("aria-current"); });
      row.setAttribute("aria-current", "true");
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    reveal(document.querySelector(".archive-item.hit-item"));
  });
})();
