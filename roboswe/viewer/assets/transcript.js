// The trial page's transcript: the system prompt and every turn, from data/t/<key>/transcript.js
// (written at export from the records: roboswe/viewer/_transcript.py), filterable, linked to the timeline.
// Every string in it is participant- or provider-controlled: it reaches the page only through esc().
"use strict";
// A tool call's arguments for display: pretty JSON when they parse, else verbatim; long ones cut.
RS.argsText = function (a) {
  try { a = JSON.stringify(JSON.parse(a), null, 1); } catch (e) { /* keep verbatim */ }
  return a.length > 4000 ? a.slice(0, 4000) + "\n…" : a;
};
// key, trial: the page's; block, pre: its detail formatting; onTurn(seq): a turn of operation seq was chosen.
RS.transcript = function ({ key, trial, block, pre, onTurn }) {
  const { esc, num, when } = RS;
  const $ = (id) => document.getElementById(id);
  function shotsHtml(list) {
    const shots = list.map((p) => p.src
      ? `<figure class="shot"><img loading="lazy" src="${esc(p.src)}" alt="${esc(p.camera)}"><figcaption>${esc(p.camera)}</figcaption></figure>`
      : `<p class="small muted">image ${esc(p.camera)}: its bytes are not in the records</p>`).join("");
    return shots ? `<div class="shots">${shots}</div>` : "";
  }
  function partHtml(p) {
    switch (p.kind) {
      case "text": return pre(p.text);
      case "reasoning": return block("reasoning (exposed by the provider)", pre(p.text, "reasoning"), "reason");
      case "tool_call": return block(`tool call: ${p.name}`, pre(RS.argsText(p.arguments)));
      case "tool_result": return block(p.is_error ? "tool result (error)" : "tool result",
        pre(p.text, p.is_error ? "err" : "") + shotsHtml(p.images || []));
      case "opaque": return `<p class="opaque small muted">opaque ${esc(p.provider)} item (${esc(p.item)}, ${num(p.size, 0)} bytes): ` +
        "passed back to the provider as it came, not readable</p>";
      default: return pre(JSON.stringify(p));
    }
  }
  function turnHtml(e) {
    const op = e.seq == null ? "" : ` data-seq="${e.seq}" data-step="${e.step}"`;
    return `<li class="turn t-${esc(e.role.split(" ")[0])}${e.removed_by == null ? "" : " removed"}" id="turn-${e.n}" data-n="${e.n}"${op} tabindex="0">` +
      `<div class="turn-h"><b>#${e.n} ${esc(e.role)}</b>` + (e.provider ? `<span>${esc(e.provider)}</span>` : "") +
      (e.seq == null ? "" : `<span>operation #${e.seq} · step ${e.step}</span>`) +
      (e.pinned ? "<span>pinned</span>" : "") +
      (e.removed_by == null ? "" : `<span class="warning">left the context at slide ${e.removed_by}</span>`) +
      `<span class="muted">${when(e.at)}</span></div>` + partsHtml(e.parts) + "</li>";
  }
  // Consecutive images (an opening's goal and camera images) side by side, the other parts in order.
  function partsHtml(parts) {
    const out = [];
    for (let i = 0; i < parts.length; i++) {
      if (parts[i].kind !== "image") { out.push(partHtml(parts[i])); continue; }
      let j = i;
      while (j < parts.length && parts[j].kind === "image") j++;
      out.push(shotsHtml(parts.slice(i, j)));
      i = j - 1;
    }
    return out.join("");
  }
  function slideHtml(s) {
    const n = (v) => Number(v).toLocaleString("en-US");
    return `<li class="slide-mark" data-slide="${s.seq}">context slide ${s.seq}: ${s.removed} turn(s) left the request ` +
      `(${n(s.before_units)} → ${n(s.after_units)} units, ${esc(s.method)}) before the next request</li>`;
  }
  function setup() {
    const t = trial.transcript;
    if (!t) { $("transcript").innerHTML = '<li class="muted">This export has no transcript.</li>'; return Promise.resolve(); }
    return RS.load(t.src, `t/${key}/transcript`).then((c) => {
      $("system-text").textContent = c.system != null ? c.system : c.system_recorded
        ? "(not readable from this provider's recorded request)" : "(no provider call recorded for this trial)";
      const html = [];
      c.entries.forEach((e) => {
        c.slides.filter((s) => s.before === e.n).forEach((s) => html.push(slideHtml(s)));
        html.push(turnHtml(e));
      });
      c.slides.filter((s) => s.before == null).forEach((s) => html.push(slideHtml(s)));
      $("transcript").innerHTML = html.join("") || '<li class="muted">No turns recorded for this trial.</li>';
      $("transcript-count").textContent = `(${c.entries.length} turns, ${c.slides.length} slide(s))`;
      $("transcript").querySelectorAll("li.turn[data-seq]").forEach((li) => {
        const go = () => onTurn(Number(li.dataset.seq));
        li.addEventListener("click", (ev) => { if (!ev.target.closest("a, summary")) go(); });
        li.addEventListener("keydown", (ev) => { if (ev.key === "Enter") go(); });
      });
      $("transcript-search").addEventListener("input", (ev) => filter(ev.target.value));
    });
  }
  function filter(query) {
    const q = query.trim().toLowerCase();
    let shown = 0;
    const turns = $("transcript").querySelectorAll("li.turn");
    turns.forEach((li) => {
      li.hidden = q !== "" && !li.textContent.toLowerCase().includes(q);
      if (!li.hidden) shown++;
    });
    $("transcript").querySelectorAll("li.slide-mark").forEach((li) => (li.hidden = q !== ""));
    const sys = $("system-text").textContent.toLowerCase();
    if (q && sys.includes(q)) $("system-prompt").open = true;
    $("transcript-count").textContent = q ? `(${shown} of ${turns.length} turns match)` : `(${turns.length} turns)`;
  }
  function link(seq) {
    document.querySelectorAll("#transcript li.turn").forEach((li) => li.classList.toggle("linked", li.dataset.seq === String(seq)));
  }
  function show(n) {
    const li = $(`turn-${n}`);
    if (!li) return;
    li.hidden = false;
    li.scrollIntoView({ block: "center" });
    li.focus({ preventScroll: true });
  }
  return { setup, link, show };
};
