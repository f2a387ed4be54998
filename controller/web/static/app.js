// labtap capture view: projects → links → a live, decoded packet list.
// Everything comes from the controller's /v2 API; rows are decoded on the
// server and arrive as Server-Sent Events (read with fetch, so errors keep
// their JSON message).
"use strict";

const MAX_ROWS = 10000;      // rows kept in the list; older ones are removed
const MAX_PENDING = 50000;   // rows held while paused
const $ = (id) => document.getElementById(id);

const state = {
  projects: [],          // [{project, links: [{link, name}]}]
  current: null,         // {projectId, linkId}
  link: null,            // the current link, as the API returned it
  feed: null,            // AbortController of the running feed
  paused: false,
  pending: [],
  shown: 0, received: 0, removed: 0, dropped: 0,
  rowsById: new Map(),
  selected: null,
  filter: "",
};

async function api(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) { init.body = JSON.stringify(body); init.headers["Content-Type"] = "application/json"; }
  const r = await fetch(path, init);
  if (!r.ok) {
    let msg = r.status + " " + r.statusText;
    try { msg = (await r.json()).message || msg; } catch (e) { /* not JSON */ }
    throw new Error(msg);
  }
  return r.status === 204 ? null : r.json();
}

// linkName names a link after its ends, "PC1 e0 ↔ PC2 e0".
function linkName(link, nodes) {
  const ends = (link.nodes || []).map((e) => {
    const n = nodes.get(e.node_id);
    if (!n) return "?";
    const port = (n.ports || []).find((p) => p.adapter_number === e.adapter_number && p.port_number === e.port_number);
    return n.name + " " + (port ? port.short_name : e.adapter_number + "/" + e.port_number);
  });
  return ends.join(" ↔ ");
}

async function loadTree() {
  const projects = await api("GET", "/v2/projects");
  projects.sort((a, b) => a.name.localeCompare(b.name));
  const out = [];
  for (const p of projects) {
    const entry = { project: p, links: [] };
    try { // every capture file of the project, running or stopped, on any compute
      entry.files = await api("GET", `/v2/projects/${p.project_id}/captures`);
    } catch (e) { entry.files = []; }
    if (p.status === "opened") {
      try {
        const [links, nodes] = await Promise.all([
          api("GET", `/v2/projects/${p.project_id}/links`), api("GET", `/v2/projects/${p.project_id}/nodes`)]);
        const byId = new Map(nodes.map((n) => [n.node_id, n]));
        entry.links = links.map((l) => ({ link: l, name: linkName(l, byId) }))
          .sort((a, b) => a.name.localeCompare(b.name));
      } catch (e) { /* closed meanwhile */ }
    }
    out.push(entry);
  }
  state.projects = out;
  renderTree();
}

function renderTree() {
  const nav = $("tree");
  nav.textContent = "";
  const h = document.createElement("h3");
  h.textContent = "Projects";
  nav.append(h);
  if (state.projects.length === 0) {
    const d = document.createElement("div");
    d.className = "muted pad";
    d.textContent = "No project yet.";
    nav.append(d);
  }
  for (const { project, links, files } of state.projects) {
    const d = document.createElement("div");
    d.className = "project" + (project.status === "opened" ? "" : " closed");
    d.textContent = project.name + (project.status === "opened" ? "" : " (closed)");
    if (project.status === "opened") d.prepend(wiresharkLink(project.project_id, "", "every link of " + project.name));
    nav.append(d);
    for (const { link, name } of links) {
      nav.append(wiresharkLink(project.project_id, link.link_id, name));
      const a = document.createElement("a");
      a.className = "link" + (link.capturing ? " capturing" : "");
      if (state.current && state.current.linkId === link.link_id) a.classList.add("current");
      a.href = viewPath(project.project_id, link.link_id);
      a.title = (link.capturing ? "capturing to " + (link.capture_file_name || "") : "not capturing") + " · " + link.link_id;
      const dot = document.createElement("span");
      dot.className = "dot";
      a.append(dot, document.createTextNode(name));
      a.addEventListener("click", (ev) => {
        ev.preventDefault();
        history.pushState(null, "", a.href);
        select(project.project_id, link.link_id);
      });
      nav.append(a);
    }
    for (const f of files || []) {
      const a = document.createElement("a");
      a.className = "file" + (f.running ? " capturing" : "");
      const href = fileViewPath(project.project_id, f.compute_id, f.file_name);
      if (location.pathname === href) a.classList.add("current");
      a.href = href;
      a.title = `${f.records} packets, ${f.size} bytes on ${f.compute_id}` + (f.running ? " (being written)" : "") +
        (f.dropped ? `, ${f.dropped} dropped` : "");
      const dot = document.createElement("span");
      dot.className = "dot";
      a.append(dot, document.createTextNode("📄 " + f.file_name));
      a.addEventListener("click", (ev) => {
        ev.preventDefault();
        history.pushState(null, "", a.href);
        selectFile(project.project_id, f.compute_id, f.file_name);
      });
      nav.append(a);
    }
  }
}

