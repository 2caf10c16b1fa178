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
    mismatch: ["✗ mismatch", "v-bad", "replay disagreed; not scored"],
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
  return { put, load, esc, num, when, badge, outcome, showError, store };
})();
