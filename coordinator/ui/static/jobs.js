// The Jobs page (a row per job) and the Job page (curves across generations, the generation timeline).
"use strict";

const RESIZES = new Set(["shrink", "grow", "scale", "replace", "restart", "start"]);

UI.labels = (labels) => Object.entries(labels || {}).map(([k, v]) => k + "=" + v).join(", ");

UI.pages.jobs = {
  panels: () => ["jobs"],
  render(data, key, box) {
    const items = data.jobs ? data.jobs.items : [];
    box.appendChild(UI.el("h1", { text: "Jobs" }));
    if (!items.length) return box.appendChild(UI.el("p", { cls: "note", text: "No jobs." }));
    box.appendChild(UI.table(
      ["job", "phase", "replicas min / current / max", "generation", "step", "loss", "tokens/s", "restarts", "labels", "reason"],
      items.map((j) => [UI.link("job", j.name), j.phase, j.replicas_min + " / " + j.replicas_current + " / " + j.replicas_max,
        j.generation, j.step, j.loss === null ? null : UI.fmt(j.loss, 4), j.tokens_per_s, j.restarts, UI.labels(j.labels), j.reason]),
      "grid jobs",
    ));
  },
};

UI.pages.job = {
  under: "jobs",
  keyed: ["job", "job-history"],
  panels: () => ["job", "job-history"],
  render(data, key, box) {
    if (!data.job) return box.appendChild(UI.el("p", { cls: "error", text: "No job " + key + "." }));
    const { row, record } = data.job;
    box.appendChild(UI.el("h1", { text: row.name }));
    box.appendChild(UI.table(["", ""], [
      ["phase", row.phase], ["reason", row.reason],
      ["replicas min / current / max", row.replicas_min + " / " + row.replicas_current + " / " + row.replicas_max],
      ["generation", row.generation], ["step", row.step], ["loss", row.loss === null ? null : UI.fmt(row.loss, 4)],
      ["tokens/s", row.tokens_per_s], ["restarts", row.restarts], ["labels", UI.labels(row.labels)],
    ], "grid facts job-facts"));
    const decisions = record.status.decisions;
    const marks = decisions.filter((d) => RESIZES.has(d.kind)).map((d) => ({
      x: d.time, label: d.kind + (d.replicas !== undefined ? "→" + d.replicas : ""),
    }));
    const h = data["job-history"];
    const byGen = new Map();
    for (const p of h ? h.points : []) {
      if (!byGen.has(p[1])) byGen.set(p[1], []);
      byGen.get(p[1]).push(p);
    }
    const gens = [...byGen.keys()].sort((a, b) => a - b);
    const series = (col) => gens.map((g) => ({ label: "generation " + g, points: byGen.get(g).map((p) => [p[0], p[col]]) }));
    const charts = [["Loss", 3], ["Throughput (tokens/s)", 4]].map(([title, col]) => {
      const canvas = UI.el("canvas", { cls: "chart" });
      requestAnimationFrame(() => UI.chart(canvas, series(col), { time: true, marks }));
      return UI.el("div", { cls: "chartbox" }, [UI.el("h3", { text: title }), canvas]);
    });
    box.appendChild(UI.section("Across generations (resizes marked)", [UI.legend(series(3))].concat(charts)));
    const gen = record.status.generation;
    if (gen) {
      box.appendChild(UI.section("Generation " + gen.number + " (" + gen.stage + ", " + gen.replicas + " replicas)", [
        UI.table(["node", "node rank", "GPUs"], gen.members.map((m) => [UI.link("node", m.node_id), m.node_rank, m.gpus.join(", ")])),
      ]));
    }
    box.appendChild(UI.section("Generation timeline", [UI.table(
      ["when", "decision", "generation", "replicas", "by", "reason", "figures"],
      decisions.slice().reverse().map((d) => [UI.time(d.time), d.kind, d.generation, d.replicas, d.by || "auto", d.reason,
        Object.entries(d.metrics || {}).map(([k, v]) => k + "=" + UI.fmt(v, 3)).join(" ")]),
      "grid timeline",
    )]));
  },
};
