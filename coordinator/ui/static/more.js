// The Rollouts, Drift, Registry and Events pages, and a generic page for any other a component declares.
"use strict";

const figures = (o) => Object.entries(o || {}).map(([k, v]) => k + "=" + UI.fmt(v, 3)).join(" ");

// Seconds left until ``until`` (the coordinator's clock), counted down in the page between reloads.
UI.countdown = function (until, now) {
  const span = UI.el("span", { cls: "countdown" });
  const skew = Date.now() / 1000 - now; // this browser's clock against the coordinator's
  const tick = () => (span.textContent = Math.max(0, until + skew - Date.now() / 1000).toFixed(0) + " s");
  tick();
  UI.state.ticks = UI.state.ticks || new Set();
  UI.state.ticks.add(tick);
  if (!UI.state.ticker) UI.state.ticker = setInterval(() => UI.state.ticks.forEach((t) => t()), 1000);
  return span;
};

UI.pages.rollouts = {
  panels: () => ["rollouts"],
  render(data, key, box) {
    const board = data.rollouts || { items: [], now: 0 };
    if (UI.state.ticks) UI.state.ticks.clear(); // the previous drawing's countdowns
    box.appendChild(UI.el("h1", { text: "Rollouts" }));
    if (!board.items.length) return box.appendChild(UI.el("p", { cls: "note", text: "No rollouts." }));
    for (const r of board.items) {
      const s = r.status;
      const waves = s.waves.map((w) => [w.index, w.percent + " %", w.step,
        UI.el("span", {}, w.nodes.map((n) => UI.link("node", n, n + " "))),
        w.bake_until ? UI.countdown(w.bake_until, board.now) : null,
        UI.el("div", {}, w.gates.map((g) => UI.el("div", {
          cls: g.passed === false ? "gate bad" : "gate",
          text: g.gate + ": " + (g.passed === null || g.passed === undefined ? "pending" : g.passed ? "passed" : "failed") +
            (g.detail ? " (" + g.detail + ")" : "") + " " + figures(g.figures),
        })))]);
      box.appendChild(UI.section(r.name + ": " + r.spec.component + " " + r.spec.version + " (" + s.phase + ")", [
        UI.el("p", { cls: "note", text: (s.reason || "") + " by " + r.spec.by }),
        UI.table(["wave", "share", "step", "nodes", "bake left", "gates"], waves, "grid waves"),
      ]));
    }
  },
};

UI.pages.drift = {
  panels: () => ["drift"],
  render(data, key, box) {
    const items = data.drift ? data.drift.items : [];
    box.appendChild(UI.el("h1", { text: "Drift" }));
    if (!items.length) return box.appendChild(UI.el("p", { cls: "note", text: "No model is monitored yet." }));
    for (const v of items) {
      const names = [...new Set(v.points.flatMap((p) => p.features.map((f) => f.feature)))].sort();
      const charts = ["psi", "ks", "js", "wasserstein"].map((stat) => {
        const series = names.map((n) => ({ label: n, points: v.points.map((p) => {
          const f = p.features.find((x) => x.feature === n);
          return [p.time, f && f[stat] !== undefined ? f[stat] : null];
        }) }));
        const marks = v.points.filter((p) => p.drifted).map((p) => ({ x: p.time, label: "drift" }));
        const canvas = UI.el("canvas", { cls: "chart" });
        requestAnimationFrame(() => UI.chart(canvas, series, { time: true, marks, yMin: 0, height: 140 }));
        return UI.el("div", { cls: "chartbox" }, [UI.el("h3", { text: stat }), canvas]);
      });
      const last = v.points[v.points.length - 1];
      box.appendChild(UI.section(v.model + " version " + v.version, [
        UI.legend(names.map((n) => ({ label: n }))),
      ].concat(charts, [
        UI.table(["feature", "kind", "count", "psi", "ks", "js", "drifted", "by"], (last ? last.features : []).map((f) =>
          [f.feature, f.kind, f.count, f.psi, f.ks, f.js, String(!!f.drifted), (f.by || []).join(", ")])),
        UI.el("p", { cls: "note", text: "detections: " + (v.detections.join(", ") || "none") }),
      ])));
    }
  },
};

UI.pages.registry = {
  panels: () => ["registry"],
  render(data, key, box) {
    const models = data.registry ? data.registry.models : [];
    box.appendChild(UI.el("h1", { text: "Registry" }));
    if (!models.length) return box.appendChild(UI.el("p", { cls: "note", text: "No models registered." }));
    for (const m of models) {
      const evals = (v) => (v.model_index || []).flatMap((i) => i.results.flatMap((r) =>
        r.metrics.map((x) => r.dataset.name + " " + x.type + "=" + UI.fmt(x.value, 4)))).join("; ");
      const versions = m.versions.map((v) => ["v" + v.version, UI.time(v.created), v.by, v.source,
        v.parent !== undefined && v.parent !== null ? "v" + v.parent : "root", v.job ? v.job + " g" + v.generation : "",
        evals(v) || figures(v.metrics)]);
      const aliases = m.aliases.flatMap((a) => (a.history || []).slice().reverse().map((c) => ["@" + a.alias,
        c.version === null || c.version === undefined ? "removed" : "v" + c.version, UI.time(c.when), c.by, c.reason]));
      box.appendChild(UI.section(m.model.name, [
        UI.el("p", { cls: "note", text: m.model.description || "" }),
        UI.table(["version", "created", "by", "source", "parent", "from", "evaluations"], versions, "grid versions"),
        UI.el("h3", { text: "Alias history" }),
        UI.table(["alias", "to", "when", "by", "reason"], aliases, "grid aliases"),
      ]));
    }
  },
};

UI.pages.events = {
  watchAll: true,
  panels: () => ["events"],
  render(data, key, box) {
    const items = data.events ? data.events.items : [];
    box.appendChild(UI.el("h1", { text: "Events" }));
    const link = (m) => {
      if (m.kind === "fault" || m.kind === "cordon") return UI.link("node", m.subject);
      if (m.kind === "decision") return UI.link("job", m.subject);
      return UI.el("span", { text: m.subject });
    };
    box.appendChild(UI.table(["when", "kind", "from", "about", "what"],
      items.map((m) => [UI.time(m.time), UI.el("span", { cls: "kind " + m.kind, text: m.kind }), m.component, link(m), m.text]),
      "grid events"));
  },
};

// Any other page a component declares: its data as nested lists, every value as text.
UI.tree = function (v) {
  if (v === null || typeof v !== "object") return UI.el("span", { text: UI.fmt(v) });
  const entries = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
  return UI.el("ul", { cls: "tree" }, entries.map(([k, x]) => UI.el("li", {}, [UI.el("b", { text: k + ": " }), UI.tree(x)])));
};

UI.generic = function (name) {
  return {
    keyed: [name],
    panels: () => [name],
    render(data, key, box) {
      box.appendChild(UI.el("h1", { text: name + (key ? " " + key : "") }));
      box.appendChild(UI.tree(data[name]));
    },
  };
};
