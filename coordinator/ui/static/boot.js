// Start a page: the menu from the components' declarations, the page's panels, then the live feed.
"use strict";

(async function boot() {
  const main = document.getElementById("main");
  const parts = window.location.pathname.split("/");
  const name = decodeURIComponent(parts[2] || "fleet");
  const key = new URLSearchParams(window.location.search).get("key");
  try {
    UI.catalogue = await UI.get("/ui/api/catalogue");
  } catch (e) {
    return;
  }
  document.getElementById("who").textContent = UI.catalogue.who;
  const nav = document.getElementById("nav");
  for (const p of UI.catalogue.pages) {
    if (!p.title) continue;
    const a = UI.el("a", { href: "/ui/" + encodeURIComponent(p.name), text: p.title });
    if (p.name === name || (UI.pages[name] && UI.pages[name].under === p.name)) a.className = "here";
    nav.appendChild(a);
  }
  const page = UI.pages[name] || UI.generic(name);
  const panels = page.panels(key);
  let busy = false;
  let again = false;
  let loads = 0;
  async function load() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    const t0 = performance.now();
    try {
      const data = {};
      await Promise.all(
        panels.map(async (p) => {
          try {
            data[p] = await UI.panel(p, page.keyed && page.keyed.includes(p) ? key : null);
          } catch (e) {
            if (e.status !== 404) throw e;
            data[p] = null;
          }
        }),
      );
      const box = UI.el("div", { cls: "page" });
      const attached = page.render(data, key, box);
      main.replaceChildren(box);
      if (typeof attached === "function") attached(); // drawing that needs the page's width
      loads += 1;
      document.body.dataset.loads = String(loads);
      document.body.dataset.renderMs = (performance.now() - t0).toFixed(1);
    } catch (e) {
      main.replaceChildren(UI.el("p", { cls: "error", text: "Could not load this page: " + e.message }));
    } finally {
      busy = false;
      if (again) {
        again = false;
        load();
      }
    }
  }
  await load();
  UI.follow(page.watchAll ? "all" : UI.componentsOf(panels), load);
})();