const fileViewPath = (p, c, f) => `/v2/projects/${p}/captures/${encodeURIComponent(c)}/${encodeURIComponent(f)}/view`;

// selectFile shows one capture file of a project (GET .../captures), running
// or stopped, decoded to its end as it is now.
async function selectFile(projectId, computeId, fileName) {
  stopFeed();
  clearRows();
  const base = `/v2/projects/${projectId}/captures/${encodeURIComponent(computeId)}/${encodeURIComponent(fileName)}`;
  state.current = { projectId, file: { computeId, fileName }, feedPath: base + "/packets" };
  state.link = null;
  renderTree();
  const e = state.projects.find((x) => x.project.project_id === projectId);
  $("crumbs").textContent = (e ? e.project.name + " › " : "") + fileName + " (" + computeId + ")";
  $("empty").style.display = "none";
  $("pause").disabled = false;
  $("clear").disabled = false;
  $("capture").disabled = true;
  const dl = $("download"), live = $("live");
  dl.href = base;
  dl.setAttribute("download", "");
  dl.classList.remove("disabled");
  live.removeAttribute("href");
  live.classList.add("disabled");
  startFeed();
}

const viewPath = (p, l) => `/v2/projects/${p}/links/${l}/view`;

// wiresharkURL opens a link (or, with linkId "", the whole project) in
// Wireshark through labtap-extcap's URL handler (docs/captures.md,
// "Wireshark in one click"): this server, its port always written out.
function wiresharkURL(projectId, linkId) {
  const https = location.protocol === "https:";
  const host = location.port ? location.host : `${location.host}:${https ? 443 : 80}`;
  const q = new URLSearchParams({ project_id: projectId });
  if (linkId) q.set("link_id", linkId);
  if (https) q.set("protocol", "https");
  return `labtap://${host}?${q}`;
}

function wiresharkLink(projectId, linkId, what) {
  const a = document.createElement("a");
  a.className = "ws";
  a.href = wiresharkURL(projectId, linkId);
  a.textContent = "Wireshark";
  a.title = "Open " + what + " in Wireshark (labtap-extcap's URL handler)";
  return a;
}

function findLink(projectId, linkId) {
  for (const e of state.projects) {
    if (e.project.project_id !== projectId) continue;
    for (const l of e.links) if (l.link.link_id === linkId) return { project: e.project, ...l };
  }
  return null;
}

function setStatus(text, cls) {
  const s = $("status");
  s.textContent = text;
  s.className = "status " + (cls || "");
}

function message(text) { $("message").textContent = text || ""; }

function counts() {
  let t = `Packets: ${state.received} · Displayed: ${state.shown}`;
  if (state.removed) t += ` · ${state.removed} older rows removed from the list`;
  if (state.paused) t += ` · ${state.pending.length} waiting (paused)`;
  if (state.dropped) t += ` · ${state.dropped} not kept while paused`;
  $("counts").textContent = t;
}

