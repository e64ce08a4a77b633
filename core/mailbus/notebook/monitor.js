// The Monitor widget's view: a topic tree with counts, rates and a filter; an inspector
// of the selected topic's latest message (folded JSON, headers, raw) or of a call; a
// chart per watched field and one of rates, with time and value axes and hover values;
// the service calls; pause; and a footer that says what the monitor is doing.
// Drawn with the DOM and SVG only: no CDN, no library, cheap to redraw a few times a second.
const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];
const NS = "http://www.w3.org/2000/svg";
const CSS = `
.mailbus-monitor { font: 12px/1.4 var(--jp-ui-font-family, sans-serif); color: var(--jp-ui-font-color1, #222); }
.mailbus-monitor .mailbus-bar { display: flex; gap: 8px; align-items: center; margin-bottom: 4px; }
.mailbus-monitor .mailbus-state { font-weight: bold; }
.mailbus-monitor .mailbus-state.live { color: #2ca02c; }
.mailbus-monitor .mailbus-state.paused { color: #ff7f0e; }
.mailbus-monitor .mailbus-state.stopped { color: #d62728; }
.mailbus-monitor .mailbus-banner { background: #fdecea; color: #611a15; padding: 4px 8px; margin: 4px 0; }
.mailbus-monitor .mailbus-top { display: flex; gap: 12px; align-items: flex-start; flex-wrap: wrap; }
.mailbus-monitor .mailbus-treebox { flex: 0 0 330px; max-height: 260px; overflow: auto; }
.mailbus-monitor .mailbus-inspector { flex: 1 1 360px; min-width: 300px; }
.mailbus-monitor table { border-collapse: collapse; width: 100%; }
.mailbus-monitor th { text-align: left; border-bottom: 1px solid #ccc; padding: 1px 6px; }
.mailbus-monitor td { padding: 1px 6px; white-space: nowrap; }
.mailbus-monitor td.num, .mailbus-monitor th.num { text-align: right; font-variant-numeric: tabular-nums; }
/* A long topic name is elided (whole on hover), never pushing count and rate out of view. */
.mailbus-monitor table.mailbus-topics { table-layout: fixed; }
.mailbus-monitor table.mailbus-topics th.num { width: 64px; }
.mailbus-monitor table.mailbus-topics td:first-child { overflow: hidden; text-overflow: ellipsis; }
.mailbus-monitor tr.mailbus-topic, .mailbus-monitor tr.mailbus-call, .mailbus-monitor tr.mailbus-group { cursor: pointer; }
.mailbus-monitor tr.selected { background: rgba(31,119,180,0.15); font-weight: bold; }
.mailbus-monitor tr.mailbus-group td { color: #666; }
.mailbus-monitor .mailbus-tabs button { margin-right: 4px; }
.mailbus-monitor .mailbus-tabs button.active { font-weight: bold; }
.mailbus-monitor .mailbus-pane { max-height: 220px; overflow: auto; background: var(--jp-layout-color2, #f6f6f6); padding: 4px 6px; font-family: var(--jp-code-font-family, monospace); white-space: pre-wrap; }
.mailbus-monitor details { margin-left: 12px; }
.mailbus-monitor .jk { color: #7a3e9d; } .mailbus-monitor .jn { color: #1f77b4; } .mailbus-monitor .js { color: #2a7b2a; }
.mailbus-monitor .mailbus-charts { display: flex; flex-wrap: wrap; gap: 12px; margin: 8px 0; }
.mailbus-monitor .mailbus-chart-box { flex: 0 0 auto; width: 460px; min-width: 0; }
/* A long name wraps inside its own chart, never over the chart beside it. */
.mailbus-monitor .mailbus-chart-title, .mailbus-monitor .mailbus-key { overflow-wrap: anywhere; min-width: 0; }
.mailbus-monitor .mailbus-callsbox { max-height: 190px; overflow: auto; }
.mailbus-monitor .mailbus-legend { display: flex; flex-wrap: wrap; gap: 2px 12px; }
.mailbus-monitor .mailbus-key::before { content: "━ "; color: var(--c); }
.mailbus-monitor .mailbus-hover { min-height: 1.4em; color: #444; font-variant-numeric: tabular-nums; }
.mailbus-monitor .mailbus-tick { font-size: 10px; fill: #555; }
.mailbus-monitor .mailbus-status { color: #666; margin-top: 4px; }
.mailbus-monitor .answered { color: #2ca02c; } .mailbus-monitor .pending { color: #ff7f0e; }
`;

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function s(tag, attrs, text) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function num(v) {
  if (v === null || v === undefined || !isFinite(v)) return "–";
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(2);
  return Number(v.toPrecision(4)).toString();
}

