// Run overview: tasks x trials grid, metrics with denominators, per-task trajectory charts, timing.
"use strict";
(function () {
  const { esc, num, when, badge, outcome } = RS;
  const UNSCORED = ["mismatch", "replay_error", "unverified", "incomplete", "not_started"];

  function slotAttempts(series) {
    const by = {};
    series.attempts.forEach((a) => (by[a.index] = by[a.index] || []).push(a));
    return by;
  }

  function grid(run) {
    const snap = run.snapshot || {};
    const unstarted = snap.unstarted_tasks || [];
    const T = Math.max(...run.series.map((s) => s.trials), ...unstarted.map((u) => u.trials), 1);
    const idle = snap.live ? "pending" : "not_started"; // a slot no attempt has reached yet
    let h = '<table class="grid"><thead><tr><th>task</th><th>model / mode</th>';
    for (let t = 1; t <= T; t++) h += `<th>trial ${t}</th>`;
    h += "<th>A</th><th>Q</th></tr></thead><tbody>";
    run.series.forEach((s) => {
      const by = slotAttempts(s);
      const m = s.metrics || {};
      h += `<tr><th class="task">${esc(s.task)}</th><td class="muted">${esc(s.model)} · ${esc(s.mode)}</td>`;
      for (let t = 1; t <= T; t++) {
        const list = by[t] || [];
        const a = list[list.length - 1];
        const status = !list.length ? idle : (m.statuses || [])[t - 1] || "";
        if (!list.length) {
          h += `<td class="cell s-${status}" data-slot="${t}"><span class="muted">${status.replace("_", " ")}</span></td>`;
          continue;
        }
        if (a.running) { // no end recorded yet and the run goes: what it has done so far is on its page
          h += `<td class="cell s-running" data-slot="${t}" title="slot: running"><a class="trial-link" ` +
            `href="trial.html?t=${encodeURIComponent(a.key)}"><span class="outcome o-pending">running</span></a>` +
            `<div class="small slot">unscored: running</div><div class="small">since ${when(a.started_at)}</div></td>`;
          continue;
        }
        h += `<td class="cell s-${esc(status)}" data-slot="${t}" title="slot: ${esc(status)}">` +
          `<a class="trial-link" href="trial.html?t=${encodeURIComponent(a.key)}">${outcome(a.outcome)}</a><br>${badge(a.verdict)}` +
          (a.judge && a.judge.contradiction ? ` <span class="badge v-bad judge-contradiction" title="visual cross-check ` +
            `(a supplementary audit, never scored): ${a.judge.contradiction} condition(s) contradict the mechanical ` +
            `outcome; review">⚑ judge: contradiction</span>` : "") +
          `<div class="small slot">${UNSCORED.includes(status) ? "unscored: " + esc(status.replace("_", " ")) : "scored"}</div>` +
          (a.outcome === "incomplete" && a.cause ? `<div class="small cause">cause: ${esc(a.cause)}</div>` : "") +
          `<div class="small">${num(a.control_steps, 0)} steps · ${num(a.sim_time, 1)} s sim</div>`;
        if (list.length > 1) {
          h += '<div class="small">earlier: ' + list.slice(0, -1).map((p) =>
            `<a href="trial.html?t=${encodeURIComponent(p.key)}">attempt ${p.attempt} (${esc(p.outcome)})</a>`).join(", ") + "</div>";
        }
        h += "</td>";
      }
      h += `<td>${num(m.A)}</td><td>${num(m.Q)}</td></tr>`;
    });
    unstarted.forEach((u) => { // a task the run was asked for, with no series yet
      h += `<tr class="unstarted"><th class="task">${esc(u.task)}</th><td class="muted">no series yet</td>`;
      for (let t = 1; t <= T; t++) {
        h += t <= u.trials ? `<td class="cell s-${idle}" data-slot="${t}"><span class="muted">${idle.replace("_", " ")}</span></td>` : "<td></td>";
      }
      h += "<td>–</td><td>–</td></tr>";
    });
    return '<div class="scroll">' + h + "</tbody></table></div>" +
      '<p class="small muted">Outcome as recorded, then the replay verdict. A success scores y=1 only when its replay ' +
      "is verified; a replayed failure scores y=0 whatever its replay did (a divergence cannot lift a failure). " +
      "A success its replay did not reproduce (mismatch), replay errors, unverified, incomplete and not-started slots " +
      "stay unscored and leave the series incomplete, so A and Q are not computed for it; so do the running and pending " +
      "slots of a run still going.</p>";
  }

  function estimate(e) {
    return e.mean == null ? `– (n=${e.n})` : `${num(e.mean)} <span class="muted">[${num(e.low)}, ${num(e.high)}], n=${e.n}</span>`;
  }
  function prop(p) {
    return `${p.numerator}/${p.denominator}` +
      (p.value == null ? "" : ` = ${num(p.value)} <span class="muted">[${num(p.low)}, ${num(p.high)}]</span>`);
  }
  const count = (n, one, many = one + "s") => `${n} ${n === 1 ? one : many}`;
  const trials = (list) => list.map((p, i) => `t${i + 1}: ${prop(p)}`).join(" · ");

  // The same rows, in the same order, as `roboswe report` (roboswe/records/report.py dataset_rows).
  function datasetRows(d) {
    const s = d.slots;
    return [
      ["tasks admitted / completed", `${d.admitted_tasks} / ${d.completed_tasks}`],
      ["tasks not completed", esc(d.missing_tasks.join(", ") || "none")],
      ["series recorded / completed", `${d.series_recorded} / ${d.series_completed}`],
      ["slots scored: success / failure", `${s.success} / ${s.failure}`],
      ["slots unscored: mismatch / replay error / unverified / incomplete / not started", UNSCORED.map((k) => s[k]).join(" / ")],
      ["missing slots (unscored + tasks never run)", String(d.missing_slots)],
      ["A: mean verified success, completed tasks", estimate(d.A)],
      ["A lower bound: missing slots as failures", estimate(d.A_lower)],
      ["Q: final streak / T, completed tasks", estimate(d.Q)],
      ["Q lower bound: missing slots as failures", estimate(d.Q_lower)],
      ["trial-1 success", prop(d.trial1)],
      ["success at trial t", trials(d.success_at_trial)],
      ["success by trial t (>= 1 success)", trials(d.success_by_trial)],
      [`gain: success by trial ${d.trials} - trial 1`, estimate(d.gain)],
      ["first success trial (tasks)", Object.entries(d.first_success).map(([k, v]) => `${esc(k)}: ${v}`).join(" · ")],
      ...Object.entries(d.trajectories).map(([k, p]) => [`class: ${k.replace("_", " ")}`, prop(p)]),
      ["regressions (success then failure)", String(d.regressions)],
      ["recovery: failed trial 1, later verified success", prop(d.recovery)],
      ["efficiency: first/last control steps (geo. mean)", estimate(d.efficiency_steps_ratio)],
      ["efficiency: first/last simulated time (geo. mean)", estimate(d.efficiency_sim_time_ratio)],
    ];
  }

  function denominators(run) {
    const d = run.denominators;
    const ex = Object.entries(d.excluded);
    return `<p>Admitted tasks (${d.admitted.length}): ${esc(d.admitted.join(", ") || "–")}</p>` +
      (ex.length ? '<table class="kv excluded">' + ex.map(([t, why]) => `<tr><th>excluded ${esc(t)}</th><td>${esc(why)}</td></tr>`).join("") + "</table>"
        : '<p class="muted">No exclusions recorded.</p>') +
      `<p class="small muted">exclusions from: ${esc(d.source)}</p>`;
  }

  function metrics(run) {
    if (!run.datasets.length) return '<p class="muted">No series recorded.</p>';
    const b = run.bootstrap;
    return denominators(run) + run.datasets.map((d) =>
      `<h3>${esc(d.model)} · mode ${esc(d.mode)}</h3><p class="headline">${esc(d.headline)}</p><table class="kv">` +
      datasetRows(d).map(([k, v]) => `<tr><th>${esc(k)}</th><td>${v}</td></tr>`).join("") + "</table>"
    ).join("") + `<p class="small muted">intervals: ${esc(b.method)}, ${esc(b.resamples)} resamples, seed ${esc(b.seed)}; ` +
      `proportions: ${esc(b.proportions)}</p>`;
  }

  // One inline SVG per task: control steps per trial (line), dots coloured by scored status.
  function chart(s) {
    const W = 360, H = 180, L = 44, R = 12, Tp = 14, B = 30;
    const by = slotAttempts(s);
    const statuses = (s.metrics && s.metrics.statuses) || [];
    const pts = [];
    for (let t = 1; t <= s.trials; t++) {
      const a = (by[t] || []).slice(-1)[0];
      pts.push({ t, steps: a && a.control_steps != null ? a.control_steps : null, status: statuses[t - 1] || "not_started", a });
    }
    // The step budget as a dashed line when it is within the chart's reach, else named under it.
    const most = Math.max(1, ...pts.map((p) => p.steps || 0)), budget = s.trial_steps;
    const maxY = budget && budget <= 2 * most ? budget : most;
    const x = (t) => L + ((W - L - R) * (t - 1)) / Math.max(1, s.trials - 1);
    const y = (v) => Tp + (H - Tp - B) * (1 - v / maxY);
    let svg = `<svg class="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(s.task)} trajectory">`;
    svg += `<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" class="axis"/><line x1="${L}" y1="${Tp}" x2="${L}" y2="${H - B}" class="axis"/>`;
    svg += `<text x="${L - 6}" y="${Tp + 4}" class="tick" text-anchor="end">${maxY}</text><text x="${L - 6}" y="${H - B}" class="tick" text-anchor="end">0</text>`;
    svg += `<text x="12" y="${(H - B) / 2 + 8}" class="tick" transform="rotate(-90 12 ${(H - B) / 2 + 8})" text-anchor="middle">control steps</text>`;
    if (budget && budget === maxY) svg += `<line x1="${L}" y1="${y(budget)}" x2="${W - R}" y2="${y(budget)}" class="budget" stroke-dasharray="5 4"><title>step budget ${budget}</title></line>`;
    const line = pts.filter((p) => p.steps != null).map((p) => `${x(p.t)},${y(p.steps)}`).join(" ");
    if (line) svg += `<polyline points="${line}" class="traj"/>`;
    pts.forEach((p) => {
      svg += `<text x="${x(p.t)}" y="${H - B + 16}" class="tick" text-anchor="middle">t${p.t}</text>`;
      if (p.steps == null) return;
      const dot = `<circle cx="${x(p.t)}" cy="${y(p.steps)}" r="6" class="dot st-${esc(p.status)}"><title>trial ${p.t}: ${esc(p.status)}, ${p.steps} steps</title></circle>`;
      svg += p.a ? `<a href="trial.html?t=${encodeURIComponent(p.a.key)}">${dot}</a>` : dot;
    });
    svg += "</svg>";
    const y_t = ((s.metrics && s.metrics.y) || []).map((v) => (v == null ? "·" : v)).join(" ");
    const shown = [...new Set(pts.filter((p) => p.steps != null).map((p) => p.status))];
    const legend = shown.map((st) => `<span class="legend-item"><span class="swatch st-${esc(st)}"></span>${esc(st)}</span>`)
      .concat(budget ? [`<span class="legend-item muted">${budget === maxY ? '<span class="swatch dash"></span>' : ""}` +
        `step budget ${budget} per trial${budget === maxY ? "" : " (above the chart)"}</span>`] : []).join(" · ");
    return `<figure><figcaption>${esc(s.task)} <span class="muted">y = [${y_t}]</span></figcaption>${svg}<div class="legend">${legend}</div></figure>`;
  }

  const ORDER = ["provider", "execution", "transport", "physics", "rendering", "waits", "recovery", "replay"];
  function timing(run) {
    const t = run.timing || {};
    const keys = Object.keys(t).filter((k) => !["active_time", "sim_time", "wall"].includes(k));
    keys.sort((a, b) => (ORDER.indexOf(a) + 1 || 99) - (ORDER.indexOf(b) + 1 || 99) || a.localeCompare(b));
    const max = Math.max(1e-9, ...keys.map((k) => t[k]));
    const active = t.active_time || 0;
    const [base, baseName] = t.wall ? [t.wall, "trial wall time"] : [active, "active"];
    let h = '<table class="timing">';
    keys.forEach((k) => {
      const share = base && k !== "replay" ? ` (${((100 * t[k]) / base).toFixed(1)}% of ${baseName})` : "";
      h += `<tr><th>${esc(k)}</th><td><div class="bar" style="width:${((240 * t[k]) / max).toFixed(0)}px"></div></td><td>${num(t[k])} s${share}</td></tr>`;
    });
    if (t.wall != null) h += `<tr><th>trial wall time</th><td></td><td>${num(t.wall)} s</td></tr>`;
    h += `<tr><th>active time</th><td></td><td>${num(active)} s</td></tr><tr><th>simulated time</th><td></td><td>${num(t.sim_time)} s</td></tr></table>`;
    return h + '<p class="small muted">Components overlap: physics and rendering a script asks for are inside its execution time.</p>';
  }

  // The snapshot this export is: its time, the run's state then, its running and pending slots.
  function snapshotLine(s) {
    if (!s) return "";
    const going = s.live ? `the run is going: ${s.running} running, ${s.pending} pending slot(s), unscored until they end ` +
      "and replay; the figures below are those of the slots scored by then" : `the run is ${esc(s.run_state)}`;
    return `<p id="snapshot" class="snapshot${s.live ? " live" : ""}">snapshot of ${when(s.at)} · ${going}` +
      (s.refresh ? ` · <span class="muted">re-exported while it changes (roboswe view --live); this page reloads ` +
        `within ${s.refresh} s of a new snapshot</span>` : "") + "</p>";
  }

  RS.load("data/run.js", "run").then((run) => {
    const r = run.run;
    RS.follow(run.snapshot);
    document.title = "roboswe · " + r.run_id;
    document.getElementById("title").textContent = r.run_id;
    const v = run.verifications || {};
    document.getElementById("run-head").innerHTML =
      `<h1>Run ${esc(r.run_id)}</h1><p class="muted">created ${when(r.created_at)} · roboswe ${esc(r.roboswe_version || "?")} · ` +
      `admitted file sha256 <code>${esc((r.admitted_sha256 || "").slice(0, 16))}</code> · ${run.series.length} series · replays: ` +
      (Object.keys(v).map((k) => `${esc(k)} ${v[k]}`).join(", ") || "none") + "</p>" + snapshotLine(run.snapshot) +
      (run.assets_notice ? `<p id="assets-notice" class="assets-notice">${esc(run.assets_notice)}</p>` : "") +
      (run.gallery ? `<p><a id="gallery-link" href="${esc(run.gallery.src)}">painting gallery</a> ` +
        `<span class="small muted">${count(run.gallery.canvases, "canvas", "canvases")} from ${count(run.gallery.rounds, "round")}, ` +
        `${count(run.gallery.goals, "goal")}, each in its round's slot; blinded round-3 pairs</span></p>` : "") +
      (run.results_file ? `<p><a id="download-results" href="${esc(run.results_file.src)}" download="results.json">download results.json</a> ` +
        `<span class="small muted">the figures on this page (sha256 ${esc(run.results_file.sha256.slice(0, 16))}…)</span></p>` : "");
    document.getElementById("grid").innerHTML = grid(run);
    document.getElementById("metrics").innerHTML = metrics(run);
    document.getElementById("charts").innerHTML = run.series.map(chart).join("");
    document.getElementById("timing").innerHTML = timing(run);
    const names = Object.fromEntries(run.series.map((s) => [s.series_id, s.task]));
    const u = run.usage;
    document.getElementById("usage").innerHTML = '<table class="kv usage">' + RS.USAGE_HEAD +
      Object.keys(u.series).map((sid) => RS.usageRow(names[sid] || sid, u.series[sid], u.series_cost[sid])).join("") +
      RS.usageRow("run", u.run, u.run_cost) + "</table>" +
      `<p class="small muted">${u.price ? `price per million tokens: ${esc(u.price.input)} input, ${esc(u.price.cached_input ?? "–")} cached input, ` +
        `${esc(u.price.cache_write ?? "–")} cache write, ${esc(u.price.output)} output ${esc(u.price.currency)}` : "no [provider.price] pinned: cost not reported"}</p>`;
    document.getElementById("context").innerHTML = RS.contextPolicy(run.context.policy) +
      RS.slidesTable(run.context.slides, (s) => `${names[s.series_id] || s.series_id} t${s.trial}`);
  }).catch(RS.showError);
})();