function clearRows() {
  $("rows").textContent = "";
  $("tree-details").textContent = "";
  $("bytes").textContent = "";
  state.rowsById.clear();
  state.selected = null;
  state.pending = [];
  state.shown = state.received = state.removed = state.dropped = 0;
  counts();
}

// follow listens to a project's notifications while one of its links is
// shown: the list follows captures started or stopped elsewhere (the GNS3
// GUI, a script). It listens passively: the page is no client of the
// project, so leaving it never auto-closes the project (which would stop
// every node), and it does not keep one opened after the GNS3 clients left.
let ws = null, wsProject = null;
function follow(projectId) {
  if (wsProject === projectId) return;
  if (ws) ws.close();
  wsProject = projectId;
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const sock = new WebSocket(`${scheme}//${location.host}/v2/projects/${projectId}/notifications/ws?passive=true`);
  ws = sock;
  sock.onmessage = (ev) => {
    let m;
    try { m = JSON.parse(ev.data); } catch (e) { return; }
    if (!m.action || !m.action.startsWith("link.")) return;
    loadTree().catch(() => {});
    const c = state.current;
    if (m.action === "link.updated" && c && m.event && m.event.link_id === c.linkId) {
      const was = state.link && state.link.capturing;
      state.link = m.event;
      updateLinkControls();
      if (m.event.capturing && !was && !state.feed) { clearRows(); startFeed(); }
    }
  };
  sock.onclose = () => {
    if (ws !== sock) return;
    ws = null;
    wsProject = null;
    setTimeout(() => { if (state.current && state.current.projectId === projectId) follow(projectId); }, 2000);
  };
}

async function select(projectId, linkId) {
  stopFeed();
  clearRows();
  state.current = { projectId, linkId, feedPath: `/v2/projects/${projectId}/links/${linkId}/packets` };
  follow(projectId);
  renderTree();
  let l = findLink(projectId, linkId);
  try {
    state.link = await api("GET", `/v2/projects/${projectId}/links/${linkId}`);
  } catch (e) {
    state.link = null;
    setStatus("unknown link", "stopped");
    message(e.message);
    return;
  }
  $("crumbs").textContent = (l ? l.project.name + " › " + l.name : linkId);
  $("empty").style.display = "none";
  $("pause").disabled = false;
  $("clear").disabled = false;
  $("capture").disabled = false;
  updateLinkControls();
  if (state.link.capturing || state.link.capture_file_name) startFeed(); // a stopped capture: its last file
  else { setStatus("not capturing", "stopped"); message("This link is not capturing: start a capture to see its packets."); }
}

function updateLinkControls() {
  const l = state.link, c = state.current;
  $("capture").textContent = l && l.capturing ? "Stop capture" : "Start capture";
  // Wireshark's extcap starts the capture when it does not run.
  if (c) { $("wireshark").href = wiresharkURL(c.projectId, c.linkId); $("wireshark").classList.remove("disabled"); }
  const dl = $("download"), live = $("live");
  if (c && c.file) return; // a file's view: its own download link
  if (l && !l.capturing && l.capture_file_name) {
    // A stopped capture: its last file, whole.
    dl.href = `/v2/projects/${c.projectId}/links/${c.linkId}/capture_file`;
    dl.setAttribute("download", "");
    dl.classList.remove("disabled");
    live.removeAttribute("href");
    live.classList.add("disabled");
  } else if (l && l.capturing) {
    const base = `/v2/projects/${c.projectId}/links/${c.linkId}`;
    // A snapshot of the file; its name comes with it (Content-Disposition).
    dl.href = `${base}/capture_file`;
    dl.setAttribute("download", "");
    live.href = `${base}/pcap`;
    live.setAttribute("download", (l.capture_file_name || "capture.pcap").replace(/(\.pcap(ng)?)$/, "-live$1"));
    dl.classList.remove("disabled");
    live.classList.remove("disabled");
  } else {
    for (const a of [dl, live]) {
      a.removeAttribute("href");
      a.classList.add("disabled");
    }
  }
}

function stopFeed() {
  if (state.feed) state.feed.abort();
  state.feed = null;
}

