"""The dashboard at 2,000 nodes x 8 GPUs: how long the fleet page takes to draw in headless Chromium, how big
its data and its files are, and what the coordinator's rings of recent samples cost in memory when full.

(a) A real coordinator fed by the fleet simulator (2,000 nodes, two rounds of samples); Chromium loads
``/ui/fleet`` ``LOADS`` times: from navigation to the heat map drawn (wall clock in the test process), the
page's own figure (fetch, parse, draw: ``performance.now()``), and the heat map's draw alone. (b) The page's
files (what a browser fetches) and the fleet page's JSON. (c) ``NodeRings`` filled to capacity for 2,000 nodes
x 8 GPUs (an hour at one slot every 30 s), measured with tracemalloc. Writes results/ui.json.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import tempfile
import time
import tracemalloc
import urllib.request
from pathlib import Path

from myolo.coordinator.ui.assets import load, weight
from myolo.coordinator.ui.config import UiConfig
from myolo.coordinator.ui.history import NodeRings
from myolo.events.examples import node_sample
from tests.benchmarks.broker import benchmark_broker
from tests.benchmarks.common import percentile, write_result
from tests.support.ui import binaries, chrome, loads, login
from tests.support.ui_fleet import big_fleet

NODES, GPUS = 2000, 8
LOADS = 7


def ring_memory(nodes: int = NODES, gpus: int = GPUS) -> dict:
    """Bytes the rings hold once every node filled its hour (tracemalloc: what Python allocated for them)."""
    cfg = UiConfig()
    samples = [node_sample(f"sim-node-{i:04d}", gpus=gpus) for i in range(nodes)]
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    rings = NodeRings(cfg.history_s, cfg.history_step_s, cfg.max_nodes)
    for slot in range(rings.capacity + 5):  # past capacity: the rings wrap, they do not grow
        now = slot * cfg.history_step_s
        for s in samples:
            rings.add(s, now)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    used = sum(s.size_diff for s in after.compare_to(before, "filename"))
    return {
        "nodes": nodes,
        "gpus_per_node": gpus,
        "slots": rings.capacity,
        "step_s": cfg.history_step_s,
        "bytes": used,
        "mib": round(used / 2**20, 1),
        "bytes_per_node": round(used / nodes),
    }


def browse(url: str, viewer: str) -> dict:
    driver = chrome()
    try:
        login(driver, url, viewer)
        walls, pages, draws = [], [], []
        for _ in range(LOADS):
            t0 = time.perf_counter()
            driver.get(f"{url}/ui/fleet")
            while loads(driver) < 1:
                time.sleep(0.005)  # polling the DOM for the first draw
            walls.append((time.perf_counter() - t0) * 1000)
            pages.append(float(driver.execute_script("return document.body.dataset.renderMs")))
            draws.append(
                float(
                    driver.execute_script(
                        """
                        return (async () => {
                          const r = await fetch('/ui/api/pages/fleet', {credentials: 'same-origin'});
                          const data = await r.json();
                          const t0 = performance.now();
                          UI.heatmap(document.getElementById('heatmap'), data.nodes, 'util');
                          return performance.now() - t0;
                        })();
                        """
                    )
                )
            )
        version = driver.capabilities.get("browserVersion", "")
    finally:
        driver.quit()
    summary = lambda xs: {"median": round(statistics.median(xs), 1), "p90": round(percentile(xs, 90), 1)}  # noqa: E731
    return {
        "chromium": version,
        "loads": LOADS,
        "navigation_to_drawn_ms": summary(walls),
        "page_fetch_parse_draw_ms": summary(pages),
        "heatmap_draw_ms": summary(draws),
    }


def fleet_json_bytes(url: str, viewer: str) -> int:
    req = urllib.request.Request(f"{url}/ui/api/pages/fleet", headers={"Authorization": f"Bearer {viewer}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return len(resp.read())


async def measure(bootstrap: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="myolo-bench-ui-") as tmp:
        async with big_fleet(bootstrap, Path(tmp), NODES, GPUS) as fleet:
            size = await asyncio.to_thread(fleet_json_bytes, fleet.url, fleet.viewer)
            timing = await asyncio.to_thread(browse, fleet.url, fleet.viewer)
    return {"fleet_json_bytes": size, **timing}


def main() -> None:
    binaries()
    files = weight(load())
    with benchmark_broker() as broker:
        browser = asyncio.run(measure(broker.bootstrap))
    chromium = subprocess.run(["chromium", "--version"], capture_output=True, text=True).stdout.strip()
    write_result(
        "ui",
        {
            "nodes": NODES,
            "gpus_per_node": GPUS,
            "fleet_page": browser,
            "chromium_version": chromium,
            "page_weight_bytes": files,
            "page_weight_kib": round(files["total"] / 1024, 1),
            "ring_memory": ring_memory(),
        },
    )


if __name__ == "__main__":
    main()
