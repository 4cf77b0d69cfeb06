/* Tuning page: the policy form's settings that differ from the session's active policy are
 * marked as they are edited, and each group counts them; Policy B opens when Compare is
 * turned on and its settings that differ from policy A are highlighted; a preview a later
 * edit superseded is aborted here and stopped on the server; values typed after a preset was chosen survive the preset's
 * fields arriving from the server; the threshold sweep's chart (uPlot).
 */
(function () {
  "use strict";

  // -- values typed since each side's last preset choice ----------------------------------------
  var typed = { a: new Map(), b: new Map() };
  var fieldsets = { a: null, b: null };

  function sideOf(el) {
    var m = /^([ab])-/.exec(el.name || "");
    return m ? m[1] : null;
  }

  function readValue(el) {
    if (el.type === "checkbox" || el.type === "radio") return el.checked;
    if (el.multiple) return Array.prototype.filter.call(el.options, function (o) { return o.selected; })
      .map(function (o) { return o.value; });
    return el.value;
  }

  function writeValue(el, v) {
    if (el.type === "checkbox" || el.type === "radio") { el.checked = v; return; }
    if (el.multiple) { Array.prototype.forEach.call(el.options, function (o) { o.selected = v.indexOf(o.value) >= 0; }); return; }
    el.value = v;
  }

  function sameValue(x, y) {
    return Array.isArray(x) ? JSON.stringify(x) === JSON.stringify(y) : x === y;
  }

  function noteInput(e) {
    var el = e.target, side = sideOf(el);
    if (!side || !typed[side]) return;
    if (el.name === side + "-preset") { typed[side].clear(); return; }
    if (el.name === side + "-loaded") return;
    typed[side].set(el.name, readValue(el));
  }

  // A preset's fields replace the whole fieldset; put back what the user typed after choosing
  // it, then simulate again with those values.
  function restoreTyped(form) {
    var restored = false;
    ["a", "b"].forEach(function (side) {
      var fs = document.getElementById("fields-" + side);
      if (!fs || fs === fieldsets[side]) return;
      fieldsets[side] = fs;
      typed[side].forEach(function (v, name) {
        var el = fs.querySelector("[name='" + name + "']");
        if (el && !sameValue(readValue(el), v)) { writeValue(el, v); restored = true; }
      });
    });
    if (restored && form) form.dispatchEvent(new Event("input", { bubbles: true }));
  }

  // -- Policy B against A -------------------------------------------------------------------------
  function markDifferences() {
    var b = document.getElementById("fields-b");
    if (!b) return;
    b.querySelectorAll("[name^='b-']").forEach(function (el) {
      if (el.type === "hidden") return;
      var twin = document.querySelector("#fields-a [name='a-" + el.name.slice(2) + "']");
      var differs = !!twin && !sameValue(readValue(el), readValue(twin));
      el.classList.toggle("differs", differs);
      var label = el.closest("label") || (el.id && b.querySelector("label[for='" + el.id + "']"));
      if (label) label.classList.toggle("differs", differs);
    });
  }

  // -- against the session's active policy ----------------------------------------------------------
  // Each grouped input carries the active policy's value (data-active, written as the server
  // compares it); an input whose value differs is marked, and its group counts the marks.
  function comparable(el) {
    var v = readValue(el);
    if (typeof v === "boolean") return v ? "true" : "false";
    if (Array.isArray(v)) return JSON.stringify(v);
    v = String(v).trim();
    if (el.tagName === "TEXTAREA") {
      return v.split("\n").some(function (l) { l = l.trim(); return l && l.charAt(0) !== "#"; }) ? v : "";
    }
    var n = Number(v);
    return v !== "" && isFinite(n) ? String(n) : v;
  }

  function markChanged(root) {
    (root || document).querySelectorAll("#tuning-form .policy-group").forEach(function (group) {
      var count = 0;
      group.querySelectorAll("[data-active]").forEach(function (el) {
        var changed = comparable(el) !== el.getAttribute("data-active");
        if (changed) count += 1;
        el.classList.toggle("changed", changed);
        var label = el.closest("label") || (el.id && group.querySelector("label[for='" + el.id + "']"));
        if (label) label.classList.toggle("changed", changed);
      });
      var note = group.querySelector(".changed-count");
      if (note) { note.hidden = count === 0; note.textContent = count + " changed"; }
    });
  }

  function syncCompare(form) {
    var toggle = form.querySelector("[name=compare]");
    var details = document.getElementById("policy-b");
    if (toggle && details && toggle.checked) details.open = true;
  }

  // -- the sweep chart ----------------------------------------------------------------------------
  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888";
  }

  function fmtTokens(v) {
    if (v == null || isNaN(v)) return "–";
    var a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(1).replace(/\.0$/, "") + "M";
    if (a >= 1e3) return Math.round(v / 1e3) + "k";
    return String(Math.round(v));
  }

  function fmtShare(v) { return v == null || isNaN(v) ? "–" : Math.round(v * 100) + "%"; }

  // settings of a small session can all lie below 10% of the window
  function fmtSetting(v) {
    if (v == null || isNaN(v)) return "–";
    return (v < 0.1 ? (v * 100).toFixed(1) : String(Math.round(v * 100))) + "%";
  }

  function drawCurrent(u, x) {
    if (x == null) return;
    var ctx = u.ctx, dpr = window.devicePixelRatio || 1, b = u.bbox;
    var px = u.valToPos(x, "x", true);
    if (!(px >= b.left && px <= b.left + b.width)) return;
    ctx.save();
    ctx.strokeStyle = cssVar("--marker");
    ctx.fillStyle = cssVar("--marker");
    ctx.lineWidth = 2 * dpr;
    ctx.setLineDash([4 * dpr, 3 * dpr]);
    ctx.beginPath();
    ctx.moveTo(px, b.top);
    ctx.lineTo(px, b.top + b.height);
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.font = (11 * dpr) + "px system-ui, sans-serif";
    ctx.textAlign = px > b.left + b.width / 2 ? "right" : "left";
    ctx.textBaseline = "top";
    ctx.fillText("current", px + (ctx.textAlign === "left" ? 4 : -4) * dpr, b.top + 2 * dpr);
    ctx.restore();
  }

  function renderSweep(el) {
    if (el._plot || typeof uPlot === "undefined") return;
    var src = document.getElementById(el.getAttribute("data-chart-data"));
    var d = src ? JSON.parse(src.textContent) : null;
    if (!d || !d.x || !d.x.length) { el.setAttribute("data-chart-ready", "empty"); return; }
    var share = d.kind !== "tokens";
    var xfmt = share ? fmtSetting : fmtTokens;
    var text = cssVar("--pico-color"), grid = cssVar("--pico-muted-border-color");
    var series = [
      { label: "trigger", value: function (u, v) { return xfmt(v); } },
      { label: "tokens sent", scale: "tok", stroke: cssVar("--ctx-line"), width: 2, points: { show: true, size: 6 },
        value: function (u, v, si, i) {
          var usd = i == null ? null : d.cost_usd[i];
          return fmtTokens(v) + (usd == null ? "" : " ($" + usd.toFixed(2) + ")");
        } },
      { label: "needed-context recall", scale: "pct", stroke: cssVar("--ctx-line-b"), width: 2, dash: [6, 4],
        spanGaps: true, points: { show: true, size: 5 }, value: function (u, v) { return fmtShare(v); } },
      { label: "retention", scale: "pct", stroke: cssVar("--marker-b"), width: 2, dash: [2, 3],
        spanGaps: true, points: { show: true, size: 5 }, value: function (u, v) { return fmtShare(v); } }
    ];
    var tokMax = Math.max.apply(null, d.tokens_sent.concat([1]));
    var width = Math.max(300, el.clientWidth || 600);
    var u = new uPlot({
      width: width, height: 280, series: series,
      scales: {
        x: { time: false },
        tok: { range: function () { return [0, tokMax * 1.08]; } },
        pct: { range: function () { return [0, 1.05]; } }
      },
      axes: [
        { label: "trigger (" + d.x_label + ")", stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid },
          values: function (u, vals) { return vals.map(xfmt); } },
        { scale: "tok", label: "tokens sent", stroke: text, size: 56, grid: { stroke: grid, width: 1 },
          ticks: { stroke: grid }, values: function (u, vals) { return vals.map(fmtTokens); } },
        { scale: "pct", side: 1, label: "recall · retention", stroke: text, size: 50, grid: { show: false },
          values: function (u, vals) { return vals.map(fmtShare); } }
      ],
      hooks: { draw: [function (u) { drawCurrent(u, d.current); }] }
    }, [d.x, d.tokens_sent, d.recall, d.retention], el.querySelector(".chart-canvas") || el);
    el._plot = u;
    if (window.ResizeObserver) {
      el._ro = new ResizeObserver(function () {
        var w = Math.max(300, el.clientWidth || 600);
        if (Math.abs(w - u.width) > 2) u.setSize({ width: w, height: u.height });
      });
      el._ro.observe(el);
    }
    el.setAttribute("data-chart-ready", "true");
  }

  function destroySweep(el) {
    if (el._ro) { el._ro.disconnect(); el._ro = null; }
    if (el._plot) { el._plot.destroy(); el._plot = null; }
  }

  function initSweeps(root) {
    (root || document).querySelectorAll("[data-sweep-chart]").forEach(renderSweep);
  }

  // -- live previews: the server stops one that a later edit superseded --------------------------------
  // htmx aborts the superseded request (hx-sync="this:replace"); the page's token and a number
  // per preview let the server see that a later one arrived and stop the replay it is running.
  var whatifPage = (function () {
    var a = new Uint8Array(12);
    (window.crypto || window.msCrypto).getRandomValues(a);
    return Array.prototype.map.call(a, function (b) { return ("0" + b.toString(16)).slice(-2); }).join("");
  })();
  var whatifSeq = 0;

  document.addEventListener("htmx:configRequest", function (e) {
    if (!/\/tuning\/preview\/?$/.test(e.detail.path || "")) return;
    whatifSeq += 1;
    e.detail.parameters["whatif_page"] = whatifPage;
    e.detail.parameters["whatif_seq"] = String(whatifSeq);
  });

  // -- wiring ---------------------------------------------------------------------------------------
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("tuning-form");
    if (form) {
      fieldsets.a = document.getElementById("fields-a");
      fieldsets.b = document.getElementById("fields-b");
      form.addEventListener("input", noteInput, true);
      form.addEventListener("change", noteInput, true);
      form.addEventListener("input", function () { markDifferences(); markChanged(); });
      form.addEventListener("change", function (e) {
        if (e.target.name === "compare") syncCompare(form);
        markDifferences();
        markChanged();
      });
      syncCompare(form);
      markDifferences();
      markChanged();
    }
    initSweeps(document);
    // the theme toggle changes the colours the chart was drawn with
    new MutationObserver(function () {
      document.querySelectorAll("[data-sweep-chart]").forEach(function (el) { destroySweep(el); renderSweep(el); });
    }).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
  });
  document.addEventListener("htmx:afterSettle", function () {
    var form = document.getElementById("tuning-form");
    if (form) { restoreTyped(form); markDifferences(); markChanged(); }
  });
  document.addEventListener("htmx:load", function (e) { initSweeps(e.detail.elt.parentNode || document); });
  document.addEventListener("htmx:beforeCleanupElement", function (e) {
    var el = e.detail.elt;
    if (el && el._plot && el.hasAttribute("data-sweep-chart")) destroySweep(el);
  });
})();