async function startFeed() {
  stopFeed();
  const c = state.current, ctl = new AbortController();
  state.feed = ctl;
  const q = state.filter ? "?filter=" + encodeURIComponent(state.filter) : "";
  let resp;
  try {
    resp = await fetch(c.feedPath + q, { signal: ctl.signal });
  } catch (e) {
    if (!ctl.signal.aborted) { setStatus("disconnected", "stopped"); message(e.message); }
    return;
  }
  if (!resp.ok) {
    let msg = resp.status + "";
    try { msg = (await resp.json()).message; } catch (e) { /* keep the status */ }
    if (resp.status === 400) $("filter").className = "invalid";
    setStatus("stopped", "stopped");
    message(msg);
    return;
  }
  setStatus(state.paused ? "paused" : "live", state.paused ? "paused" : "live");
  const reader = resp.body.getReader(), dec = new TextDecoder();
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        handleEvent(buf.slice(0, i));
        buf = buf.slice(i + 2);
      }
    }
  } catch (e) {
    if (ctl.signal.aborted) return;
    message(e.message);
  }
  if (state.feed === ctl) {
    state.feed = null;
    setStatus("stopped", "stopped");
    refreshLink();
  }
}

function handleEvent(text) {
  let event = "message", data = "";
  for (const line of text.split("\n")) {
    if (line.startsWith("event: ")) event = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
  }
  if (!data) return;
  const v = JSON.parse(data);
  switch (event) {
    case "info":
      $("filter").className = state.filter ? "valid" : "";
      message(`${v.format}, ${v.link_type}, decoded by ${v.decoder || "gopacket"}` + (v.filter ? `, filter: ${v.filter}` : ""));
      break;
    case "rows":
      state.received += v.length;
      if (state.paused) {
        for (const r of v) state.pending.push(r);
        if (state.pending.length > MAX_PENDING) {
          state.dropped += state.pending.length - MAX_PENDING;
          state.pending.splice(0, state.pending.length - MAX_PENDING);
        }
      } else addRows(v);
      counts();
      break;
    case "end":
      message(v.reason);
      break;
  }
}

const fmtTime = (t) => t.toFixed(6);
const protoClass = (p) => "p-" + p.toLowerCase().replace(/[^a-z0-9]+/g, "-");

function addRows(rows) {
  const pane = $("listpane");
  const atBottom = pane.scrollTop + pane.clientHeight >= pane.scrollHeight - 4;
  const tbody = $("rows"), frag = document.createDocumentFragment();
  let sender = false;
  for (const r of rows) {
    const tr = document.createElement("tr");
    tr.className = protoClass(r.proto);
    if (r.proto === "TCP" && / \[[^\]]*RST/.test(r.info)) tr.classList.add("rst");
    if (r.proto === "?") tr.className = "p-bad";
    tr.dataset.no = r.no;
    for (const [cls, text] of [["no", r.no], ["time", fmtTime(r.time)], ["iface", r.iface || ""], ["src", r.src],
      ["dst", r.dst], ["proto", r.proto], ["len", r.len], ["info", r.info]]) {
      const td = document.createElement("td");
      td.className = cls;
      td.textContent = text;
      tr.append(td);
    }
    if (r.iface) sender = true;
    state.rowsById.set(String(r.no), r);
    frag.append(tr);
  }
  tbody.append(frag);
  state.shown += rows.length;
  if (sender) $("packets").classList.remove("nosender");
  while (tbody.rows.length > MAX_ROWS) {
    state.rowsById.delete(tbody.rows[0].dataset.no);
    tbody.rows[0].remove();
    state.removed++;
    state.shown--;
  }
  if (atBottom) pane.scrollTop = pane.scrollHeight;
}

