// Comparison page: paired differences by task between runs (written by `roboswe compare --viewer SITE_DIR`).
"use strict";
(function () {
  const { esc, num } = RS;
  const NAMES = { A: "A (mean verified success)", Q: "Q (final streak / T)", trial1: "trial-1 success",
    success_by_T: "success by trial T (>= 1)", gain: "gain (by T - trial 1)" };
  const mean = (e) => (e.mean == null ? "–" : `${num(e.mean)} <span class="muted">[${num(e.low)}, ${num(e.high)}]</span>`);
  const signed = (v) => (v >= 0 ? "+" : "") + num(v);
  const diff = (e) => (e.mean == null ? `– (n=${e.n})`
    : `${signed(e.mean)} <span class="muted">[${signed(e.low)}, ${signed(e.high)}], n=${e.n}</span>`);
  const list = (xs) => esc(xs.join(", ") || "none");

  function side(label, s) {
    return `<p><b>${label}</b> ${esc(s.run_dir)} <span class="muted">run ${esc(s.run_id)} · ${esc(s.models.join(", "))} · mode ${esc(s.modes.join(", "))}</span></p>`;
  }

  function comparison(c) {
    let h = '<section class="comparison">' + side("A", c.a) + side("B", c.b);
    Object.entries(c.factor).forEach(([k, [a, b]]) => {
      h += `<p class="small">compared factor <b>${esc(k)}</b>: ${esc(JSON.stringify(a))} vs ${esc(JSON.stringify(b))}</p>`;
    });
    c.pin_differences.forEach((d) => {
      h += `<p class="pin-differs">pin differs, allowed by --allow-differ ${esc(d.field)}: ${esc(d.detail)}</p>`;
    });
    h += `<h3>Paired by task over ${c.tasks_both.length} task(s) both completed</h3><table class="kv compare">` +
      "<tr><th>figure</th><th>A</th><th>B</th><th>B − A (paired 95% CI)</th></tr>" +
      c.figures.map((f) => `<tr><th>${esc(NAMES[f.figure] || f.figure)}</th><td>${mean(f.a)}</td><td>${mean(f.b)}</td><td>${diff(f.difference)}</td></tr>`).join("") +
      "</table>";
    h += `<p>tasks both completed: ${list(c.tasks_both)}</p><p>completed by A only: ${list(c.only_a)} · by B only: ${list(c.only_b)} · by neither: ${list(c.neither)}</p>`;
    h += `<p class="small muted">intervals: ${esc(c.bootstrap.method)}, ${esc(c.bootstrap.resamples)} resamples, seed ${esc(c.bootstrap.seed)}; the same task draws on both sides</p>`;
    return h + "</section>";
  }

  RS.load("data/compare.js", "compare").then((list) => {
    document.getElementById("comparisons").innerHTML = list.map(comparison).join("");
  }).catch(() => {
    document.getElementById("comparisons").innerHTML =
      '<p class="muted">No comparison exported here: run <code>roboswe compare RUN_A RUN_B --viewer SITE_DIR</code>.</p>';
  });
})();
