// Drawing on <canvas>, by hand (no charting library): the fleet's heat map and line charts.
"use strict";

UI.METRICS = {
  util: { label: "Utilisation", unit: "%", lo: 0, hi: 100, at: 1 },
  mem: { label: "Memory", unit: "%", lo: 0, hi: 100, at: 2 },
  temp: { label: "Temperature", unit: "°C", lo: 25, hi: 90, at: 3 },
  power: { label: "Power", unit: "W", lo: 50, hi: 700, at: 4 },
};
UI.COLORS = { fail: "#d62728", warn: "#ff9f1c", lost: "#6b6b6b", none: "#2a2f3a" };
UI.PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7"];

// A value's place on a blue -> teal -> yellow ramp (never red: red means a failed GPU).
UI.ramp = function (v, m) {
  if (v === null || v === undefined) return UI.COLORS.none;
  const t = Math.max(0, Math.min(1, (v - m.lo) / (m.hi - m.lo)));
  const stops = [
    [24, 44, 84],
    [22, 128, 133],
    [94, 190, 96],
    [240, 221, 70],
  ];
  const x = t * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(x));
  const f = x - i;
  const c = stops[i].map((s, k) => Math.round(s + (stops[i + 1][k] - s) * f));
  return "rgb(" + c[0] + "," + c[1] + "," + c[2] + ")";
};

// The GPU tile's colour: failed red, warned orange, Lost grey, else the metric's ramp.
UI.tileColor = function (node, g, m) {
  if (node.liveness === "Lost") return UI.COLORS.lost;
  if (g[5] === "fail") return UI.COLORS.fail;
  if (g[5] === "warn") return UI.COLORS.warn;
  return UI.ramp(g[m.at], m);
};

// The heat map: a block per node (its GPUs side by side), blocks in rows. Returns the layout for picking.
UI.heatmap = function (canvas, nodes, metric) {
  const m = UI.METRICS[metric];
  const gpus = Math.max(1, ...nodes.map((n) => n.gpus.length));
  const width = canvas.parentElement.clientWidth || 1000;
  const cell = Math.max(3, Math.min(28, Math.floor(Math.sqrt((width * 640) / Math.max(1, nodes.length * gpus)) * 0.8)));
  const gap = cell >= 10 ? 4 : 2;
  const bw = gpus * cell + gap;
  const bh = cell + gap;
  const cols = Math.max(1, Math.floor(width / bw));
  const rows = Math.ceil(nodes.length / cols);
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.floor(cols * bw * dpr);
  canvas.height = Math.floor(Math.max(1, rows * bh) * dpr);
  canvas.style.width = cols * bw + "px";
  canvas.style.height = rows * bh + "px";
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, cols * bw, rows * bh);
  const layout = { cell, gap, bw, bh, cols, nodes, place: {} };
  nodes.forEach((node, i) => {
    const x0 = (i % cols) * bw;
    const y0 = Math.floor(i / cols) * bh;
    layout.place[node.node_id] = [x0, y0];
    node.gpus.forEach((g, k) => {
      const x = x0 + k * cell;
      ctx.fillStyle = UI.tileColor(node, g, m);
      ctx.fillRect(x, y0, cell - 1, cell - 1);
      if (cell >= 6) UI.badges(ctx, g, x, y0, cell);
    });
    if (node.cordoned || node.leak || node.liveness !== "Ready") {
      ctx.strokeStyle = node.liveness === "Lost" ? "#ffffff" : node.cordoned ? "#ff9f1c" : "#c77dff";
      ctx.lineWidth = 1;
      ctx.strokeRect(x0 - 0.5, y0 - 0.5, node.gpus.length * cell, cell);
    }
  });
  return layout;
};

// Small marks in a tile's corners: XID (red triangle), uncorrected ECC (magenta), throttled (bar).
UI.badges = function (ctx, g, x, y, cell) {
  const s = Math.max(2, Math.floor(cell / 3));
  if (g[6] !== null) {
    ctx.fillStyle = "#ffffff";
    ctx.beginPath();
    ctx.moveTo(x + cell - 1 - s, y);
    ctx.lineTo(x + cell - 1, y);
    ctx.lineTo(x + cell - 1, y + s);
    ctx.fill();
  }
  if (g[7] > 0) {
    ctx.fillStyle = "#ff3df2";
    ctx.fillRect(x, y, s, s);
  }
  if (g[8]) {
    ctx.fillStyle = "#ff9f1c";
    ctx.fillRect(x, y + cell - 1 - Math.max(1, s / 2), cell - 1, Math.max(1, s / 2));
  }
};