function showRow(tr) {
  if (state.selected) state.selected.classList.remove("selected");
  state.selected = tr;
  tr.classList.add("selected");
  const r = state.rowsById.get(tr.dataset.no);
  if (!r) return;
  const ul = $("tree-details");
  ul.textContent = "";
  const frame = document.createElement("li");
  frame.innerHTML = "<b></b> ";
  frame.firstChild.textContent = `Frame ${r.no}:`;
  frame.append(`${r.len} bytes on wire, captured ${new Date(r.abs / 1000).toISOString()}` + (r.iface ? `, from ${r.iface}` : ""));
  ul.append(frame);
  for (const l of r.layers || []) {
    const li = document.createElement("li");
    const b = document.createElement("b");
    b.textContent = l.name + (l.summary ? ", " : "");
    li.append(b, l.summary || "");
    ul.append(li);
  }
  $("bytes").textContent = hexDump(r.hex, r.len);
}

function hexDump(hex, total) {
  const bytes = [];
  for (let i = 0; i < hex.length; i += 2) bytes.push(parseInt(hex.slice(i, i + 2), 16));
  const lines = [];
  for (let off = 0; off < bytes.length; off += 16) {
    const chunk = bytes.slice(off, off + 16);
    const h = chunk.map((b) => b.toString(16).padStart(2, "0"));
    const hx = (h.slice(0, 8).join(" ") + "  " + h.slice(8).join(" ")).padEnd(49);
    const asc = chunk.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(off.toString(16).padStart(4, "0") + "  " + hx + "  " + asc);
  }
  if (total > bytes.length) lines.push(`… ${total - bytes.length} more bytes not shown`);
  return lines.join("\n");
}

async function refreshLink() {
  const c = state.current;
  if (!c) return;
  if (c.file) { loadTree().catch(() => {}); return; }
  try {
    state.link = await api("GET", `/v2/projects/${c.projectId}/links/${c.linkId}`);
    updateLinkControls();
  } catch (e) { /* gone */ }
  loadTree().catch(() => {});
}

$("rows").addEventListener("click", (ev) => {
  const tr = ev.target.closest("tr");
  if (tr) showRow(tr);
});

$("pause").addEventListener("click", () => {
  state.paused = !state.paused;
  $("pause").textContent = state.paused ? "Resume" : "Pause";
  if (!state.paused && state.pending.length) {
    const p = state.pending;
    state.pending = [];
    for (let i = 0; i < p.length; i += 1000) addRows(p.slice(i, i + 1000));
  }
  if (state.feed) setStatus(state.paused ? "paused" : "live", state.paused ? "paused" : "live");
  counts();
});

$("clear").addEventListener("click", () => {
  $("rows").textContent = "";
  state.rowsById.clear();
  state.shown = 0;
  counts();
});

$("filterform").addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.filter = $("filter").value.trim();
  $("filter").className = "";
  if (!state.current || !(state.current.file || state.link && (state.link.capturing || state.link.capture_file_name))) return;
  clearRows();
  startFeed();
});

$("capture").addEventListener("click", async () => {
  const c = state.current;
  if (!c) return;
  $("capture").disabled = true;
  try {
    if (state.link && state.link.capturing) {
      await api("POST", `/v2/projects/${c.projectId}/links/${c.linkId}/stop_capture`);
    } else {
      state.link = await api("POST", `/v2/projects/${c.projectId}/links/${c.linkId}/start_capture`, {});
      clearRows();
      startFeed();
    }
  } catch (e) { message(e.message); }
  $("capture").disabled = false;
  refreshLink();
});

window.addEventListener("popstate", route);

function route() {
  const m = location.pathname.match(/^\/v2\/projects\/([^/]+)\/links\/([^/]+)\/view$/);
  if (m) select(m[1], m[2]);
  const f = location.pathname.match(/^\/v2\/projects\/([^/]+)\/captures\/([^/]+)\/([^/]+)\/view$/);
  if (f) selectFile(f[1], decodeURIComponent(f[2]), decodeURIComponent(f[3]));
}

const q = new URLSearchParams(location.search);
if (q.get("filter")) { state.filter = q.get("filter"); $("filter").value = state.filter; }
$("packets").classList.add("nosender");
counts();
loadTree().then(route).catch((e) => message(e.message));
setInterval(() => { loadTree().catch(() => {}); }, 5000);
