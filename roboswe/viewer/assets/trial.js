// Trial page: synchronized camera videos, paged operation timeline, operation detail, workspace at any checkpoint.
"use strict";
(function () {
  const { esc, num, when, badge, outcome } = RS;
  const key = new URLSearchParams(location.search).get("t");
  const $ = (id) => document.getElementById(id);
  let trial = null;
  let videos = []; // {el, info}
  let page = -1;
  let selected = null;
  let trace = null; // {steps, action, qpos, stride}: the plot's data, once loaded
  let transcript = null; // assets/transcript.js, once the trial is loaded
  let mishaps = []; // this trial's mishaps from the stored recovery diagnostic (roboswe/records/recovery.py)

  // --- actions and joint positions against the video timeline ----------------------------------
  // One canvas per signal; every component is a line over control steps, the cursor is the
  // step the first video shows now. No library: the site must work from file:// and offline.
  const PAD = { l: 46, r: 8, t: 16, b: 16 };
  // The plots' ink is the page's colour scheme (viewer.css variables), read at each draw: light lines on a dark page.
  const ink = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  function plotRange(rows) {
    let lo = Infinity, hi = -Infinity;
    rows.forEach((r) => r.forEach((v) => { if (v != null) { lo = Math.min(lo, v); hi = Math.max(hi, v); } }));
    if (lo === Infinity) return null;
    if (hi - lo < 1e-9) { lo -= 1; hi += 1; }
    return [lo, hi];
  }
  // stepped: row i's value held over control step (steps[i-1], steps[i]], as an action is applied.
  function drawPlot(canvas, rows, label, stepped) {
    const ctx = canvas.getContext("2d"), w = canvas.width, h = canvas.height, steps = trace.steps;
    ctx.clearRect(0, 0, w, h);
    const width = rows.length ? rows[0].length : 0;
    canvas.dataset.points = String(steps.length);
    canvas.dataset.series = String(width);
    const range = plotRange(rows);
    ctx.fillStyle = ink("--tick");
    ctx.font = "11px sans-serif";
    if (!range || steps.length < 1) {
      ctx.fillText(`${label}: not recorded for this trial`, PAD.l, h / 2);
      return;
    }
    const [lo, hi] = range, s0 = steps[0], s1 = Math.max(steps[steps.length - 1], s0 + 1);
    const x = (s) => PAD.l + (s - s0) / (s1 - s0) * (w - PAD.l - PAD.r);
    const y = (v) => h - PAD.b - (v - lo) / (hi - lo) * (h - PAD.t - PAD.b);
    canvas._x = x; canvas._s = [s0, s1];
    ctx.fillText(`${label} (${width} components)`, PAD.l, 11);
    ctx.fillText(num(hi, 3), 2, PAD.t + 4);
    ctx.fillText(num(lo, 3), 2, h - PAD.b);
    ctx.fillText(`step ${s0}`, PAD.l, h - 3);
    ctx.fillText(`step ${s1}`, w - PAD.r - 60, h - 3);
    ctx.strokeStyle = ink("--plot-frame");
    ctx.strokeRect(PAD.l, PAD.t, w - PAD.l - PAD.r, h - PAD.t - PAD.b);
    for (let c = 0; c < width; c++) {
      ctx.strokeStyle = `hsl(${Math.round(c * 137.5) % 360}, 65%, ${ink("--series-l")})`; // golden angle: neighbours differ
      ctx.beginPath();
      let pen = false;
      for (let i = 0; i < steps.length; i++) {
        const v = rows[i][c];
        if (v == null) { pen = false; continue; }
        const from = stepped && i > 0 ? x(steps[i - 1]) : x(steps[i]);
        if (pen) ctx.lineTo(from, y(v)); else ctx.moveTo(from, y(v));
        if (from !== x(steps[i])) ctx.lineTo(x(steps[i]), y(v));
        pen = true;
      }
      ctx.stroke();
    }
  }
  function drawCursor(canvas, step) {
    const ctx = canvas.getContext("2d");
    if (!canvas._x || step == null) return;
    const X = canvas._x(Math.min(Math.max(step, canvas._s[0]), canvas._s[1]));
    ctx.strokeStyle = ink("--cursor");
    ctx.beginPath(); ctx.moveTo(X, PAD.t); ctx.lineTo(X, canvas.height - PAD.b); ctx.stroke();
    canvas.dataset.cursor = String(step);
  }
  function drawSignals() {
    if (!trace) return;
    const step = currentStep();
    drawPlot($("plot-action"), trace.action, "commanded action", true);
    drawPlot($("plot-qpos"), trace.qpos, "joint positions (qpos)", false);
    drawChunks($("plot-action"));
    ["plot-action", "plot-qpos"].forEach((id) => { drawSuccess($(id)); drawMishaps($(id)); });
    drawCursor($("plot-action"), step);
    drawCursor($("plot-qpos"), step);
  }
  // A policy trial's action chunks: a tick at the step each began (data-chunks counts them).
  function drawChunks(canvas) {
    const chunks = trace.chunks || [];
    canvas.dataset.chunks = String(chunks.length);
    if (!canvas._x || !chunks.length) return;
    const ctx = canvas.getContext("2d");
    ctx.strokeStyle = ink("--axis");
    chunks.forEach((c) => {
      const X = canvas._x(Math.min(Math.max(c.start, canvas._s[0]), canvas._s[1]));
      ctx.beginPath(); ctx.moveTo(X, PAD.t); ctx.lineTo(X, PAD.t + 10); ctx.stroke();
    });
  }
  // The control steps the success predicate held (the trial's success interval), shaded green.
  function drawSuccess(canvas) {
    const held = trial.attempt.success_interval;
    canvas.dataset.success = held ? held.join("-") : "";
    if (!canvas._x || !held) return;
    const clamp = (v) => canvas._x(Math.min(Math.max(v, canvas._s[0]), canvas._s[1]));
    const ctx = canvas.getContext("2d");
    ctx.save();
    ctx.fillStyle = ink("--ok");
    ctx.globalAlpha = Number(ink("--band-opacity")) || 0.15;
    ctx.fillRect(clamp(held[0]), PAD.t, Math.max(1, clamp(held[1]) - clamp(held[0])), canvas.height - PAD.t - PAD.b);
    ctx.restore();
  }
  // `roboswe recovery`'s mishaps (a diagnostic, never scored): a dashed red line where progress fell,
  // a green one where it was regained.
  function drawMishaps(canvas) {
    canvas.dataset.mishaps = String(mishaps.length);
    if (!canvas._x || !mishaps.length) return;
    const ctx = canvas.getContext("2d");
    ctx.save();
    ctx.setLineDash([4, 3]);
    mishaps.forEach((m) => [[m.step, ink("--bad")], [m.recovered_step, ink("--ok")]].forEach(([s, colour]) => {
      if (s == null) return;
      const X = canvas._x(Math.min(Math.max(s, canvas._s[0]), canvas._s[1]));
      ctx.strokeStyle = colour;
      ctx.beginPath(); ctx.moveTo(X, PAD.t); ctx.lineTo(X, canvas.height - PAD.b); ctx.stroke();
    }));
    ctx.restore();
  }
  function setupRecovery(run) {
    const stored = run.recovery;
    const row = stored && (stored.series || []).flatMap((s) => s.trials || []).find((t) => t.trial_id === trial.trial_id);
    if (!row) {
      $("recovery").innerHTML = `<span class="muted">within-trial recovery: ${stored ? "not measured for this trial" : "not computed (roboswe recovery RUN_DIR)"}</span>`;
      return;
    }
    mishaps = row.events || [];
    const mark = (step, label) => `<a href="#" class="seek-step" data-step="${step}">${esc(label)} at step ${step}</a>`;
    $("recovery").innerHTML = `<b>within-trial recovery</b> <span class="muted">(${esc(stored.label)})</span>: ` +
      (row.error ? `<span class="error">${esc(row.error)}</span>` : mishaps.length ? mishaps.map((m) =>
        `<span class="mishap">${mark(m.step, `mishap (${m.rule})`)}, ` + (m.recovered_step != null
          ? `${mark(m.recovered_step, "recovered")} after ${m.steps_to_recovery} steps</span>`
          : `<span class="muted">not recovered by the trial's end (step ${m.censored_at})</span></span>`)).join("; ") : "no mishap");
    $("recovery").addEventListener("click", (ev) => {
      const a = ev.target.closest("a.seek-step");
      if (!a) return;
      ev.preventDefault();
      const s = Number(a.dataset.step);
      seekStep(s);
      loadPage(pageOfStep(s));
    });
  }
  // The operation whose control steps hold a mishap's or recovery's step carries its mark.
  function mishapMarks(op) {
    const inside = (s) => s != null && (op.step_end > op.step_start ? s > op.step_start && s <= op.step_end : s === op.step_start);
    return mishaps.map((m) => (inside(m.step) ? '<span class="badge v-bad" title="within-trial recovery diagnostic">mishap</span>' : "") +
      (inside(m.recovered_step) ? '<span class="badge v-ok" title="within-trial recovery diagnostic">recovered</span>' : "")).join("");
  }
  function stepAt(canvas, ev) {
    const r = canvas.getBoundingClientRect(), frac = ((ev.clientX - r.left) * canvas.width / r.width - PAD.l) / (canvas.width - PAD.l - PAD.r);
    const [s0, s1] = canvas._s;
    return Math.round(s0 + Math.min(1, Math.max(0, frac)) * (s1 - s0));
  }
  function rowOf(step) {
    let best = 0;
    trace.steps.forEach((s, i) => { if (s <= step) best = i; });
    return best;
  }
  function setupSignals() {
    const t = trial.trace;
    if (!t || t.error) {
      $("signals-note").textContent = t ? t.error : "no per-step record";
      return Promise.resolve();
    }
    return RS.load(t.src, `t/${key}/trace`).then((data) => {
      trace = data;
      $("signals-note").textContent = `${data.recorded_steps} control steps` +
        (data.stride > 1 ? `, every ${data.stride}th plotted` : "") + " · red line: the step the video shows · " +
        "green: the steps the success predicate held · click to seek";
      ["plot-action", "plot-qpos"].forEach((id) => {
        const c = $(id);
        c.addEventListener("click", (ev) => { if (c._s) { seekStep(stepAt(c, ev)); drawSignals(); } });
        c.addEventListener("mousemove", (ev) => {
          if (!c._s) return;
          const i = rowOf(stepAt(c, ev)), rows = id === "plot-action" ? trace.action : trace.qpos;
          c.title = `step ${trace.steps[i]}: ` + rows[i].map((v) => (v == null ? "–" : num(v, 4))).join(", ");
        });
      });
      drawSignals();
      // the reader's system switching between light and dark redraws the plots in the new ink
      matchMedia("(prefers-color-scheme: dark)").addEventListener("change", drawSignals);
    });
  }

  // --- video -----------------------------------------------------------------------------------
  function stepSeconds(info, step) {
    return Math.max(0, (step - info.first_step) * info.control_timestep);
  }
  function seekStep(step) {
    videos.forEach(({ el, info }) => {
      const target = Math.min(stepSeconds(info, step), el.duration || Infinity);
      el.currentTime = target;
    });
    showClock();
  }
  function master() {
    return videos.length ? videos[0] : null;
  }
  function currentStep() {
    const m = master();
    return m ? Math.round(m.info.first_step + m.el.currentTime / m.info.control_timestep) : null;
  }
  function showClock() {
    const m = master();
    if (!m) return;
    const step = currentStep();
    $("clock").textContent = `step ${step} · ${m.el.currentTime.toFixed(2)} s sim`;
    $("scrub").value = m.el.currentTime;
    drawSignals();
    // mark the operations on this page whose control steps are playing now
    document.querySelectorAll("#timeline li.op").forEach((li) => {
      const a = Number(li.dataset.step), b = Number(li.dataset.end);
      li.classList.toggle("playing", b > a && step > a && step <= b);
    });
  }
  function setupVideos() {
    const box = $("videos");
    const list = trial.videos || [];
    if (!list.length) {
      const lost = (trial.failed_artifacts || []).filter((f) => f.artifact === "video");
      box.innerHTML = lost.length ? lost.map((f) => `<p class="warning">${esc(f.line)}</p>`).join("")
        : '<p class="muted">No video was recorded for this trial.</p>';
      $("player").querySelector(".controls").hidden = true;
      return;
    }
    list.forEach((info) => {
      const fig = document.createElement("figure");
      if (info.error) {
        fig.innerHTML = `<figcaption>${esc(info.camera)}</figcaption><p class="error">${esc(info.error)}</p>`;
        box.appendChild(fig);
        return;
      }
      const el = document.createElement("video");
      el.src = info.src;
      el.muted = true;
      el.preload = "auto";
      el.playsInline = true;
      el.dataset.camera = info.camera;
      el.width = info.width;
      el.height = info.height;
      fig.appendChild(el);
      const cap = document.createElement("figcaption");
      cap.textContent = `${info.camera} · ${info.frames.length} frames · plays in simulation time`;
      fig.appendChild(cap);
      box.appendChild(fig);
      videos.push({ el, info });
    });
    const m = master();
    if (!m) return;
    m.el.addEventListener("loadedmetadata", () => ($("scrub").max = m.el.duration || 0));
    m.el.addEventListener("timeupdate", () => {
      showClock();
      videos.slice(1).forEach(({ el }) => { // keep followers within one frame of the first camera
        if (Math.abs(el.currentTime - m.el.currentTime) > 0.12) el.currentTime = m.el.currentTime;
      });
    });
    m.el.addEventListener("ended", () => ($("play").textContent = "▶ play"));
    $("play").addEventListener("click", () => {
      const playing = !m.el.paused;
      videos.forEach(({ el }) => (playing ? el.pause() : el.play().catch(() => {})));
      $("play").textContent = playing ? "▶ play" : "❚❚ pause";
    });
    $("scrub").addEventListener("input", (e) => {
      videos.forEach(({ el }) => (el.currentTime = Number(e.target.value)));
      showClock();
    });
  }

  // --- timeline (each operation's one-line summary is written at export: roboswe/viewer/_summary.py) ---
  function loadPage(n) {
    if (n < 0 || n >= trial.chunks.length) return Promise.resolve();
    return RS.load(`data/t/${key}/ops-${n}.js`, `t/${key}/ops/${n}`).then((ops) => {
      page = n;
      $("page").value = String(n);
      const ol = $("timeline");
      ol.innerHTML = ops.map((op, i) => {
        const steps = op.step_end > op.step_start ? `steps ${op.step_start}–${op.step_end}` : `at step ${op.step_start}`;
        const err = op.feedback && (op.feedback.is_error || op.feedback.error) ? " op-error" : "";
        return `<li class="op op-${esc(op.operation)}${err}" data-i="${i}" data-seq="${op.seq}" data-step="${op.step_start}" data-end="${op.step_end}" tabindex="0">` +
          `<span class="seq">#${op.seq}</span> <b>${esc(op.operation)}</b> <span class="sum">${mishapMarks(op)}${esc(op.summary || "")}</span>` +
          `<span class="steps">${steps}</span></li>`;
      }).join("");
      ol.querySelectorAll("li.op").forEach((li) => {
        const go = () => select(ops[Number(li.dataset.i)], li);
        li.addEventListener("click", go);
        li.addEventListener("keydown", (e) => { if (e.key === "Enter") go(); });
      });
      ol.scrollTop = 0;
    });
  }
  function pageOfStep(step) {
    const i = trial.chunks.findIndex((c) => c.step_max >= step);
    return i < 0 ? trial.chunks.length - 1 : i;
  }

  function select(op, li) {
    if (selected) selected.classList.remove("selected");
    selected = li;
    li.classList.add("selected");
    seekStep(op.step_start);
    $("detail").classList.remove("muted");
    $("detail").innerHTML = detail(op);
    if (transcript) transcript.link(op.seq);
    const cp = checkpointAt(op.seq);
    if (cp >= 0) { $("checkpoint").value = String(cp); showCheckpoint(cp); }
  }

  function block(title, body, cls) {
    return `<div class="blk ${cls || ""}"><div class="blk-t">${esc(title)}</div>${body}</div>`;
  }
  function pre(text, cls) {
    return `<pre class="${cls || ""}">${esc(text)}</pre>`;
  }
  function diffHtml(diff) {
    return '<pre class="diff">' + diff.split("\n").map((l) => {
      const c = l.startsWith("+++") || l.startsWith("---") ? "dh" : l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : l.startsWith("@@") ? "hunk" : "";
      return `<span class="${c}">${esc(l)}</span>`;
    }).join("\n") + "</pre>";
  }
  // A written file is shown once, as its diff: the call's content argument is not repeated above it.
  function withoutContent(args, op) {
    if (op.diff == null) return args;
    try {
      const a = JSON.parse(args);
      if (typeof a.content !== "string") return args;
      a.content = `(${a.content.length} characters: shown below as the diff)`;
      return JSON.stringify(a);
    } catch (e) { return args; }
  }
  function detail(op) {
    let h = `<h3>#${op.seq} ${esc(op.operation)}</h3><p class="small muted">control steps ${op.step_start}–${op.step_end} ` +
      `(${op.step_end - op.step_start} used) · ${num(op.ended_at - op.started_at)} s wall · ${when(op.started_at)}</p>`;
    const m = op.message;
    if (m) {
      const parts = (m.parts || []).map((p) => {
        if (p.kind === "reasoning") return block("reasoning (exposed by the provider)", pre(p.text, "reasoning"), "reason");
        if (p.kind === "text") return block("model text", pre(p.text));
        if (p.kind === "tool_call") return block(`tool call: ${p.name}`, pre(RS.argsText(withoutContent(p.arguments, op))));
        return block("note", pre(p.text || ""));
      }).join("");
      h += block(`model call · ${m.provider}${m.model ? " · " + m.model : ""} · ${num(m.latency)} s`, parts || '<p class="muted">no readable content</p>');
      if (m.error) h += block("provider error", pre(m.error), "bad");
    }
    const a = Object.assign({}, op.arguments || {});
    if (op.diff != null) {
      h += block(`code written: ${a.path || ""}`, op.diff ? diffHtml(op.diff) : '<p class="muted">unchanged</p>');
      delete a.content;
    }
    (op.workspace_changes || []).forEach((c) =>
      (h += block(`workspace ${c.change} by this operation: ${c.path}`, c.diff ? diffHtml(c.diff) : "")));
    const called = m && (m.parts || []).some((p) => p.kind === "tool_call");
    if (Object.keys(a).length && !called) h += block("arguments", pre(JSON.stringify(a, null, 1)));
    const f = Object.assign({}, op.feedback || {});
    let fb = "";
    ["text", "stdout", "stderr", "error"].forEach((k) => {
      const shown = k !== "text" && typeof f.text === "string" && typeof f[k] === "string" && f.text.includes(f[k]);
      if (f[k] != null && f[k] !== "" && !shown) fb += `<div class="small muted">${k}</div>` + pre(f[k], k === "stderr" || k === "error" ? "err" : "");
      delete f[k];
    });
    const shots = (f.images || []).map((d, i) => trial.images && trial.images[d]
      ? `<figure class="shot"><img loading="lazy" src="${esc(trial.images[d])}" alt="observed image ${i}"><figcaption>${esc((f.cameras || [])[i] || "")}</figcaption></figure>` : "").join("");
    if (shots) { fb += `<div class="shots">${shots}</div>`; delete f.images; }
    if (Object.keys(f).length) fb += pre(JSON.stringify(f, null, 1));
    h += block("feedback", fb || '<p class="muted">none</p>');
    const turns = document.querySelectorAll(`#transcript li.turn[data-seq="${op.seq}"]`);
    if (turns.length) h += `<p><a href="#" class="to-turn" data-n="${turns[0].dataset.n}">in the transcript: ` +
      `${turns.length} turn(s) from #${turns[0].dataset.n}</a></p>`;
    return h;
  }

  // A turn's operation: its page of the timeline, selected (which seeks every video to its first step).
  function goToOperation(seq) {
    const n = trial.chunks.findIndex((c) => c.first_seq <= seq && seq <= c.last_seq);
    if (n < 0) return Promise.resolve();
    return (n === page ? Promise.resolve() : loadPage(n)).then(() => {
      const li = document.querySelector(`#timeline li.op[data-seq="${seq}"]`);
      if (li) { li.click(); li.scrollIntoView({ block: "nearest" }); }
    });
  }
  // Space plays or pauses, arrows step a control step (shift: ten), unless a field has the keys.
  function setupKeys() {
    document.addEventListener("keydown", (ev) => {
      if (ev.target.closest && ev.target.closest("input, textarea, select, button") || ev.ctrlKey || ev.metaKey || ev.altKey) return;
      if (!master()) return;
      if (ev.key === " ") { ev.preventDefault(); $("play").click(); }
      else if (ev.key === "ArrowRight" || ev.key === "ArrowLeft") {
        ev.preventDefault();
        const by = (ev.shiftKey ? 10 : 1) * (ev.key === "ArrowRight" ? 1 : -1);
        seekStep(Math.max(master().info.first_step, currentStep() + by));
      }
    });
  }

  // --- workspace -------------------------------------------------------------------------------
  function checkpointAt(seq) {
    let best = -1;
    trial.checkpoints.forEach((c, i) => { if (c.op_seq == null ? best < 0 : c.op_seq <= seq) best = i; });
    return best;
  }
  function showCheckpoint(i) {
    const c = trial.checkpoints[i];
    const ul = $("files");
    if (!c) { ul.innerHTML = ""; return; }
    ul.innerHTML = c.files.map((f, j) => `<li data-j="${j}"><a href="#" class="file-link">${esc(f.path)}</a> <span class="small muted">${f.size} B</span></li>`).join("") ||
      '<li class="muted">empty workspace</li>';
    if (c.error) ul.innerHTML += `<li class="error">${esc(c.error)}</li>`;
    (c.refused || []).forEach((r) => (ul.innerHTML += `<li class="error">${esc(r.path)}: ${esc(r.reason)}</li>`));
    ul.querySelectorAll("li[data-j]").forEach((li) => li.querySelector("a").addEventListener("click", (e) => {
      e.preventDefault();
      const f = c.files[Number(li.dataset.j)];
      RS.load(`data/b/${f.sha256}.js`, `b/${f.sha256}`).then((b) => {
        $("file").classList.remove("muted");
        $("file").textContent = b.binary ? `(binary file, ${b.size} bytes)` : b.error ? b.error : b.text + (b.truncated ? "\n… (truncated)" : "");
      }).catch(RS.showError);
    }));
  }
  function setupWorkspace() {
    const sel = $("checkpoint");
    sel.innerHTML = trial.checkpoints.map((c, i) =>
      `<option value="${i}">${esc(c.label)}${c.op_seq == null ? "" : " after #" + c.op_seq} · ${c.files.length} files</option>`).join("") ||
      "<option>no checkpoints recorded</option>";
    sel.addEventListener("change", () => showCheckpoint(Number(sel.value)));
    if (trial.checkpoints.length) showCheckpoint(0);
  }

  // --- page ------------------------------------------------------------------------------------
  function header(run) {
    const a = trial.attempt;
    document.title = `roboswe · ${trial.task} trial ${a.index}`;
    $("title").textContent = `${trial.task} · trial ${a.index}/${trial.trials}` + (a.attempt ? ` (attempt ${a.attempt})` : "");
    const series = run.series.find((s) => s.series_id === trial.series_id);
    if (series) {
      const ids = series.attempts.map((x) => x.key);
      const i = ids.indexOf(key);
      const link = (k, label) => (k ? `<a href="trial.html?t=${encodeURIComponent(k)}">${label}</a>` : `<span class="muted">${label}</span>`);
      $("nav").innerHTML = link(ids[i - 1], "◀ previous") + " · " + link(ids[i + 1], "next ▶");
    }
    const timing = Object.entries(a.timing || {}).map(([k, v]) => `${esc(k)} ${num(v)} s`).join(" · ");
    $("trial-head").innerHTML =
      `<h1>${esc(trial.task)} — trial ${a.index} ` + (a.running ? '<span class="outcome o-pending">running</span>'
        : `${outcome(a.outcome)} ${badge(a.verdict)}`) + "</h1>" +
      (a.running ? `<p id="trial-running" class="snapshot live">running at the snapshot of ${when(run.snapshot.at)}: ` +
        "what it recorded by then, unscored</p>" : "") +
      (run.assets_notice ? `<p id="assets-notice" class="assets-notice">${esc(run.assets_notice)}</p>` : "") +
      `<p>${num(a.control_steps, 0)} control steps · ${num(a.sim_time)} s simulated · ${num(a.active_time)} s active · ` +
      `${trial.operations} operations · ` +
      (a.running ? "no end yet" : a.cause ? `<span id="trial-cause">cause: ${esc(a.cause)}</span>${a.detail ? ` (${esc(a.detail)})` : ""}` :
        `reason: ${esc(a.reason || "–")}`) +
      (a.success_interval ? ` · success held steps ${a.success_interval[0]}–${a.success_interval[1]}` : "") + "</p>" +
      (a.first_divergence ? `<p class="error">first divergence on replay: ${esc(a.first_divergence)}` +
        (a.outcome === "failure" ? " (the recorded failure still scores 0)" : "") + "</p>" : "") +
      ((a.output_differences || []).length ? '<p class="small muted">program output that differed on replay (not scored): ' +
        a.output_differences.map((d) => `operation ${esc(d.seq)} ${esc(d.script)}: ${esc(d.differs.join(", "))}`).join("; ") +
        "</p>" : "") +
      `<p class="small muted">${esc(trial.model)} · mode ${esc(trial.mode)} · started ${when(a.started_at)} · ${timing}</p>` +
      (trial.evidence ? `<p><a id="download-evidence" href="${esc(trial.evidence.src)}" download>download evidence</a> ` +
        `<span class="small muted">this trial's records and videos as one zip, ${num(trial.evidence.size / 1048576, 1)} MB` +
        (Object.keys(trial.evidence.missing).length ? `; ${Object.keys(trial.evidence.missing).length} file(s) missing, see its MANIFEST.json` : "") +
        "</span></p>" : "");
    const u = run.usage, ctx = run.context;
    const mine = ctx.slides.filter((s) => s.trial_id === trial.trial_id);
    $("trial-context").innerHTML = "<h2>Tokens, cost and context</h2>" +
      (u.trials[trial.trial_id] ? '<table class="kv usage">' + RS.USAGE_HEAD +
        RS.usageRow("this trial", u.trials[trial.trial_id], u.trial_cost[trial.trial_id]) + "</table>"
        : '<p class="muted">No provider calls recorded for this trial.</p>') +
      RS.contextPolicy(ctx.policy) + RS.slidesTable(mine, (s) => `trial ${s.trial}`);
  }

  if (!key) { RS.showError("no trial given: open this page from the run overview"); return; }
  Promise.all([RS.load("data/run.js", "run"), RS.load(`data/t/${key}/trial.js`, `t/${key}`)]).then(([run, t]) => {
    trial = t;
    header(run);
    setupRecovery(run);
    setupVideos();
    setupWorkspace();
    $("op-count").textContent = `(${trial.operations}, ${trial.chunk} per page)`;
    $("page").innerHTML = trial.chunks.map((c) =>
      `<option value="${c.n}">#${c.first_seq}–#${c.last_seq} · steps ${c.step_min}–${c.step_max}</option>`).join("");
    $("page").addEventListener("change", (e) => loadPage(Number(e.target.value)));
    $("prev").addEventListener("click", () => loadPage(page - 1));
    $("next").addEventListener("click", () => loadPage(page + 1));
    $("goto-step").addEventListener("change", (e) => {
      const step = Number(e.target.value);
      seekStep(step);
      loadPage(pageOfStep(step));
    });
    if (!trial.chunks.length) $("timeline").innerHTML = '<li class="muted">No operations recorded.</li>';
    $("detail").addEventListener("click", (ev) => {
      const a = ev.target.closest("a.to-turn");
      if (a) { ev.preventDefault(); transcript.show(a.dataset.n); }
    });
    setupKeys();
    transcript = RS.transcript({ key, trial, block, pre, onTurn: goToOperation });
    return Promise.all([loadPage(0), setupSignals(), transcript.setup()]);
  }).then(() => document.body.setAttribute("data-ready", "1")).catch(RS.showError);
})();