// Round values from lo to hi, about n of them; at least the two ends.
function ticks(lo, hi, n) {
  const span = hi - lo || Math.abs(hi) || 1;
  const raw = span / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((x) => x >= raw);
  const first = Math.ceil(lo / step - 1e-9), out = [];
  for (let i = first; i * step <= hi + step * 1e-9 && out.length <= 2 * n; i++) out.push(Number((i * step).toPrecision(12)));
  if (out.length < 2) return [Number(lo.toPrecision(6)), Number(hi.toPrecision(6))];
  return out;
}

// One chart: a legend above (HTML, wraps: names are never cut), the SVG with a value axis,
// a time axis in seconds before now, and the values under the pointer.
// `hovered` maps a chart's title to where the pointer is: the chart is redrawn a few times
// a second, and the values under a still pointer stay shown.
function chart(title, series, windowS, unit, hovered) {
  const box = h("div", "mailbus-chart-box");
  box.appendChild(h("div", "mailbus-chart-title", title));
  const legend = h("div", "mailbus-legend");
  const names = Object.keys(series);
  names.forEach((name, i) => {
    const key = h("span", "mailbus-key", name);
    key.style.setProperty("--c", COLOURS[i % COLOURS.length]);
    legend.appendChild(key);
  });
  box.appendChild(legend);
  const W = 460, H = 170, L = 52, R = 12, T = 8, B = 30;
  const svg = s("svg", { class: "mailbus-chart", viewBox: `0 0 ${W} ${H}`, width: W, height: H });
  const values = Object.values(series).flat().map((p) => p[1]);
  let lo = values.length ? Math.min(...values) : 0, hi = values.length ? Math.max(...values) : 1;
  if (unit === "Hz") lo = Math.min(0, lo);
  if (hi - lo < 1e-12) { lo -= 0.5; hi += 0.5; }
  const yt = ticks(lo, hi, 4);
  lo = Math.min(lo, yt[0]); hi = Math.max(hi, yt[yt.length - 1]);
  const px = (t) => L + ((t + windowS) / windowS) * (W - L - R);
  const py = (v) => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
  for (const v of yt) {
    svg.appendChild(s("line", { x1: L, x2: W - R, y1: py(v), y2: py(v), stroke: "#e3e3e3" }));
    svg.appendChild(s("text", { class: "mailbus-tick mailbus-ytick", x: L - 4, y: py(v) + 3, "text-anchor": "end" }, num(v)));
  }
  for (const t of ticks(-windowS, 0, 6)) {
    svg.appendChild(s("line", { x1: px(t), x2: px(t), y1: H - B, y2: H - B + 4, stroke: "#999" }));
    svg.appendChild(s("text", { class: "mailbus-tick mailbus-xtick", x: px(t), y: H - B + 14, "text-anchor": "middle" }, t === 0 ? "now" : `${num(t)} s`));
  }
  svg.appendChild(s("text", { class: "mailbus-tick mailbus-axis-label", x: (L + W - R) / 2, y: H - 2, "text-anchor": "middle" }, "seconds before now"));
  if (unit) svg.appendChild(s("text", { class: "mailbus-tick mailbus-unit", x: 2, y: T + 8 }, unit));
  svg.appendChild(s("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "none", stroke: "#999" }));
  names.forEach((name, i) => {
    svg.appendChild(s("polyline", {
      class: "mailbus-series", "data-series": name, fill: "none", stroke: COLOURS[i % COLOURS.length], "stroke-width": 1.5,
      points: series[name].map(([t, v]) => `${px(t).toFixed(1)},${py(v).toFixed(1)}`).join(" "),
    }));
  });
  const cursor = s("line", { y1: T, y2: H - B, stroke: "#444", "stroke-dasharray": "3,3", visibility: "hidden" });
  svg.appendChild(cursor);
  const hover = h("div", "mailbus-hover", "");
  const overlay = s("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "transparent" });
  function show(x) {
    const t = ((x - L) / (W - L - R)) * windowS - windowS;
    cursor.setAttribute("x1", x); cursor.setAttribute("x2", x); cursor.setAttribute("visibility", "visible");
    const parts = names.map((name) => {
      const before = series[name].filter((p) => p[0] <= t);
      const p = before[before.length - 1];
      return `${name} = ${p ? num(p[1]) : "–"}${unit ? " " + unit : ""}`;
    });
    hover.textContent = `${num(t)} s: ${parts.join(" · ")}`;
  }
  overlay.addEventListener("mousemove", (event) => {
    const r = svg.getBoundingClientRect();
    hovered.set(title, ((event.clientX - r.left) / r.width) * W);
    show(hovered.get(title));
  });
  overlay.addEventListener("mouseleave", () => {
    hovered.delete(title); cursor.setAttribute("visibility", "hidden"); hover.textContent = "";
  });
  if (hovered.has(title)) show(hovered.get(title));
  svg.appendChild(overlay);
  box.append(svg, hover);
  return box;
}

// JSON folded: objects and lists are <details>, open to the first level; what the user
// opened or closed stays so while the same message is shown.
function jsonNode(value, key, path, open) {
  const label = key === null ? "" : `${key}: `;
  if (value !== null && typeof value === "object") {
    const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
    const details = h("details");
    details.open = open.has(path) ? open.get(path) : path.split("/").length <= 2;
    details.addEventListener("toggle", () => open.set(path, details.open));
    const summary = h("summary");
    summary.append(h("span", "jk", label), h("span", "", Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`));
    details.appendChild(summary);
    for (const [k, v] of entries) details.appendChild(jsonNode(v, k, `${path}/${k}`, open));
    return details;
  }
  const line = h("div");
  line.append(h("span", "jk", label), h("span", typeof value === "string" ? "js" : "jn", JSON.stringify(value)));
  return line;
}

function render({ model, el }) {
  el.classList.add("mailbus-monitor");
  const style = h("style"); style.textContent = CSS;
  const bar = h("div", "mailbus-bar");
  const state = h("span", "mailbus-state");
  const pause = h("button", "mailbus-pause");
  const filter = h("input", "mailbus-filter");
  filter.placeholder = "filter topics";
  bar.append(state, pause, filter);
  const banner = h("div", "mailbus-banner");
  const top = h("div", "mailbus-top");
  const treeBox = h("div", "mailbus-treebox");
  const tree = h("table", "mailbus-topics");
  treeBox.appendChild(tree);
  const inspector = h("div", "mailbus-inspector");
  const title = h("div", "mailbus-inspector-title");
  const tabs = h("div", "mailbus-tabs");
  const pane = h("div", "mailbus-pane mailbus-latest");
  inspector.append(title, tabs, pane);
  top.append(treeBox, inspector);
  const charts = h("div", "mailbus-charts");
  const callsTitle = h("div", "mailbus-calls-title");
  const calls = h("table", "mailbus-calls");
  const callsBox = h("div", "mailbus-callsbox");
  callsBox.appendChild(calls);
  const status = h("div", "mailbus-status");
  el.append(style, bar, banner, top, charts, callsTitle, callsBox, status);

  const collapsed = new Set();
  const folds = new Map();
  const hovered = new Map();
  let tab = "json", shownKey = "", call = "", received = "", pausedAt = "", pausedSeen = 0;

  // Rows are redrawn a few times a second: a press is taken on mousedown, on the table,
  // so that a redraw between the press and the release never loses it.
  tree.addEventListener("mousedown", (event) => {
    const row = event.target.closest("tr");
    if (!row) return;
    if (row.dataset.group) {
      const g = row.dataset.group;
      collapsed.has(g) ? collapsed.delete(g) : collapsed.add(g);
      drawTree(model.get("snapshot") || {});
    } else if (row.dataset.topic) {
      call = "";
      model.set("selected", row.dataset.topic);
      model.save_changes();
      shownKey = "";
      draw();
    }
  });
  calls.addEventListener("mousedown", (event) => {
    const row = event.target.closest("tr");
    if (row && row.dataset.request) { call = row.dataset.request; shownKey = ""; draw(); }
  });
  pause.onclick = () => { model.set("paused", !model.get("paused")); model.save_changes(); };
  filter.oninput = () => drawTree(model.get("snapshot") || {});
  for (const name of ["json", "headers", "raw"]) {
    const button = h("button", "mailbus-tab", name === "json" ? "JSON" : name[0].toUpperCase() + name.slice(1));
    button.dataset.tab = name;
    button.onclick = () => { tab = name; shownKey = ""; drawInspector(model.get("snapshot") || {}); };
    tabs.appendChild(button);
  }

  function drawTree(snap) {
    const stopped = model.get("state") === "stopped";
    const wanted = filter.value.trim().toLowerCase();
    const topics = (snap.topics || []).filter((t) => !wanted || t.topic.toLowerCase().includes(wanted));
    const groups = new Map();
    for (const t of topics) {
      const parts = t.topic.split("/");
      for (let i = 1; i < parts.length; i++) {
        const g = parts.slice(0, i).join("/");
        const sum = groups.get(g) || { count: 0, rate: 0, rated: false };
        sum.count += t.count;
        if (t.rate_hz !== null) { sum.rate += t.rate_hz; sum.rated = true; }
        groups.set(g, sum);
      }
    }
    tree.replaceChildren();
    const head = tree.insertRow();
    for (const [name, cls] of [["topic", ""], ["count", "num"], ["rate (Hz)", "num"]]) head.appendChild(h("th", cls, name));
    const made = new Set();
    for (const t of topics) {
      const parts = t.topic.split("/");
      let hidden = false;
      for (let i = 1; i < parts.length && !hidden; i++) {
        const g = parts.slice(0, i).join("/");
        if (!made.has(g)) {
          made.add(g);
          const sum = groups.get(g);
          const row = tree.insertRow();
          row.className = "mailbus-group";
          row.dataset.group = g;
          row.insertCell().textContent = `${"  ".repeat(i - 1)}${collapsed.has(g) ? "▸" : "▾"} ${parts[i - 1]}/`;
          row.cells[0].title = `${g}/`;
          row.insertCell().textContent = sum.count;
          row.insertCell().textContent = stopped || !sum.rated ? "–" : sum.rate.toFixed(1);
          row.cells[1].className = row.cells[2].className = "num";
        }
        hidden = collapsed.has(g);
      }
      if (hidden) continue;
      const row = tree.insertRow();
      row.className = "mailbus-topic" + (t.topic === model.get("selected") && !call ? " selected" : "");
      row.dataset.topic = t.topic;
      const name = row.insertCell();
      name.className = "mailbus-name";
      name.textContent = `${"  ".repeat(parts.length - 1)}${parts[parts.length - 1]}`;
      name.title = t.topic;
      const count = row.insertCell(); count.className = "num mailbus-count"; count.textContent = t.count;
      const rate = row.insertCell(); rate.className = "num mailbus-rate";
      rate.textContent = stopped || t.rate_hz === null ? "–" : t.rate_hz.toFixed(1);
      if (t.rate_hz === null) rate.title = "measured once the monitor has watched for a second";
    }
    if (topics.length === 0) {
      const row = tree.insertRow();
      row.insertCell().textContent = wanted ? `no topic matches "${filter.value}"` : "no message yet";
    }
  }

  function drawInspector(snap) {
    for (const b of tabs.children) b.classList.toggle("active", b.dataset.tab === tab);
    const chosen = call && (snap.calls || []).find((c) => c.request_id === call);
    if (chosen) {
      tabs.style.display = "none";
      title.textContent = `${chosen.service} call #${chosen.sequence_number}: ${chosen.status}` +
        (chosen.latency_ms !== null ? ` in ${num(chosen.latency_ms)} ms` : "");
      const key = `call:${call}:${chosen.status}`;
      if (key === shownKey) return;
      shownKey = key;
      pane.textContent = `request   Message-ID  ${chosen.request_id}\n${chosen.request}\n\n` +
        (chosen.response === null ? "no response yet" :
          `response  In-Reply-To ${chosen.request_id}\n          Message-ID  ${chosen.response_id}\n${chosen.response}`);
      return;
    }
    tabs.style.display = "";
    const selected = model.get("selected");
    const message = snap.selected === selected ? snap.message : null;  // else: on its way
    if (!selected || !message) {
      title.textContent = selected ? `${selected}: no message yet` : "click a topic to inspect its latest message";
      pane.textContent = ""; shownKey = "";
      return;
    }
    title.textContent = `${selected} #${message.sequence_number} · ${num(message.age_s)} s ago · ${message.message_id}`;
    const key = `${tab}:${message.message_id}`;
    if (key === shownKey) return;  // the same message: keep the folds and the scroll
    shownKey = key;
    pane.replaceChildren();
    if (tab === "json") {
      let doc, ok = true;
      try { doc = JSON.parse(message.body); } catch (e) { ok = false; }
      if (ok) pane.appendChild(jsonNode(doc, null, "", folds));
      else pane.textContent = message.body;
    } else if (tab === "headers") {
      const table = h("table", "mailbus-headers");
      for (const [name, value] of message.headers) {
        const row = table.insertRow();
        row.insertCell().textContent = name;
        row.insertCell().textContent = value;
      }
      if (message.headers.length === 0) pane.textContent = "no headers (the in-process transport carries none)";
      else pane.appendChild(table);
    } else {
      pane.textContent = message.raw === null
        ? "no raw bytes: on the in-process transport nothing is serialised"
        : message.raw + (message.raw_cut ? "\n… (cut at 8 KiB)" : "");
    }
  }

  function drawCharts(snap) {
    charts.replaceChildren();
    const windowS = snap.window_s || 30;
    for (const [name, points] of Object.entries(snap.fields || {})) charts.appendChild(chart(name, { [name]: points }, windowS, "", hovered));
    const rates = snap.rates || {};
    const selected = model.get("selected");
    let shown = selected && rates[selected] ? [selected] : [];
    if (!shown.length) {
      shown = (snap.topics || []).slice().sort((a, b) => (b.rate_hz || 0) - (a.rate_hz || 0)).slice(0, 4).map((t) => t.topic);
    }
    const series = {};
    for (const name of shown) if (rates[name]) series[name] = rates[name];
    if (Object.keys(series).length) charts.appendChild(chart("messages per second", series, windowS, "Hz", hovered));
  }

  function drawCalls(snap) {
    const rows = snap.calls || [];
    callsTitle.textContent = `Service calls (${snap.call_count || 0}; newest ${rows.length} shown, click one to see its request and response)`;
    calls.replaceChildren();
    const head = calls.insertRow();
    for (const [name, cls] of [["service", ""], ["#", "num"], ["status", ""], ["latency (ms)", "num"], ["request → response", ""]]) head.appendChild(h("th", cls, name));
    for (const c of rows) {
      const row = calls.insertRow();
      row.className = "mailbus-call" + (c.request_id === call ? " selected" : "");
      row.dataset.request = c.request_id;
      row.insertCell().textContent = c.service;
      const seq = row.insertCell(); seq.className = "num"; seq.textContent = c.sequence_number;
      const st = row.insertCell(); st.className = `mailbus-call-status ${c.status}`; st.textContent = c.status;
      const lat = row.insertCell(); lat.className = "num mailbus-latency"; lat.textContent = num(c.latency_ms);
      row.insertCell().textContent = c.response_id ? `${c.request_id} → ${c.response_id}` : `${c.request_id} → …`;
    }
  }

  function drawStatus(snap) {
    const st = model.get("state");
    state.className = `mailbus-state ${st}`;
    state.textContent = { live: "● live", paused: "❚❚ paused", stopped: "■ stopped" }[st] || st;
    pause.textContent = model.get("paused") ? "Resume" : "Pause";
    pause.disabled = st === "stopped";
    const seen = model.get("seen") || snap.seen || 0;
    banner.style.display = st === "stopped" ? "" : "none";
    banner.textContent = `This monitor stopped at ${model.get("stopped_at")} (monitor.stop(), the cell run again or the kernel's exit): the counts are final and nothing is live.`;
    const topics = (snap.topics || []).length;
    if (st === "paused") {
      if (!pausedAt) { pausedAt = new Date().toLocaleTimeString(); pausedSeen = snap.seen || 0; }
      status.textContent = `paused at ${pausedAt}: ${Math.max(0, seen - pausedSeen)} events arrived since, counted and shown on resume`;
    } else if (st === "stopped") {
      status.textContent = `stopped: ${seen} events seen on ${topics} topics, ${snap.call_count || 0} calls`;
    } else {
      pausedAt = "";
      status.textContent = `live: ${seen} events seen on ${topics} topics, ${snap.call_count || 0} calls` +
        ` · rates over the last ${num(Math.min(snap.window_s || 30, snap.watched_s || 0))} s` +
        ` · updated ${received} (at most ${num(model.get("update_hz"))} times a second)` +
        (snap.ignored_topics ? ` · ${snap.ignored_topics} messages on topics past the limit not shown` : "");
    }
  }

  function draw() {
    const snap = model.get("snapshot") || {};
    drawTree(snap); drawInspector(snap); drawCharts(snap); drawCalls(snap); drawStatus(snap);
  }
  model.on("change:snapshot", () => { received = new Date().toLocaleTimeString(); draw(); });
  model.on("change:selected", () => { shownKey = ""; draw(); });
  model.on("change:state", draw);
  model.on("change:paused", () => drawStatus(model.get("snapshot") || {}));
  model.on("change:seen", () => drawStatus(model.get("snapshot") || {}));
  draw();
}

export default { render };
