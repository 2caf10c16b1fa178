// Shared by every page: lazy data loading through <script> tags (works from file://), formatting.
"use strict";
window.RS = (function () {
  const store = {};
  const waiting = {};
  function put(key, data) {
    store[key] = data;
    (waiting[key] || []).forEach((w) => w.resolve(data));
    delete waiting[key];
  }
  // Load data/<path> once; resolves with what the file passed to RS.put(key, ...).
  function load(path, key) {
    if (key in store) return Promise.resolve(store[key]);
    return new Promise((resolve, reject) => {
      const first = !waiting[key];
      (waiting[key] = waiting[key] || []).push({ resolve, reject });
      if (!first) return;
      const s = document.createElement("script");
      s.src = path;
      s.async = true;
      s.onerror = () => {
        (waiting[key] || []).forEach((w) => w.reject(new Error("could not load " + path)));
        delete waiting[key];
      };
      document.head.appendChild(s);
    });
  }
  function esc(v) {
    return String(v == null ? "" : v).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  }
  function num(v, digits) {
    if (v == null || Number.isNaN(v)) return "–";
    return typeof v === "number" ? v.toFixed(digits == null ? 2 : digits) : String(v);
  }
  function when(t) {
    return t ? new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "–";
  }
  const VERDICT = {
    verified: ["✓ verified", "v-ok", "replay agreed with the original"],
    mismatch: ["✗ mismatch", "v-bad", "replay diverged: a success is not scored; a failure still scores 0"],
    error: ["! replay error", "v-err", "replay could not run; not scored"],
  };
  function badge(verdict) {
    const [label, cls, title] = VERDICT[verdict] || ["… unverified", "v-none", "no replay yet; not scored until a replay agrees"];
    return `<span class="badge ${cls}" title="${esc(title)}">${esc(label)}</span>`;
  }
  function outcome(o) {
    return `<span class="outcome o-${esc(o)}">${esc(o)}</span>`;
  }
  function showError(err) {
    const box = document.getElementById("error") || document.body;
    const p = document.createElement("p");
    p.className = "error";
    p.textContent = String(err && err.message ? err.message : err);
    box.appendChild(p);
  }
  // Token totals and cost, the same columns as `roboswe report`.
  function usageRow(label, u, c) {
    const int = (v) => (v == null ? "–" : Number(v).toLocaleString("en-US"));
    const cost = c.amount == null ? `<span class="muted">not reported: ${esc(c.reason)}</span>` : `${c.amount.toFixed(4)} ${esc(c.currency)}`;
    return `<tr><th>${esc(label)}</th><td>${u.calls}</td><td>${int(u.input)}</td><td>${int(u.cached_input)}</td>` +
      `<td>${int(u.output)}</td><td>${int(u.reasoning)}</td><td>${u.unreported_calls} / ${u.failed_calls}</td><td>${cost}</td></tr>`;
  }
  const USAGE_HEAD = "<tr><th></th><th>calls</th><th>input</th><th>cached input</th><th>output</th><th>reasoning</th>" +
    "<th>unreported / failed</th><th>cost</th></tr>";
  // The context policy line and a table of slides, the same fields as `roboswe report`.
  function contextPolicy(p) {
    const n = (v) => (v == null ? "–" : Number(v).toLocaleString("en-US"));
    const counting = Object.entries(p.counting).map(([k, v]) => `${esc(k)} ×${v}`).join(", ") || "no requests counted";
    return `<p class="policy">${esc(p.provider)} ${esc(p.model)}: C = ${n(p.C)}, O = ${n(p.O)}, S = ${n(p.S)}, ` +
      `B = C − O − S = ${n(p.B)}; a slide removes ≥ ${n(p.slide_min_units)} units; counting: ${counting} ` +
      `(${p.exact_requests} exact, ${p.estimated_requests} estimated)</p>`;
  }
  function slidesTable(slides, label) {
    if (!slides.length) return '<p class="muted">No context slides.</p>';
    const n = (v) => Number(v).toLocaleString("en-US");
    return '<table class="kv slides"><tr><th>trial</th><th>slide</th><th>at</th><th>messages removed</th>' +
      "<th>units before</th><th>units after</th><th>removed</th><th>method</th></tr>" +
      slides.map((s) => `<tr><td>${esc(label(s))}</td><td>${s.seq}</td><td>${when(s.at)}</td><td>${s.removed}</td>` +
        `<td>${n(s.before_units)}</td><td>${n(s.after_units)}</td><td>${n(s.units_removed)}</td><td>${esc(s.method)}</td></tr>`).join("") +
      "</table>";
  }
  // A site `roboswe view --live` keeps exporting: every `refresh` seconds read data/snapshot.js afresh (a
  // script tag with a new query: file:// and the server alike) and reload once it names a newer snapshot.
  function follow(snap) {
    if (!snap || !snap.refresh) return;
    let n = 0;
    setInterval(() => {
      delete store.snapshot;
      const s = document.createElement("script");
      s.src = `data/snapshot.js?${Date.now()}-${n++}`;
      s.onload = () => { s.remove(); if (store.snapshot && store.snapshot.at !== snap.at) location.reload(); };
      s.onerror = () => s.remove(); // mid-export: the next look finds it
      document.head.appendChild(s);
    }, 1000 * snap.refresh);
  }
  return { put, load, esc, num, when, badge, outcome, showError, store, usageRow, USAGE_HEAD, contextPolicy, slidesTable, follow };
})();
