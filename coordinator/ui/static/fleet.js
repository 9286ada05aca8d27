// The Fleet page (heat map, totals, allocated-but-idle GPUs) and the Node page (curves, faults, workers).
"use strict";

UI.state.metric = "util";
const IDLE_UTIL = 5; // % under which an allocated GPU counts as idle

UI.fleetTotals = function (fleet, allocs) {
  const held = new Map();
  for (const a of allocs ? allocs.items : []) for (const g of a[1]) held.set(a[0] + "/" + g, a[2]);
  const t = { nodes: fleet.nodes.length, gpus: 0, allocated: 0, idle: 0, unhealthy: 0, badges: {} };
  const count = (k) => (t.badges[k] = (t.badges[k] || 0) + 1);
  const idle = [];
  const unhealthy = [];
  for (const n of fleet.nodes) {
    if (n.cordoned) count("cordoned");
    if (n.liveness === "Lost") count("Lost");
    if (n.leak) count("leak");
    for (const g of n.gpus) {
      t.gpus += 1;
      if (g[6] !== null) count("XID");
      if (g[7] > 0) count("ECC");
      if (g[8]) count("throttled");
      const job = held.get(n.node_id + "/" + g[0]);
      const bad = g[5] !== "ok" || n.liveness === "Lost";
      if (bad) {
        t.unhealthy += 1;
        unhealthy.push([n, g]);
      }
      if (job !== undefined) {
        t.allocated += 1;
        if (g[1] !== null && g[1] < IDLE_UTIL) idle.push([n, g, job]);
      } else if (!bad) t.idle += 1;
    }
  }
  return { t, idle, unhealthy };
};

UI.pages.fleet = {
  panels: () => ["fleet", "allocations"],
  render(data, key, box) {
    const fleet = data.fleet || { nodes: [] };
    const { t, idle, unhealthy } = UI.fleetTotals(fleet, data.allocations);
    const stat = (label, value, id) => UI.el("div", { cls: "stat", id }, [
      UI.el("span", { cls: "value", text: value }),
      UI.el("span", { cls: "label", text: label }),
    ]);
    box.appendChild(UI.el("div", { cls: "stats" }, [
      stat("nodes", t.nodes, "stat-nodes"),
      stat("GPUs", t.gpus, "stat-gpus"),
      stat("allocated", t.allocated, "stat-allocated"),
      stat("idle", t.idle, "stat-idle"),
      stat("unhealthy", t.unhealthy, "stat-unhealthy"),
    ]));
    const badges = Object.entries(t.badges).map(([k, v]) => UI.el("span", { cls: "badge " + k, text: k + " " + v }));
    const switcher = UI.el("div", { cls: "switch" }, Object.entries(UI.METRICS).map(([name, m]) => {
      const b = UI.el("button", { text: m.label, cls: name === UI.state.metric ? "on" : "" });
      b.dataset.metric = name;
      b.addEventListener("click", () => {
        UI.state.metric = name;
        for (const o of switcher.children) o.className = o.dataset.metric === name ? "on" : "";
        draw();
      });
      return b;
    }));
    const canvas = UI.el("canvas", { id: "heatmap" });
    const wrap = UI.el("div", { cls: "mapwrap" }, [canvas]);
    box.appendChild(UI.section("GPUs", [UI.el("div", { cls: "bar" }, [switcher].concat(badges)), wrap]));
    const draw = () => (UI.state.layout = UI.heatmap(canvas, fleet.nodes, UI.state.metric));
    UI.state.redraw = draw;
    if (!UI.state.onResize) {
      UI.state.onResize = true;
      window.addEventListener("resize", () => UI.state.redraw && UI.state.redraw());
    }
    const tip = document.getElementById("tip");
    canvas.addEventListener("mousemove", (ev) => {
      const hit = UI.state.layout && UI.pick(UI.state.layout, ev.offsetX, ev.offsetY);
      if (!hit) return (tip.hidden = true);
      const g = hit.gpu;
      const m = UI.METRICS[UI.state.metric];
      const what = g ? "GPU " + g[0] + ": " + m.label + " " + UI.fmt(g[m.at]) + " " + m.unit + ", " + g[5] : "";
      const xid = g && g[6] !== null ? ", XID " + g[6] : "";
      tip.textContent = hit.node.node_id + " (" + hit.node.liveness + ") " + what + xid;
      tip.hidden = false;
      tip.style.left = ev.pageX + 12 + "px";
      tip.style.top = ev.pageY + 12 + "px";
    });
    canvas.addEventListener("mouseleave", () => (tip.hidden = true));
    canvas.addEventListener("click", (ev) => {
      const hit = UI.state.layout && UI.pick(UI.state.layout, ev.offsetX, ev.offsetY);
      if (hit) window.location.assign("/ui/node?key=" + encodeURIComponent(hit.node.node_id));
    });
    const gpuRow = (n, g, extra) => [UI.link("node", n.node_id), g[0]].concat(extra);
    box.appendChild(UI.section("Allocated but idle (under " + IDLE_UTIL + " %)", [
      idle.length
        ? UI.table(["node", "GPU", "utilisation %", "job"], idle.map(([n, g, job]) => gpuRow(n, g, [g[1], UI.link("job", job)])), "grid idle")
        : UI.el("p", { cls: "note", text: "none" }),
    ]));
    box.appendChild(UI.section("Unhealthy", [
      unhealthy.length
        ? UI.table(["node", "GPU", "health", "XID", "node"], unhealthy.map(([n, g]) => gpuRow(n, g, [g[5], g[6], n.liveness])), "grid unhealthy")
        : UI.el("p", { cls: "note", text: "none" }),
    ]));
    return draw;
  },
};