// The node and GPU under a point of the heat map, or null.
UI.pick = function (layout, x, y) {
  const col = Math.floor(x / layout.bw);
  const row = Math.floor(y / layout.bh);
  const i = row * layout.cols + col;
  const node = layout.nodes[i];
  if (!node || col >= layout.cols) return null;
  const k = Math.floor((x - col * layout.bw) / layout.cell);
  const g = node.gpus[k];
  return g ? { node, gpu: g } : { node, gpu: null };
};

// A line chart: series [{label, points: [[x, y]], color}], vertical marks [{x, label}], x as time or steps.
UI.chart = function (canvas, series, opts) {
  opts = opts || {};
  const w = canvas.parentElement.clientWidth || 600;
  const h = opts.height || 180;
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.floor(w * dpr);
  canvas.height = Math.floor(h * dpr);
  canvas.style.width = w + "px";
  canvas.style.height = h + "px";
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  const pts = series.flatMap((s) => s.points.filter((p) => p[1] !== null && Number.isFinite(p[1])));
  const pad = { l: 48, r: 8, t: 8, b: 20 };
  ctx.font = "11px sans-serif";
  ctx.fillStyle = "#9aa4b2";
  if (!pts.length) {
    ctx.fillText("no data yet", pad.l, h / 2);
    return;
  }
  const xs = pts.map((p) => p[0]).concat((opts.marks || []).map((m) => m.x)); // every mark in view
  const ys = pts.map((p) => p[1]);
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [opts.yMin !== undefined ? opts.yMin : Math.min(...ys), Math.max(...ys)];
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) y1 = y0 + 1;
  const sx = (x) => pad.l + ((x - x0) / (x1 - x0)) * (w - pad.l - pad.r);
  const sy = (y) => h - pad.b - ((y - y0) / (y1 - y0)) * (h - pad.t - pad.b);
  ctx.strokeStyle = "#3a4150";
  ctx.strokeRect(pad.l, pad.t, w - pad.l - pad.r, h - pad.t - pad.b);
  ctx.fillText(UI.fmt(y1, 2), 2, pad.t + 10);
  ctx.fillText(UI.fmt(y0, 2), 2, h - pad.b);
  const xl = opts.time ? (x) => UI.time(x).slice(11) : (x) => UI.fmt(x, 0);
  ctx.fillText(xl(x0), pad.l, h - 4);
  ctx.fillText(xl(x1), w - pad.r - 60, h - 4);
  for (const mark of opts.marks || []) {
    const x = sx(mark.x);
    ctx.strokeStyle = "#ff9f1c";
    ctx.setLineDash([3, 3]);
    ctx.beginPath();
    ctx.moveTo(x, pad.t);
    ctx.lineTo(x, h - pad.b);
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = "#ff9f1c";
    const tw = ctx.measureText(mark.label).width;
    ctx.fillText(mark.label, x + 3 + tw > w - pad.r ? x - 3 - tw : x + 3, pad.t + 10); // inside the plot
  }
  series.forEach((s, i) => {
    ctx.strokeStyle = s.color || UI.PALETTE[i % UI.PALETTE.length];
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    let down = false;
    for (const p of s.points) {
      if (p[1] === null || !Number.isFinite(p[1])) {
        down = false;
        continue;
      }
      if (down) ctx.lineTo(sx(p[0]), sy(p[1]));
      else ctx.moveTo(sx(p[0]), sy(p[1]));
      down = true;
    }
    ctx.stroke();
    if (s.points.length < 3) {
      ctx.fillStyle = ctx.strokeStyle; // a lone point has no line: a dot
      for (const p of s.points) if (p[1] !== null && Number.isFinite(p[1])) ctx.fillRect(sx(p[0]) - 2, sy(p[1]) - 2, 4, 4);
    }
  });
};

// A legend of coloured labels (text only).
UI.legend = function (series) {
  return UI.el(
    "div",
    { cls: "legend" },
    series.map((s, i) => UI.el("span", { cls: "key c" + (i % UI.PALETTE.length), text: s.label })),
  );
};
