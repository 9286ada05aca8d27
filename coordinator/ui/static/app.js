// The dashboard's core: safe DOM helpers, the data fetches and the live feed.
// Every string from the coordinator is set with textContent, never as HTML.
"use strict";

const UI = { pages: {}, catalogue: null, state: {} };

// An element with text (never HTML), classes and children.
UI.el = function (tag, opts, children) {
  const e = document.createElement(tag);
  opts = opts || {};
  if (opts.text !== undefined && opts.text !== null) e.textContent = String(opts.text);
  if (opts.cls) e.className = opts.cls;
  if (opts.href) e.setAttribute("href", opts.href);
  if (opts.title) e.title = String(opts.title);
  if (opts.id) e.id = opts.id;
  for (const c of children || []) if (c) e.appendChild(c);
  return e;
};

// A link to a page about one thing (a node, a job): the key is URL-encoded, shown as text.
UI.link = function (page, key, text) {
  return UI.el("a", { href: "/ui/" + page + "?key=" + encodeURIComponent(key), text: text === undefined ? key : text });
};

UI.fmt = function (v, digits) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(digits === undefined ? 1 : digits);
  return String(v);
};

UI.time = function (t) {
  if (t === null || t === undefined) return "–";
  return new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19);
};

UI.ago = function (now, t) {
  if (t === null || t === undefined) return "–";
  const s = Math.max(0, now - t);
  if (s < 120) return s.toFixed(0) + " s ago";
  if (s < 7200) return (s / 60).toFixed(0) + " min ago";
  return (s / 3600).toFixed(1) + " h ago";
};

// A table: headers, and rows of cells (each a string, a number or a DOM node).
UI.table = function (headers, rows, cls) {
  const head = UI.el("tr", {}, headers.map((h) => UI.el("th", { text: h })));
  const body = rows.map((r) =>
    UI.el("tr", {}, r.map((c) => (c instanceof Node ? UI.el("td", {}, [c]) : UI.el("td", { text: UI.fmt(c) })))),
  );
  return UI.el("table", { cls: cls || "grid" }, [UI.el("thead", {}, [head]), UI.el("tbody", {}, body)]);
};

UI.section = function (title, children) {
  return UI.el("section", {}, [UI.el("h2", { text: title })].concat(children));
};

// GET one JSON answer of the dashboard's API; a lost session goes back to the login form.
UI.get = async function (path) {
  const r = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (r.status === 401) {
    window.location.assign("/ui/login");
    throw new Error("logged out");
  }
  if (!r.ok) {
    let why = r.status + " " + r.statusText;
    try {
      why = (await r.json()).error || why;
    } catch (e) {
      /* not JSON */
    }
    const err = new Error(why);
    err.status = r.status;
    throw err;
  }
  return r.json();
};

UI.panel = function (name, key) {
  const q = key ? "?key=" + encodeURIComponent(key) : "";
  return UI.get("/ui/api/pages/" + encodeURIComponent(name) + q);
};

// The components whose change reloads a page: those declaring the panels it reads.
UI.componentsOf = function (panels) {
  const out = new Set();
  for (const p of UI.catalogue.pages) if (panels.includes(p.name)) out.add(p.component);
  return out;
};

// Follow the live feed: each message names the components that changed; reload when one is ours.
UI.follow = function (watch, reload) {
  const live = document.getElementById("live");
  const src = new EventSource("/ui/api/events");
  src.addEventListener("hello", () => {
    live.textContent = "live";
    live.className = "live on";
  });
  src.addEventListener("changed", (ev) => {
    const changed = JSON.parse(ev.data).components;
    if (watch === "all" || changed.some((c) => watch.has(c))) reload();
  });
  src.addEventListener("expired", () => window.location.assign("/ui/login"));
  src.onerror = () => {
    live.textContent = "reconnecting";
    live.className = "live off";
  };
  return src;
};
