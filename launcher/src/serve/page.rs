//! The page `cuprof serve` opens on: an overview and the top kernels (from `/api/summary`), a
//! timeline window of any rank drawn at the screen's width (`/api/window`), the live figures of
//! the on-demand processes refreshed every second (`/api/live`), and a link to the report page.
//! Its script is served from the same origin (its Content-Security-Policy allows no other)
//! and writes names only as text, never as markup.

use axum::http::{header, StatusCode};
use axum::response::Response;

const INDEX: &str = r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'">
<title>cuprof serve</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 20px 28px; color: #222; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 24px 0 8px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 13px; } td, th { padding: 2px 10px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
td:first-child, th:first-child { text-align: left; } .error { color: #c0392b; }
canvas { border: 1px solid #ddd; width: 100%; }
</style></head><body>
<h1>cuprof serve</h1>
<p id="overview">loading…</p><p><a id="report" href="/report">The report page</a></p>
<h2>Live: on-demand processes</h2><div id="live">…</div>
<h2>Top kernels</h2><table id="kernels"></table>
<h2>Timeline window</h2>
<form id="window">rank <select id="rank"></select> from <input id="t0" size="22"> to <input id="t1" size="22"> ns <button>show</button></form>
<p id="window-note"></p><canvas id="timeline" width="1200" height="60"></canvas>
<script src="/app.js"></script>
</body></html>
"#;

const SCRIPT: &str = r##""use strict";
const token = new URLSearchParams(location.search).get("token");
function url(path) {
  const u = new URL(path, location.origin);
  if (token) u.searchParams.set("token", token);
  return u;
}
async function api(path) {
  const r = await fetch(url(path));
  if (!r.ok) throw new Error((await r.text()).trim());
  return r.json();
}
const $ = (id) => document.getElementById(id);
const ms = (ns) => (ns / 1e6).toFixed(3) + " ms";
function rows(table, head, lines) {
  table.replaceChildren();
  for (const [i, cells] of [head, ...lines].entries()) {
    const tr = table.insertRow();
    for (const c of cells) {
      const td = document.createElement(i === 0 ? "th" : "td");
      td.textContent = String(c);
      tr.appendChild(td);
    }
  }
}
async function overview() {
  const [st, s] = await Promise.all([api("/api/status"), api("/api/summary")]);
  const o = $("overview");
  o.textContent = `${st.files} file(s), ${st.ranks.length} rank(s), ${s.steps.count} steps` +
    (st.problem ? ` (not re-read: ${st.problem})` : "");
  o.dataset.files = st.files;
  o.dataset.steps = s.steps.count;
  rows($("kernels"), ["kernel", "count", "total"],
    s.top_kernels.slice(0, 15).map((k) => [k.name, k.count, ms(k.total_ns)]));
  const sel = $("rank");
  sel.replaceChildren();
  for (const r of st.ranks) sel.add(new Option(String(r.rank), String(r.rank)));
  sel.onchange = () => pick(st.ranks[sel.selectedIndex]);
  if (st.ranks.length) { pick(st.ranks[0]); draw(); }
  document.body.dataset.loaded = "yes";
}
function pick(r) {
  $("t0").value = r.start;
  $("t1").value = Math.min(r.end, r.start + 1000000);
}
async function draw() {
  const c = $("timeline");
  const px = c.width;
  const note = $("window-note");
  try {
    const w = await api(`/api/window?rank=${$("rank").value}&t0=${$("t0").value}&t1=${$("t1").value}&px=${px}`);
    const lanes = [...new Set([...w.events, ...w.merged].map((e) => e.lane))].sort();
    c.height = 16 * Math.max(lanes.length, 1) + 4;
    const g = c.getContext("2d");
    g.clearRect(0, 0, c.width, c.height);
    const x = (t) => Math.max(0, (t - w.t0) / w.pixel_ns);
    const colour = { kernel: "#4e79a7", memcpy: "#59a14f", memset: "#b6d7a8", cuda_api: "#f28e2b",
      range: "#8c6bb1", cpu_op: "#b9a98f", module: "#e15759", step: "#999" };
    for (const e of [...w.events, ...w.merged]) {
      g.fillStyle = colour[e.kind] || "#333";
      const y = 2 + 16 * lanes.indexOf(e.lane);
      g.fillRect(x(e.start), y, Math.max(1, x(e.end) - x(e.start)), 13);
    }
    note.textContent = `${w.total} events: ${w.events.length} drawn as themselves, the others in ${w.merged.length} merged marks; lanes: ${lanes.join(", ")}`;
    note.className = "";
  } catch (e) {
    note.textContent = e.message;
    note.className = "error";
  }
}
async function live() {
  try {
    const ps = await api("/api/live");
    const d = $("live");
    if (!ps.length) { d.textContent = "no process runs with cuprof run --on-demand for this user on this host"; return; }
    const t = document.createElement("table");
    rows(t, ["pid", "rank", "name", "state", "step", "GPU busy", "last step", "memory", "top kernel (last second)"],
      ps.map((p) => p.error ? [p.error, "", "", "", "", "", "", "", ""] :
        [p.pid, p.rank, p.name, p.recording ? "recording" : p.state, p.step,
         (100 * p.busy_ns / p.window_ns).toFixed(1) + "%", p.step_last_ns == null ? "-" : ms(p.step_last_ns),
         p.memory_bytes == null ? "-" : (p.memory_bytes / 1048576).toFixed(1) + " MiB",
         p.kernels_last.length ? p.kernels_last[0].name : "-"]));
    d.replaceChildren(t);
  } catch (e) {
    $("live").textContent = e.message;
  }
}
$("report").href = url("/report");
$("window").onsubmit = (ev) => { ev.preventDefault(); draw(); };
overview().catch((e) => { $("overview").textContent = e.message; $("overview").className = "error"; });
live();
setInterval(live, 1000);
"##;

fn page(kind: &'static str, body: &'static str) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, kind)
        .body(body.into())
        .unwrap_or_default()
}

pub fn index() -> Response {
    page("text/html; charset=utf-8", INDEX)
}

pub fn script() -> Response {
    page("text/javascript; charset=utf-8", SCRIPT)
}
