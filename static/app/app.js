/* compaction studio pages: theme toggle, project switcher, uPlot charts.
 *
 * Charts read their data from a <script type="application/json"> block (Django's
 * json_script) named by the chart element's data-chart-data attribute, so the numbers
 * never pass through innerHTML. Text in tooltips is set with textContent.
 */
(function () {
  "use strict";

  var THEME_KEY = "cs-theme";

  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888";
  }

  function fmt(v) {
    if (v == null || isNaN(v)) return "–";
    var a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(1).replace(/\.0$/, "") + "M";
    if (a >= 1e4) return Math.round(v / 1e3) + "k";
    if (a >= 1e3) return (v / 1e3).toFixed(2).replace(/\.?0+$/, "") + "k";
    return String(Math.round(v));
  }

  function fmtFull(v) {
    return v == null ? "–" : Math.round(v).toLocaleString("en-US");
  }

  // -- theme ------------------------------------------------------------------------------
  function currentTheme() {
    return document.documentElement.getAttribute("data-theme") || "light";
  }

  function setTheme(theme) {
    document.documentElement.setAttribute("data-theme", theme);
    try { localStorage.setItem(THEME_KEY, theme); } catch (e) { /* private mode */ }
    var btn = document.getElementById("theme-toggle");
    if (btn) {
      btn.setAttribute("aria-pressed", theme === "dark" ? "true" : "false");
      btn.textContent = theme === "dark" ? "Light theme" : "Dark theme";
    }
    redrawAll();
  }

  // -- charts ------------------------------------------------------------------------------
  var plots = [];

  function readData(el) {
    var src = document.getElementById(el.getAttribute("data-chart-data"));
    return src ? JSON.parse(src.textContent) : null;
  }

  function chartWidth(el) {
    return Math.max(320, el.clientWidth || el.parentElement.clientWidth || 800);
  }

  function drawLines(u, lines, scale) {
    var ctx = u.ctx, dpr = window.devicePixelRatio || 1, b = u.bbox;
    ctx.save();
    ctx.beginPath();
    ctx.rect(b.left, b.top, b.width, b.height);
    ctx.clip();
    ctx.font = (11 * dpr) + "px system-ui, sans-serif";
    lines.forEach(function (t) {
      var y = u.valToPos(t.value, scale, true);
      if (!(y >= b.top && y <= b.top + b.height)) return;
      var color = t.kind === "window" ? cssVar("--window-line")
        : t.color || (t.kind === "reduction" ? cssVar("--reduction-line") : cssVar("--threshold"));
      ctx.strokeStyle = color;
      ctx.fillStyle = color;
      ctx.lineWidth = 1.5 * dpr;
      ctx.setLineDash([6 * dpr, 4 * dpr]);
      ctx.beginPath();
      ctx.moveTo(b.left, y);
      ctx.lineTo(b.left + b.width, y);
      ctx.stroke();
      ctx.setLineDash([]);
      // uPlot leaves its own text alignment on the context; labels sit above their line, left
      ctx.textAlign = "left";
      ctx.textBaseline = "bottom";
      var w = ctx.measureText(t.label).width, x0 = b.left + 6 * dpr, y0 = y - 3 * dpr;
      ctx.fillStyle = cssVar("--pico-background-color");
      ctx.globalAlpha = 0.8;
      ctx.fillRect(x0 - 2 * dpr, y0 - 13 * dpr, w + 4 * dpr, 13 * dpr);
      ctx.globalAlpha = 1;
      ctx.fillStyle = color;
      ctx.fillText(t.label, x0, y0);
    });
    ctx.restore();
  }

  function drawMarkers(u, markers) {
    var ctx = u.ctx, dpr = window.devicePixelRatio || 1, b = u.bbox;
    // a policy that compacts very often gets thin, translucent markers, so curves stay readable
    var counts = {};
    markers.forEach(function (m) { counts[m.policy || ""] = (counts[m.policy || ""] || 0) + 1; });
    ctx.save();
    ctx.beginPath();
    ctx.rect(b.left, b.top, b.width, b.height);
    ctx.clip();
    markers.slice().reverse().forEach(function (m) {  // the first policy's markers on top
      var x = u.valToPos(m.x, "x", true);
      if (!(x >= b.left && x <= b.left + b.width)) return;
      var color = m.color || cssVar("--marker");
      var thin = counts[m.policy || ""] > 40;
      ctx.strokeStyle = color;
      ctx.fillStyle = color;
      ctx.lineWidth = (thin ? 1 : 2) * dpr;
      ctx.globalAlpha = thin ? 0.6 : 1;
      ctx.beginPath();
      ctx.moveTo(x, b.top);
      ctx.lineTo(x, b.top + b.height);
      ctx.stroke();
      ctx.globalAlpha = 1;
      ctx.beginPath();
      ctx.moveTo(x - 6 * dpr, b.top);
      ctx.lineTo(x + 6 * dpr, b.top);
      ctx.lineTo(x, b.top + 9 * dpr);
      ctx.closePath();
      ctx.fill();
    });
    ctx.restore();
  }

  function markerText(m) {
    var where = m.after_end ? "compaction after the last message (#" + (m.position - 1) + ")" : "compaction before message #" + m.position;
    var head = (m.policy ? m.policy + ": " : "") + where;
    var lines = [head,
      "tokens " + fmtFull(m.tokens_before) + " → " + fmtFull(m.tokens_after),
      "messages " + fmtFull(m.messages_before) + " → " + fmtFull(m.messages_after)];
    if (m.evicted != null) lines.push(fmtFull(m.evicted) + " messages evicted" + (m.summarized === false ? " (no summary)" : ""));
    if (m.run) lines.push("run #" + m.run + " (click the marker list below for details)");
    return lines.join("\n");
  }

  function markerHover(el, markers) {
    var tip = document.createElement("div");
    tip.className = "chart-tip";
    tip.style.display = "none";
    tip.style.whiteSpace = "pre";
    tip.setAttribute("role", "status");
    return {
      init: function (u) { u.over.appendChild(tip); },
      setCursor: function (u) {
        var left = u.cursor.left;
        var hit = null;
        if (left != null && left >= 0) {
          var best = 7;
          markers.forEach(function (m) {
            var d = Math.abs(u.valToPos(m.x, "x") - left);
            if (d <= best) { best = d; hit = m; }
          });
        }
        if (!hit) { tip.style.display = "none"; el.removeAttribute("data-hover-marker"); return; }
        tip.textContent = markerText(hit);
        tip.style.display = "block";
        var w = u.over.clientWidth;
        if (left > w / 2) { tip.style.left = ""; tip.style.right = (w - left + 12) + "px"; }
        else { tip.style.right = ""; tip.style.left = (left + 12) + "px"; }
        tip.style.top = "14px";
        el.setAttribute("data-hover-marker", String(hit.position));
      }
    };
  }

  // Axis steps of whole numbers only: a message number or a token count is never 0.2.
  var INT_INCRS = [];
  for (var e10 = 1; e10 <= 1e9; e10 *= 10) INT_INCRS.push(e10, 2 * e10, 5 * e10);

  // The context line is drawn from the selector's step points rather than uPlot's own
  // per-bar values: a compaction is a vertical drop at its own x, including the runs after
  // the last message, which have no bar.
  function stepPath(points) {
    return function (u) {
      var p = new Path2D();
      points.forEach(function (pt, i) {
        var x = u.valToPos(pt[0], "x", true), y = u.valToPos(pt[1], "ctx", true);
        if (i === 0) p.moveTo(x, y); else p.lineTo(x, y);
      });
      return { stroke: p, fill: null, clip: null, band: null, gaps: null, flags: 0 };
    };
  }

  function drawAfterEnd(u, d) {
    if (!d.after_end_runs) return;
    var ctx = u.ctx, dpr = window.devicePixelRatio || 1, b = u.bbox;
    var x0 = u.valToPos(d.n - 0.5, "x", true), x1 = b.left + b.width;
    if (!(x0 < x1)) return;
    ctx.save();
    ctx.fillStyle = cssVar("--after-end");
    ctx.fillRect(x0, b.top, x1 - x0, b.height);
    ctx.fillStyle = cssVar("--pico-muted-color");
    ctx.font = (11 * dpr) + "px system-ui, sans-serif";
    ctx.textAlign = "center";
    ctx.textBaseline = "bottom";
    ctx.fillText("after the last message", (x0 + x1) / 2, b.top + b.height - 4 * dpr);
    ctx.restore();
  }

  function timelineOptions(el, d) {
    var cats = d.categories, n = d.x.length;
    var cum = [], acc = d.x.map(function () { return 0; });
    cats.forEach(function (c, k) {
      acc = acc.map(function (v, i) { return v + (d.series[k][i] || 0); });
      cum.push(acc.slice());
    });
    var bars = uPlot.paths.bars({ size: [0.86, Infinity], gap: 0 });
    var data = [d.x];
    var series = [{
      label: d.bucket > 1 ? "messages" : "message",
      value: function (u, v, si, i) {
        if (i == null) return "";
        var s = d.starts[i];
        return d.bucket > 1 ? "#" + s + "–#" + Math.min(d.n - 1, s + d.bucket - 1) : "#" + s;
      }
    }];
    for (var k = cats.length - 1; k >= 0; k--) {
      (function (k) {
        var color = cssVar("--cat-" + cats[k]);
        data.push(cum[k]);
        series.push({
          label: d.labels[k], scale: "msg", fill: color, stroke: color, width: 0, paths: bars,
          points: { show: false },
          value: function (u, v, si, i) { return i == null ? "" : fmt(d.series[k][i]); }
        });
      })(k);
    }
    data.push(d.context);
    series.push({
      label: "context sent (per model call)", scale: "ctx", stroke: cssVar("--ctx-line"), width: 2,
      spanGaps: true, points: { show: n <= 150, size: 4 }, paths: stepPath(d.line || []),
      value: function (u, v, si, i) { return i == null ? "" : v == null ? "–" : fmt(v); }
    });
    var ctxMax = 0;
    d.context.forEach(function (v) { if (v != null && v > ctxMax) ctxMax = v; });
    (d.line || []).forEach(function (p) { if (p[1] > ctxMax) ctxMax = p[1]; });
    d.thresholds.forEach(function (t) { if (t.kind !== "window" && t.value > ctxMax) ctxMax = t.value; });
    d.thresholds.forEach(function (t) { if (t.kind === "window" && t.value <= ctxMax * 1.6) ctxMax = Math.max(ctxMax, t.value); });
    var hover = markerHover(el, d.markers);
    var text = cssVar("--pico-color"), grid = cssVar("--pico-muted-border-color");
    return {
      data: data, ctxTop: (ctxMax || 1) * 1.08,
      opts: {
        width: chartWidth(el), height: 320,
        series: series,
        scales: {
          x: { time: false, range: function () { return [-0.5 * d.bucket, d.x_max != null ? d.x_max : Math.max(1, d.n) - 0.5]; } },
          msg: { range: function (u, mn, mx) { return [0, (mx || 1) * 1.1]; } },
          ctx: { range: function () { return [0, (ctxMax || 1) * 1.08]; } }
        },
        axes: [
          { label: "message #", stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, incrs: INT_INCRS,
            // no tick in the slots of runs after the last message: they are not messages
            values: function (u, vals) { return vals.map(function (v) { return v >= 0 && v <= d.n - 1 ? String(v) : ""; }); } },
          { scale: "msg", label: d.bucket > 1 ? "tokens per " + d.bucket + " messages" : "tokens per message",
            stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, size: 60, incrs: INT_INCRS,
            values: function (u, vals) { return vals.map(fmt); } },
          { scale: "ctx", side: 1, label: "context tokens", stroke: text, grid: { show: false }, size: 60, incrs: INT_INCRS,
            values: function (u, vals) { return vals.map(fmt); } }
        ],
        cursor: { drag: { x: true, y: false } },
        legend: { live: true },
        hooks: {
          init: [hover.init],
          setCursor: [hover.setCursor],
          drawClear: [function (u) { drawAfterEnd(u, d); }],
          draw: [function (u) { drawLines(u, d.thresholds, "ctx"); drawMarkers(u, d.markers); }]
        }
      },
      onClick: function (u, e) {
        // Read the bar under the pointer from the click itself: uPlot's cursor index can lag
        // behind a scroll that has not yet fired its scroll event on a busy page.
        var r = u.over.getBoundingClientRect();
        var i = u.posToIdx(e.clientX - r.left);
        if (i == null || i < 0 || i >= d.starts.length) return;
        scrollToMessage(d.starts[i]);
      }
    };
  }

  function simulationOptions(el, d) {
    var data = [d.x], series = [{ label: "model call at message", value: function (u, v) { return v == null ? "–" : "#" + v; } }];
    var colors = { baseline: cssVar("--baseline-line") };
    var policyColors = [cssVar("--ctx-line"), cssVar("--ctx-line-b")];
    var markerColors = [cssVar("--marker"), cssVar("--marker-b")];
    var labels = [];
    var ctxMax = 0;
    d.series.forEach(function (s) {
      var color = s.kind === "baseline" ? colors.baseline : policyColors[labels.length % 2];
      if (s.kind !== "baseline") labels.push(s.label);
      data.push(s.values);
      s.values.forEach(function (v) { if (v != null && v > ctxMax) ctxMax = v; });
      series.push({
        label: s.label, scale: "ctx", stroke: color, width: s.kind === "baseline" ? 1.5 : 2,
        dash: s.kind === "baseline" ? [5, 5] : undefined, spanGaps: true, points: { show: false },
        value: function (u, v) { return v == null ? "–" : fmt(v); }
      });
    });
    var markers = d.markers.map(function (m) {
      return Object.assign({}, m, { color: markerColors[Math.max(0, labels.indexOf(m.policy)) % 2] });
    });
    var lines = d.lines.map(function (t) {
      return Object.assign({}, t, { color: t.kind === "window" ? undefined : markerColors[Math.max(0, labels.indexOf(t.policy)) % 2] });
    });
    lines.forEach(function (t) { if (t.kind !== "window" && t.value > ctxMax) ctxMax = t.value; });
    var hover = markerHover(el, markers);
    var text = cssVar("--pico-color"), grid = cssVar("--pico-muted-border-color");
    var xmax = d.x.length ? d.x[d.x.length - 1] : 1;
    return {
      data: data,
      opts: {
        width: chartWidth(el), height: 300,
        series: series,
        scales: {
          x: { time: false, range: function () { return [0, Math.max(1, xmax)]; } },
          ctx: { range: function () { return [0, (ctxMax || 1) * 1.08]; } }
        },
        axes: [
          { label: "message #", stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } },
          { scale: "ctx", label: "context tokens per model call", stroke: text, size: 60,
            grid: { stroke: grid, width: 1 }, ticks: { stroke: grid },
            values: function (u, vals) { return vals.map(fmt); } }
        ],
        cursor: { drag: { x: true, y: false } },
        hooks: {
          init: [hover.init],
          setCursor: [hover.setCursor],
          draw: [function (u) { drawLines(u, lines, "ctx"); drawMarkers(u, markers); }]
        }
      }
    };
  }

  function renderChart(el) {
    if (el._plot || typeof uPlot === "undefined") return;
    var d = readData(el);
    if (!d || !d.x || !d.x.length) { el.setAttribute("data-chart-ready", "empty"); return; }
    var spec = el.getAttribute("data-chart") === "simulation" ? simulationOptions(el, d) : timelineOptions(el, d);
    var target = el.querySelector(".chart-canvas") || el;
    var u = new uPlot(spec.opts, spec.data, target);
    el._plot = u;
    plots.push(el);
    if (spec.onClick) {
      var downX = null;
      u.over.style.cursor = "pointer";
      u.over.addEventListener("mousedown", function (e) { downX = e.clientX; });
      u.over.addEventListener("click", function (e) {
        if (downX != null && Math.abs(e.clientX - downX) > 4) return; // a drag-zoom, not a click
        spec.onClick(u, e);
      });
    }
    if (window.ResizeObserver) {
      var last = chartWidth(el);
      el._ro = new ResizeObserver(function () {
        var w = chartWidth(el);
        if (Math.abs(w - last) > 2) { last = w; u.setSize({ width: w, height: u.height }); }
      });
      el._ro.observe(el);
    }
    if (spec.ctxTop) markOffScale(el, spec.ctxTop);
    el.setAttribute("data-chart-ready", "true");
  }

  // A threshold far above the context (a 128k window over a 3k session) is left off the
  // scale so the curve stays readable; its key entry says so.
  function markOffScale(el, top) {
    var key = el.parentElement && el.parentElement.querySelector("[data-testid=timeline-key]");
    if (!key) return;
    key.querySelectorAll("li[data-value]").forEach(function (li) {
      var note = li.querySelector(".off-scale");
      if (note) note.textContent = Number(li.getAttribute("data-value")) > top ? " (above the chart's scale)" : "";
    });
  }

  function destroyChart(el) {
    if (el._ro) { el._ro.disconnect(); el._ro = null; }
    if (el._plot) { el._plot.destroy(); el._plot = null; }
    plots = plots.filter(function (p) { return p !== el; });
  }

  function initCharts(root) {
    (root || document).querySelectorAll("[data-chart]").forEach(renderChart);
    if (root && root.matches && root.matches("[data-chart]")) renderChart(root);
  }

  function redrawAll() {
    plots.slice().forEach(function (el) { destroyChart(el); renderChart(el); });
  }

  // -- transcript navigation -------------------------------------------------------------------
  function flash(el) {
    el.scrollIntoView({ behavior: "smooth", block: "start" });
    el.classList.add("flash");
    if (el.focus) el.focus({ preventScroll: true });
    setTimeout(function () { el.classList.remove("flash"); }, 1800);
  }

  function scrollToMessage(pos) {
    var el = document.getElementById("msg-" + pos);
    if (el) { flash(el); return; }
    var t = document.querySelector("[data-transcript-url]");
    if (!t || !window.htmx) return;
    window.htmx.ajax("GET", t.getAttribute("data-transcript-url") + "?around=" + encodeURIComponent(pos),
      { target: "#transcript-body", swap: "innerHTML" }).then(function () {
        var found = document.getElementById("msg-" + pos);
        if (found) flash(found);
      });
  }
  window.csScrollToMessage = scrollToMessage;

  // -- wiring ------------------------------------------------------------------------------------
  document.addEventListener("click", function (e) {
    var btn = e.target.closest("#theme-toggle");
    if (btn) { setTheme(currentTheme() === "dark" ? "light" : "dark"); return; }
    var jump = e.target.closest("[data-scroll-to]");
    if (jump) { e.preventDefault(); scrollToMessage(jump.getAttribute("data-scroll-to")); }
  });

  document.addEventListener("change", function (e) {
    if (e.target.matches("select[data-autosubmit]")) {
      var form = e.target.form;
      if (form.requestSubmit) form.requestSubmit(); else form.submit();
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    setTheme(currentTheme());
    initCharts(document);
  });
  document.addEventListener("htmx:load", function (e) { initCharts(e.detail.elt); });
  document.addEventListener("htmx:afterSettle", function (e) {
    var form = e.detail.requestConfig && e.detail.requestConfig.elt;
    if (form && form.matches && form.matches("form[data-jump]")) {
      var v = form.querySelector("input[name=around]").value;
      if (v !== "") scrollToMessage(v);
    }
  });
  document.addEventListener("htmx:beforeCleanupElement", function (e) {
    var el = e.detail.elt;
    if (el && el._plot) destroyChart(el);
  });
})();
