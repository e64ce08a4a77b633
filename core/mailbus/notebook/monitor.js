// The Monitor widget's view: a topic table (click to select), the selected topic's
// latest message and an SVG line chart of its rate and of the watched fields.
const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];
const NS = "http://www.w3.org/2000/svg";

function chart(series, windowS) {
  const w = 520, h = 180, left = 44, top = 8, bottom = 22;
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("class", "mailbus-chart");
  svg.setAttribute("width", w);
  svg.setAttribute("height", h);
  const values = Object.values(series).flat().map((p) => p[1]);
  const lo = Math.min(0, ...values), hi = Math.max(1e-9, ...values);
  const px = (t) => left + ((t + windowS) / windowS) * (w - left - 120);
  const py = (v) => top + (1 - (v - lo) / (hi - lo || 1)) * (h - top - bottom);
  const frame = document.createElementNS(NS, "rect");
  Object.entries({ x: left, y: top, width: w - left - 120, height: h - top - bottom,
    fill: "none", stroke: "#999" }).forEach(([k, v]) => frame.setAttribute(k, v));
  svg.appendChild(frame);
  for (const [text, y] of [[hi.toPrecision(3), top + 8], [lo.toPrecision(3), h - bottom]]) {
    const label = document.createElementNS(NS, "text");
    label.setAttribute("x", 2); label.setAttribute("y", y); label.setAttribute("font-size", 10);
    label.textContent = text;
    svg.appendChild(label);
  }
  Object.entries(series).forEach(([name, points], i) => {
    const line = document.createElementNS(NS, "polyline");
    line.setAttribute("class", "mailbus-series");
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", COLOURS[i % COLOURS.length]);
    line.setAttribute("points", points.map(([t, v]) => `${px(t).toFixed(1)},${py(v).toFixed(1)}`).join(" "));
    svg.appendChild(line);
    const key = document.createElementNS(NS, "text");
    key.setAttribute("x", w - 112); key.setAttribute("y", top + 12 + 14 * i);
    key.setAttribute("font-size", 11); key.setAttribute("fill", COLOURS[i % COLOURS.length]);
    key.textContent = name;
    svg.appendChild(key);
  });
  return svg;
}

function render({ model, el }) {
  el.classList.add("mailbus-monitor");
  const table = document.createElement("table");
  table.className = "mailbus-topics";
  const latest = document.createElement("pre");
  latest.className = "mailbus-latest";
  latest.style.maxHeight = "8em";
  latest.style.overflow = "auto";
  const plot = document.createElement("div");
  const status = document.createElement("div");
  status.className = "mailbus-status";
  el.append(table, latest, plot, status);

  function draw() {
    const snap = model.get("snapshot") || {};
    const selected = model.get("selected");
    table.replaceChildren();
    const head = table.insertRow();
    for (const name of ["topic", "count", "rate (Hz)"]) {
      const th = document.createElement("th");
      th.textContent = name;
      head.appendChild(th);
    }
    for (const topic of snap.topics || []) {
      const row = table.insertRow();
      row.className = "mailbus-topic";
      row.dataset.topic = topic.topic;
      row.style.cursor = "pointer";
      if (topic.topic === selected) row.style.fontWeight = "bold";
      row.insertCell().textContent = topic.topic;
      const count = row.insertCell();
      count.className = "mailbus-count";
      count.textContent = topic.count;
      row.insertCell().textContent = topic.rate_hz.toFixed(1);
      row.onclick = () => { model.set("selected", topic.topic); model.save_changes(); };
    }
    latest.textContent = selected ? `${selected}: ${snap.latest || ""}` : "click a topic";
    const series = { ...(snap.fields || {}) };
    const rates = snap.rates || {};
    if (selected && rates[selected]) series[`${selected} (Hz)`] = rates[selected];
    if (Object.keys(series).length === 0) {
      for (const [name, points] of Object.entries(rates).slice(0, 4)) series[`${name} (Hz)`] = points;
    }
    plot.replaceChildren(chart(series, snap.window_s || 30));
    status.textContent = `${snap.seen || 0} events seen, update ${model.get("updates")}`;
  }
  model.on("change:snapshot", draw);
  model.on("change:selected", draw);
  draw();
}

export default { render };
