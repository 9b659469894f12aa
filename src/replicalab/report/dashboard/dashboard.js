// replicalab dashboard: fetches /api/stats and draws tables and SVG charts. No libraries,
// no network beyond this page's own origin. Every value from the data goes in as text.
"use strict";
(function () {
  const NS = "http://www.w3.org/2000/svg";
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
    "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];
  const GOAL_MS = { read: 50, write: 500 };  // seed 001's object-store goals
  const REFRESH_MS = 10000;
  const state = { window: "1h", metric: "p99" };

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function sv(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  function fmt(ms) {
    if (ms === null || ms === undefined) return "–";
    if (ms < 1) return ms.toFixed(3);
    if (ms < 100) return ms.toFixed(1);
    return ms.toFixed(0);
  }

  function td(tr, text, cls) {
    tr.appendChild(el("td", text, cls));
  }

  function fill(tbody, rows) {
    tbody.replaceChildren(...rows);
  }

  function renderCompare(data) {
    const rows = data.backends.map((b) => {
      const tr = el("tr");
      td(tr, b.name);
      for (const op of ["read", "write"]) {
        const p99 = b.ops[op].p99_ms;
        const cls = p99 === null ? "num" : (p99 <= GOAL_MS[op] ? "num good" : "num bad");
        td(tr, fmt(p99), cls);
      }
      td(tr, b.durability || "–");
      td(tr, b.availability || "–");
      td(tr, b.transactional || "–");
      td(tr, b.geo || "–");
      const n = b.ops.read.count + b.ops.write.count;
      const bad = b.ops.read.errors + b.ops.write.errors;
      td(tr, n ? (100 * (n - bad) / n).toFixed(2) + "%" : "–", "num");
      td(tr, b.status, b.status.replace(" ", "-"));
      return tr;
    });
    fill(document.querySelector("#compare tbody"), rows);
  }

  function renderStats(data) {
    const rows = [];
    for (const b of data.backends) {
      for (const op of ["read", "write"]) {
        const s = b.ops[op];
        const tr = el("tr");
        td(tr, b.name);
        td(tr, op);
        td(tr, s.count, "num");
        td(tr, s.errors, "num");
        for (const k of ["p50_ms", "p99_ms", "p999_ms", "mean_ms", "max_ms"]) {
          td(tr, fmt(s[k]), "num");
        }
        rows.push(tr);
      }
    }
    fill(document.querySelector("#stats tbody"), rows);
  }

  function logTicks(lo, hi) {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      const v = Math.pow(10, e);
      if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v);
    }
    return out;
  }

  function timeLabel(t, span) {
    const d = new Date(t * 1000);
    const hm = d.toTimeString().slice(0, span < 600 ? 8 : 5);
    return span > 2 * 86400 ? (d.getMonth() + 1) + "/" + d.getDate() + " " + hm : hm;
  }

  function renderSeries(data) {
    const W = 920, H = 300, L = 56, R = 12, T = 12, B = 32;
    const box = document.getElementById("series");
    const legend = document.getElementById("legend");
    const key = state.metric + "_ms";
    const lines = [];
    data.backends.forEach((b, i) => {
      for (const op of ["read", "write"]) {
        const pts = b.ops[op].series.filter((p) => p[key] !== null && p[key] > 0)
          .map((p) => [p.t_s, p[key]]);
        lines.push({ name: b.name + " " + op, color: COLORS[i % COLORS.length],
          dash: op === "write" ? "6 3" : "", pts: pts });
      }
    });
    const all = lines.flatMap((l) => l.pts.map((p) => p[1]));
    const svg = sv("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img",
      "aria-label": "latency over time" });
    const x0 = data.from_s, x1 = Math.max(data.generated_s, x0 + 1);
    let lo = all.length ? Math.min(...all) : 1, hi = all.length ? Math.max(...all) : 10;
    lo = Math.pow(10, Math.floor(Math.log10(lo))); hi = Math.pow(10, Math.ceil(Math.log10(hi)));
    if (hi <= lo) hi = lo * 10;
    const X = (t) => L + (W - L - R) * (t - x0) / (x1 - x0);
    const Y = (v) => H - B - (H - T - B) * (Math.log10(v) - Math.log10(lo))
      / (Math.log10(hi) - Math.log10(lo));
    for (const v of logTicks(lo, hi)) {
      svg.appendChild(sv("line", { x1: L, x2: W - R, y1: Y(v), y2: Y(v), class: "grid" }));
      svg.appendChild(sv("text", { x: L - 6, y: Y(v) + 4, "text-anchor": "end" }, fmt(v)));
    }
    for (let k = 0; k <= 6; k++) {
      const t = x0 + (x1 - x0) * k / 6;
      svg.appendChild(sv("text", { x: X(t), y: H - B + 16, "text-anchor": "middle" },
        timeLabel(t, x1 - x0)));
    }
    svg.appendChild(sv("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }));
    svg.appendChild(sv("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
    svg.appendChild(sv("text", { x: 12, y: T + (H - T - B) / 2, transform:
      `rotate(-90 12 ${T + (H - T - B) / 2})`, "text-anchor": "middle" }, state.metric + " ms"));
    const items = [];
    for (const l of lines) {
      if (!l.pts.length) continue;
      const d = l.pts.map((p, j) => (j ? "L" : "M") + X(p[0]).toFixed(1) + " "
        + Y(p[1]).toFixed(1)).join(" ");
      svg.appendChild(sv("path", { d: d, fill: "none", stroke: l.color, "stroke-width": 1.6,
        "stroke-dasharray": l.dash, class: "series" }));
      if (l.pts.length === 1) {
        svg.appendChild(sv("circle", { cx: X(l.pts[0][0]), cy: Y(l.pts[0][1]), r: 3,
          fill: l.color }));
      }
      const s = el("span");
      const swatch = el("i");
      swatch.style.background = l.color;
      s.append(swatch, l.name + (l.dash ? " (dashed)" : ""));
      items.push(s);
    }
    box.replaceChildren(svg);
    legend.replaceChildren(...items);
  }

  function pctText(x) {
    return x === null || x === undefined ? "–" : (100 * x).toFixed(1) + "%";
  }

  function renderFreshness(data) {
    const W = 920, H = 240, L = 56, R = 12, T = 12, B = 32;
    const rows = data.freshness || [];
    const table = rows.map((f) => {
      const tr = el("tr");
      const last = f.series.length ? f.series[f.series.length - 1] : {};
      td(tr, f.backend);
      td(tr, f.region);
      td(tr, f.reads, "num");
      td(tr, pctText(f.fresh_fraction), "num");
      td(tr, pctText(last.fresh_fraction), "num");
      td(tr, fmt(last.ttf_p50_ms), "num");
      td(tr, fmt(f.ttf_max_ms), "num");
      td(tr, f.never, "num");
      return tr;
    });
    fill(document.querySelector("#freshness tbody"), table);
    const box = document.getElementById("fresh-series");
    const legend = document.getElementById("fresh-legend");
    if (!rows.length) {
      box.replaceChildren(el("p", "No backend watches staleness in this window (add "
        + "staleness = true to its table in the backends file).", "sub"));
      legend.replaceChildren();
      return;
    }
    const svg = sv("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img",
      "aria-label": "fresh fraction over time" });
    const x0 = data.from_s, x1 = Math.max(data.generated_s, x0 + 1);
    const X = (t) => L + (W - L - R) * (t - x0) / (x1 - x0);
    const Y = (v) => H - B - (H - T - B) * v;
    for (const v of [0, 0.25, 0.5, 0.75, 1]) {
      svg.appendChild(sv("line", { x1: L, x2: W - R, y1: Y(v), y2: Y(v), class: "grid" }));
      svg.appendChild(sv("text", { x: L - 6, y: Y(v) + 4, "text-anchor": "end" },
        (100 * v) + "%"));
    }
    for (let k = 0; k <= 6; k++) {
      const t = x0 + (x1 - x0) * k / 6;
      svg.appendChild(sv("text", { x: X(t), y: H - B + 16, "text-anchor": "middle" },
        timeLabel(t, x1 - x0)));
    }
    svg.appendChild(sv("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }));
    svg.appendChild(sv("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
    svg.appendChild(sv("text", { x: 12, y: T + (H - T - B) / 2, transform:
      `rotate(-90 12 ${T + (H - T - B) / 2})`, "text-anchor": "middle" }, "fresh reads"));
    const items = [];
    rows.forEach((f, i) => {
      const pts = f.series.filter((p) => p.fresh_fraction !== null)
        .map((p) => [p.t_s, p.fresh_fraction]);
      if (!pts.length) return;
      const color = COLORS[i % COLORS.length];
      const d = pts.map((p, j) => (j ? "L" : "M") + X(p[0]).toFixed(1) + " "
        + Y(p[1]).toFixed(1)).join(" ");
      svg.appendChild(sv("path", { d: d, fill: "none", stroke: color, "stroke-width": 1.6,
        class: "series fresh" }));
      const s = el("span");
      const swatch = el("i");
      swatch.style.background = color;
      s.append(swatch, f.backend + " " + f.region);
      items.push(s);
    });
    box.replaceChildren(svg);
    legend.replaceChildren(...items);
  }

  function renderHists(data) {
    const W = 440, H = 170, L = 40, R = 8, T = 10, B = 30;
    const edges = data.edges_ms;
    const figs = [];
    data.backends.forEach((b) => {
      const r = b.ops.read.hist, w = b.ops.write.hist;
      let first = edges.length, last = -1;
      for (let i = 0; i < r.length; i++) {
        if (r[i] || w[i]) { first = Math.min(first, i); last = Math.max(last, i); }
      }
      const fig = el("figure");
      const svg = sv("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img",
        "aria-label": "histogram " + b.name });
      if (last < 0) {
        svg.appendChild(sv("text", { x: W / 2, y: H / 2, "text-anchor": "middle" },
          "no successful samples"));
      } else {
        first = Math.max(0, first - 1); last = Math.min(r.length - 1, last + 1);
        const n = last - first + 1;
        const top = Math.max(1, ...r.slice(first, last + 1), ...w.slice(first, last + 1));
        const bw = (W - L - R) / n;
        const Y = (c) => H - B - (H - T - B) * c / top;
        svg.appendChild(sv("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
        svg.appendChild(sv("text", { x: L - 4, y: T + 8, "text-anchor": "end" }, top));
        for (let i = first; i <= last; i++) {
          const x = L + (i - first) * bw;
          for (const [arr, color, off] of [[r, "#1f77b4", 0], [w, "#ff7f0e", bw / 2]]) {
            if (arr[i]) {
              svg.appendChild(sv("rect", { x: (x + off).toFixed(1), y: Y(arr[i]).toFixed(1),
                width: Math.max(bw / 2 - 0.5, 0.5).toFixed(1),
                height: (H - B - Y(arr[i])).toFixed(1), fill: color, class: "bar" }));
            }
          }
          if ((i - first) % Math.max(1, Math.round(n / 6)) === 0) {
            svg.appendChild(sv("text", { x: x, y: H - B + 14, "text-anchor": "middle" },
              fmt(edges[i])));
          }
        }
        svg.appendChild(sv("text", { x: (W + L) / 2, y: H - 3, "text-anchor": "middle" },
          "latency (ms, log bins)   read ■ blue   write ■ orange"));
      }
      fig.appendChild(svg);
      fig.appendChild(el("figcaption", b.name + " — " + b.status));
      figs.push(fig);
    });
    document.getElementById("hists").replaceChildren(...figs);
  }

  function render(data) {
    renderCompare(data);
    renderStats(data);
    renderSeries(data);
    renderFreshness(data);
    renderHists(data);
    document.getElementById("updated").textContent = data.samples + " samples in window, "
      + "updated " + new Date(data.generated_s * 1000).toLocaleTimeString();
    document.getElementById("error").hidden = true;
    document.body.dataset.rendered = "1";
  }

  async function load() {
    try {
      const resp = await fetch("/api/stats?window=" + encodeURIComponent(state.window),
        { cache: "no-store" });
      const data = await resp.json();
      if (!resp.ok) throw new Error(data.error || resp.statusText);
      state.data = data;
      renderButtons(data.windows);
      render(data);
    } catch (err) {
      const e = document.getElementById("error");
      e.textContent = "cannot load samples: " + err.message;
      e.hidden = false;
    }
  }

  function renderButtons(windows) {
    const nav = document.getElementById("windows");
    nav.replaceChildren(...windows.map((w) => {
      const b = el("button", w, w === state.window ? "active" : "");
      b.type = "button";
      b.addEventListener("click", () => { state.window = w; load(); });
      return b;
    }));
  }

  document.getElementById("metric").addEventListener("change", (ev) => {
    state.metric = ev.target.value;
    if (state.data) renderSeries(state.data);
  });
  load();
  setInterval(load, REFRESH_MS);
})();
