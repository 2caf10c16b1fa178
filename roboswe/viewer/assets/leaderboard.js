// Leaderboard and run browser: data/leaderboard.js, written by `roboswe leaderboard --out` (roboswe/viewer/_leaderboard.py).
"use strict";
(function () {
  const { esc, num, when } = RS;
  const $ = (id) => document.getElementById(id);
  const est = (e) => (e.mean == null ? "–" : `${num(e.mean)} <span class="muted">[${num(e.low)}, ${num(e.high)}]</span>`);
  const prop = (p) => (p.value == null ? `– <span class="muted">(${p.numerator}/${p.denominator})</span>`
    : `${num(p.value)} <span class="muted">[${num(p.low)}, ${num(p.high)}] (${p.numerator}/${p.denominator})</span>`);
  const money = (c) => (c.per_task == null ? `<span class="muted">not reported: ${esc(c.reason)}</span>`
    : `${c.per_task.toFixed(4)} ${esc(c.currency)}`);

  function cell(c) {
    if (!c) return '<td class="cell s-not_started">not run</td>';
    if (c.completed) return `<td class="cell s-success">A ${num(c.A)} · Q ${num(c.Q)}<br><span class="small muted">y = [${c.y.join(" ")}]</span></td>`;
    const unscored = c.statuses.filter((s) => s !== "success" && s !== "failure").length;
    return `<td class="cell s-incomplete">≥ ${num(c.A_lower)} <span class="small muted">(${unscored} unscored)</span></td>`;
  }
  // Success by trial t per model, its Wilson interval shaded; one colour per model, named in the legend.
  function plot(models) {
    const W = 420, H = 220, L = 40, R = 10, T = 12, B = 30;
    const trials = Math.max(1, ...models.map((m) => m.trials));
    const x = (t) => L + (trials === 1 ? 0.5 : (t - 1) / (trials - 1)) * (W - L - R);
    const y = (v) => H - B - v * (H - T - B);
    let svg = `<svg class="chart success-plot" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="success by trial">`;
    svg += `<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" class="axis"/><line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" class="axis"/>`;
    [0, 0.5, 1].forEach((v) => (svg += `<text x="${L - 6}" y="${y(v) + 4}" class="tick" text-anchor="end">${v}</text>`));
    for (let t = 1; t <= trials; t++) svg += `<text x="${x(t)}" y="${H - B + 16}" class="tick" text-anchor="middle">t${t}</text>`;
    const legend = [];
    models.forEach((m, i) => {
      // the lightness is the colour scheme's (viewer.css --series-l): a line stays readable on a dark page
      const colour = `hsl(${Math.round(i * 137.5) % 360} 60% var(--series-l))`;
      const pts = m.success_by_trial.map((p, k) => [k + 1, p]).filter(([, p]) => p.value != null);
      if (pts.length) {
        const band = pts.map(([t, p]) => `${x(t)},${y(p.high)}`).concat(pts.slice().reverse().map(([t, p]) => `${x(t)},${y(p.low)}`));
        svg += `<polygon points="${band.join(" ")}" class="band" style="fill: ${colour}"/>`;
        svg += `<polyline points="${pts.map(([t, p]) => `${x(t)},${y(p.value)}`).join(" ")}" fill="none" style="stroke: ${colour}" stroke-width="2"/>`;
      }
      legend.push(`<span class="legend-item"><span class="swatch" style="background:${colour}"></span>${esc(m.model)} (${esc(m.mode)})` +
        (pts.length ? "" : ' <span class="muted">no completed task</span>') + "</span>");
    });
    svg += "</svg>";
    return `<figure><figcaption>success by trial t (at least one verified success in trials 1..t; shaded: 95% Wilson interval)</figcaption>` +
      `${svg}<div class="legend">${legend.join(" ")}</div></figure>`;
  }
  function board(g, n) {
    const head = `<h2>Group ${n}: ${g.runs.length} run(s)</h2><p class="small">${g.runs.map(esc).join(" · ")}</p>` +
      g.differs_from_first.map((d) => `<p class="warning">pinned unlike group 1: ${esc(d.field)} (${esc(d.detail)})</p>`).join("") +
      g.allowed.map((d) => `<p class="pin-differs">pooled although ${esc(d.field)} differs (--allow-differ): ${esc(d.detail)}</p>`).join("");
    const rows = g.models.map((m) => `<tr><th>${esc(m.model)} <span class="muted">(${esc(m.mode)})</span></th><td>${est(m.A)}</td>` +
      `<td>${est(m.Q)}</td><td>${prop(m.trial1)}</td><td>${est(m.gain)}</td><td>${money(m.cost)}</td>` +
      `<td>${m.completed_tasks} / ${m.admitted_tasks}</td><td>${m.missing_slots}</td></tr>`).join("");
    const models = '<div class="scroll"><table class="kv leaderboard"><tr><th>model</th><th>A</th><th>Q</th><th>trial-1 success</th><th>gain</th>' +
      `<th>cost per task</th><th>completed / admitted tasks</th><th>incomplete slots</th></tr>${rows}</table></div>`;
    const grid = '<div class="scroll"><table class="grid"><thead><tr><th>task</th>' + g.models.map((m) => `<th>${esc(m.model)}</th>`).join("") +
      "</tr></thead><tbody>" + g.tasks.map((t) => `<tr><th>${esc(t)}</th>${g.models.map((m) => cell(m.cells[t])).join("")}</tr>`).join("") +
      "</tbody></table></div>";
    return `<section class="group" data-group="${n}">${head}${models}<h3>Models × tasks</h3>${grid}<div class="charts">${plot(g.models)}</div></section>`;
  }
  function runs(list) {
    return '<div class="scroll"><table class="kv runs"><tr><th>run directory</th><th>run</th><th>created</th><th>pin group</th><th>models</th>' +
      "<th>tasks</th><th>series</th><th>cost</th><th>viewer</th></tr>" + list.map((r) => `<tr><td>${esc(r.run_dir)}</td><td>${esc(r.run_id)}</td>` +
        `<td>${when(r.created_at)}</td><td>${r.group}</td><td>${r.models.map(esc).join(", ")}</td><td>${r.tasks.map(esc).join(", ")}</td>` +
        `<td>${r.series}</td><td>${r.cost.amount == null ? `<span class="muted">${esc(r.cost.reason)}</span>` : `${r.cost.amount.toFixed(4)} ${esc(r.cost.currency)}`}</td>` +
        `<td>${r.viewer ? `<a href="${esc(r.viewer)}">open</a>` : `<span class="muted">not exported: roboswe export ${esc(r.run_dir)} --out …</span>`}</td></tr>`).join("") +
      "</table></div>";
  }
  RS.load("data/leaderboard.js", "leaderboard").then((data) => {
    if ($("boards")) {
      const b = data.bootstrap;
      $("methods").textContent = `intervals: ${b.method}, ${b.resamples} resamples, seed ${b.seed}; proportions: ${b.proportions}.`;
      $("boards").innerHTML = data.groups.map((g, i) => board(g, i + 1)).join("") || '<p class="muted">No runs.</p>';
    }
    if ($("runs")) $("runs").innerHTML = runs(data.runs);
    document.body.setAttribute("data-ready", "1");
  }).catch(RS.showError);
})();
