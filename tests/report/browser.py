"""Test helper: Debian's headless Chromium driven by Playwright's Python package.

No browser is downloaded: Playwright launches ``/usr/bin/chromium`` (``make setup-browser``
installs it with apt-get) with a fresh profile. :func:`browser_or_skip` skips a test cleanly
where Chromium or Playwright is missing. :func:`open_page` opens a viewer page from disk,
collects console errors and page errors, and waits for the page's ``blReady`` flag.
Screenshots go to :data:`ARTIFACTS` (``runs/browser/``, kept after the run).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "runs" / "browser"
"""Where browser tests keep their screenshots."""


def browser_or_skip() -> None:
    """Skip the calling test unless Chromium and Playwright are installed."""
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.skip("chromium is not installed (make setup-browser)")
    pytest.importorskip("playwright.sync_api")


@dataclass
class Opened:
    """A page open in the browser, with what it logged."""

    page: Any
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    """Every request for something not on disk (none: the page is self-contained)."""
    seconds: float = 0.0
    """From navigation to the page's ``blReady`` flag."""


@contextmanager
def chromium(profile: Path, width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A browser context on a fresh profile under ``profile``."""
    from playwright.sync_api import sync_playwright

    path = CHROMIUM if Path(CHROMIUM).exists() else str(shutil.which("chromium"))
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(profile), executable_path=path, headless=True, args=FLAGS,
            viewport={"width": width, "height": height}, offline=True)
        try:
            yield ctx
        finally:
            ctx.close()


def open_page(ctx: Any, html: Path, timeout_ms: int = 30_000) -> Opened:
    """Open ``html`` from disk and wait until the viewer has drawn (``window.blReady``)."""
    page = ctx.new_page()
    opened = Opened(page)
    page.on("console", lambda m: opened.errors.append(f"console: {m.text}")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: opened.errors.append(f"pageerror: {e}"))
    page.on("request", lambda r: None if r.url.startswith(("file:", "data:", "blob:"))
            else opened.requests.append(r.url))
    t0 = time.perf_counter()
    page.goto(html.resolve().as_uri())
    page.wait_for_function("window.blReady === true", timeout=timeout_ms)
    opened.seconds = time.perf_counter() - t0
    return opened


def artifact(name: str) -> Path:
    """A path under :data:`ARTIFACTS` (the folder created)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name
