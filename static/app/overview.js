/* The overview page's chart: compactions and failed runs per day (uPlot bars).
 *
 * Data comes from the json_script block named by data-chart-data (never through
 * innerHTML). The chart is redrawn when the theme changes, so its colours follow it.
 */
(function () {
  "use strict";

  function cssVar(name, fallback) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;
  }

  function readData(el) {
    var src = document.getElementById(el.getAttribute("data-chart-data"));
    return src ? JSON.parse(src.textContent) : null;
  }

  function width(el) {
    return Math.max(280, el.clientWidth || el.parentElement.clientWidth || 600);
  }

  function draw(el) {
    if (typeof uPlot === "undefined") return;
    if (el._plot) { el._plot.destroy(); el._plot = null; }
    var d = readData(el);
    if (!d || !d.x || !d.x.length) { el.setAttribute("data-chart-ready", "empty"); return; }
    var text = cssVar("--pico-color", "#333"), grid = cssVar("--pico-muted-border-color", "#ccc");
    var ok = cssVar("--ok-fg", "#15803d"), bad = cssVar("--bad-fg", "#b91c1c");
    // The two series stand side by side in each day's slot; a zero draws no bar.
    var left = uPlot.paths.bars({ size: [0.4, 20], align: -1 }), right = uPlot.paths.bars({ size: [0.4, 20], align: 1 });
    function gaps(values) { return values.map(function (v) { return v ? v : null; }); }
    var opts = {
      width: width(el), height: 220,
      // days are sent as UTC midnights: label them in UTC so no viewer sees the day before
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
      // half a day of room either side, so the first and last days' bars are not clipped
      scales: { x: { time: true, range: function (u, lo, hi) { return [lo - 43200, hi + 43200]; } }, y: { range: function (u, lo, hi) { return [0, Math.max(1, hi)]; } } },
      series: [
        {},
        { label: "compactions", stroke: ok, fill: ok, paths: left, points: { show: false } },
        { label: "failed", stroke: bad, fill: bad, paths: right, points: { show: false } }
      ],
      axes: [
        { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } },
        { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000],
          values: function (u, vals) { return vals.map(function (v) { return String(Math.round(v)); }); } }
      ],
      legend: { show: true, live: false }
    };
    el._plot = new uPlot(opts, [d.x, gaps(d.succeeded), gaps(d.failed)], el);
    el.setAttribute("data-chart-ready", "true");
  }

  function drawAll() {
    document.querySelectorAll("[data-overview-chart]").forEach(draw);
  }

  document.addEventListener("DOMContentLoaded", function () {
    drawAll();
    new MutationObserver(drawAll).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
    if (window.ResizeObserver) {
      document.querySelectorAll("[data-overview-chart]").forEach(function (el) {
        var last = width(el);
        new ResizeObserver(function () {
          var w = width(el);
          if (el._plot && Math.abs(w - last) > 2) { last = w; el._plot.setSize({ width: w, height: 220 }); }
        }).observe(el);
      });
    }
  });
})();
