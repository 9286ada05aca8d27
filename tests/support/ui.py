"""Headless Chromium (Debian's ``chromium`` and ``chromium-driver``) driven by Selenium, for the dashboard's
browser tests and its benchmark: a browser with its console log kept, the login form filled in, DOM polling
(never a bare sleep), each page's console errors, screenshots under ``tests/artifacts/ui/``."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts" / "ui"


def binaries() -> tuple[str, str]:
    """(chromium, chromedriver): ``make sysdeps`` installs both; a missing one fails the test, naming the fix."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        raise AssertionError("chromium and chromium-driver are needed: run `make sysdeps` (Debian packages)")
    return browser, driver


def chrome(width: int = 1400, height: int = 1000) -> webdriver.Chrome:
    browser, driver = binaries()
    opts = Options()
    opts.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                f"--window-size={width},{height}", "--disable-extensions", "--disable-background-networking"):  # fmt: skip
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=opts, service=Service(driver))


def until(what: str, check: Callable[[], Any], timeout: float = 30.0, every: float = 0.2) -> Any:
    """Poll ``check`` (the DOM, the API) until it returns something true; an AssertionError counts as not yet."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while True:
        try:
            got = check()
            if got:
                return got
        except AssertionError as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}" + (f": {last}" if last else ""))
        time.sleep(every)


def login(driver: webdriver.Chrome, base: str, token: str) -> None:
    """The login form, as a person uses it: the token typed in, the form posted; never in a URL."""
    driver.get(f"{base}/ui/login")
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "form button").click()
    until("the fleet page after the login", lambda: driver.current_url.endswith("/ui/fleet"))
    assert token not in driver.current_url


def loads(driver: webdriver.Chrome) -> int:
    """How many times the open page has drawn its data (0: not yet)."""
    return int(driver.execute_script("return Number(document.body.dataset.loads || 0)"))


def open_page(driver: webdriver.Chrome, base: str, path: str, timeout: float = 30.0) -> None:
    """Load a page and wait for its first drawing; if none comes, say what the page and its console show."""
    driver.get(f"{base}{path}")
    try:
        until(f"{path} drawn", lambda: loads(driver) >= 1, timeout)
    except AssertionError as exc:
        shown = driver.find_element(By.TAG_NAME, "main").text[:500]
        raise AssertionError(f"{exc}; the page shows {shown!r}; its console: {driver.get_log('browser')}") from None


def console_errors(driver: webdriver.Chrome) -> list[dict]:
    """The browser's console entries of level SEVERE since the last call (the log is drained)."""
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def shot(driver: webdriver.Chrome, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def text_of(driver: webdriver.Chrome, css: str) -> str:
    """The rendered text of the first element matching ``css``, found and read in one step in the page, so a
    redraw in between cannot leave a stale reference ("" when nothing matches)."""
    return driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e.innerText : '';", css)


def gpu_colour(driver: webdriver.Chrome, node_id: str, gpu: int) -> tuple[int, int, int] | None:
    """The colour the heat map drew at the middle of one GPU's tile (None: the node is not on the map)."""
    return driver.execute_script(
        """
        const [node, gpu] = arguments;
        const L = UI.state.layout;
        if (!L || !L.place[node]) return null;
        const c = document.getElementById('heatmap');
        const dpr = window.devicePixelRatio || 1;
        const x = (L.place[node][0] + gpu * L.cell + L.cell / 2) * dpr;
        const y = (L.place[node][1] + L.cell / 2) * dpr;
        const d = c.getContext('2d').getImageData(Math.floor(x), Math.floor(y), 1, 1).data;
        return [d[0], d[1], d[2]];
        """,
        node_id,
        gpu,
    )


def browser_fetch(driver: webdriver.Chrome, method: str, path: str, body: str | None = None) -> int:
    """The status the page's own ``fetch`` gets (its session cookie sent), e.g. trying a write."""
    return driver.execute_async_script(
        """
        const [method, path, body, done] = arguments;
        fetch(path, {method, body, credentials: 'same-origin', headers: {'Content-Type': 'application/json'}})
          .then((r) => done(r.status), () => done(-1));
        """,
        method,
        path,
        body,
    )
