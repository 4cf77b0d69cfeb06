/* Before/after page: "changed only" hides rows whose message the run left as it was, and
 * j / k (or the buttons) move to the next / previous changed row, focusing it. */
(function () {
  "use strict";

  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-ba] > .ba-row[data-changed='1']"));
  }

  function anchor(row) {
    return row.querySelector(".cell");
  }

  var current = -1;

  function go(step) {
    var list = rows();
    if (!list.length) return;
    if (current < 0 || current >= list.length) {
      // start from the first changed row below the top of the window
      var top = 0;
      current = step > 0 ? -1 : list.length;
      list.forEach(function (r, i) { if (anchor(r).getBoundingClientRect().top <= top + 80) current = i; });
      if (step < 0 && current === list.length) current = list.length;
    }
    current = Math.max(0, Math.min(list.length - 1, current + step));
    var cell = anchor(list[current]);
    cell.setAttribute("tabindex", "-1");
    cell.scrollIntoView({ block: "center" });
    cell.focus({ preventScroll: true });
    list.forEach(function (r) { r.classList.remove("ba-current"); });
    list[current].classList.add("ba-current");
    var pos = document.querySelector("[data-ba-position]");
    if (pos) pos.textContent = "change " + (current + 1) + " of " + list.length + " on this page";
  }

  document.addEventListener("change", function (e) {
    if (!e.target.matches("[data-ba-changed-only]")) return;
    var grid = document.querySelector("[data-ba]");
    if (grid) grid.classList.toggle("changed-only", e.target.checked);
  });

  document.addEventListener("click", function (e) {
    var btn = e.target.closest("[data-ba-step]");
    if (btn) go(Number(btn.getAttribute("data-ba-step")));
  });

  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    var t = e.target;
    // typing in a text field is not a shortcut; a focused checkbox or button is fine
    if (t && (t.isContentEditable || /^(TEXTAREA|SELECT)$/.test(t.tagName) ||
        (t.tagName === "INPUT" && !/^(checkbox|radio|button|submit)$/.test(t.type)))) return;
    if (e.key === "j") { e.preventDefault(); go(1); } else if (e.key === "k") { e.preventDefault(); go(-1); }
  });
})();