UI.pages.node = {
  under: "fleet",
  keyed: ["node", "node-history"],
  panels: () => ["node", "node-history"],
  render(data, key, box) {
    if (!data.node) return box.appendChild(UI.el("p", { cls: "error", text: "No node " + key + " in the fleet." }));
    const n = data.node.node;
    const now = data.node.now;
    box.appendChild(UI.el("h1", { text: n.node_id }));
    const facts = [
      ["liveness", n.liveness], ["health", n.health + (n.health_reasons.length ? ": " + n.health_reasons.join("; ") : "")],
      ["backend", n.backend], ["last seen", UI.ago(now, n.last_seen)], ["agent", n.agent_version],
      ["agent on trial", n.agent_on_trial], ["driver", n.driver_version],
    ];
    box.appendChild(UI.table(["", ""], facts, "grid facts"));
    const c = n.cordon;
    box.appendChild(UI.section("Cordon", [c
      ? UI.table(["cordoned", "by", "reason", "when"], [[String(c.cordoned), c.by, c.reason, UI.time(c.time)]])
      : UI.el("p", { cls: "note", text: "never cordoned" })]));
    box.appendChild(UI.section("GPUs now", [UI.table(
      ["GPU", "name", "util %", "memory", "temp °C", "power W", "health", "reasons"],
      n.gpus.map((g) => [g.index, g.name, g.util_gpu, g.mem_total_bytes ? UI.fmt((100 * (g.mem_used_bytes || 0)) / g.mem_total_bytes) + " %" : null,
        g.temp_gpu_c, g.power_w, g.health || "ok", (g.health_reasons || []).join("; ")]),
    )]));
    const h = data["node-history"];
    const curves = [];
    for (const [name, m] of Object.entries(UI.METRICS)) {
      const canvas = UI.el("canvas", { cls: "chart" });
      const series = h ? h.gpus.map((g) => ({ label: "GPU " + g.index, points: h.times.map((t, i) => [t, g[name][i]]) })) : [];
      curves.push(UI.el("div", { cls: "chartbox" }, [UI.el("h3", { text: m.label + " (" + m.unit + ")" }), canvas]));
      requestAnimationFrame(() => UI.chart(canvas, series, { time: true, yMin: m.lo }));
    }
    const legend = h ? UI.legend(h.gpus.map((g) => ({ label: "GPU " + g.index }))) : null;
    box.appendChild(UI.section("The last hour" + (h ? " (one point every " + h.step_s + " s)" : ""), [legend].concat(curves)));
    box.appendChild(UI.section("Faults", [n.recent_faults.length
      ? UI.table(["when", "kind", "GPU", "XID", "health", "reasons"],
        n.recent_faults.slice().reverse().map((f) => [UI.time(f.time), f.kind, f.gpu_index, f.xid, f.health, f.reasons.join("; ") || f.message]))
      : UI.el("p", { cls: "note", text: "none" })]));
    const workers = h ? h.workers : [];
    box.appendChild(UI.section("Workers", [workers.length
      ? UI.table(["job", "generation", "rank", "GPU", "pid", "state", "last step"],
        workers.map((w) => [UI.link("job", w.job_id), w.generation, w.rank, w.gpu, w.pid, w.state, w.last_step]))
      : UI.el("p", { cls: "note", text: "none" })]));
    box.appendChild(UI.section("Releases", [UI.table(["component", "version", "restored", "reason"],
      [["agent", n.agent_version, n.agent_on_trial ? "on trial" : "committed", ""]].concat(
        n.failed_releases.map((r) => [r.component, r.version, r.restored, r.reason])))]));
  },
};
