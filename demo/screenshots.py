"""``python -m demo.screenshots [--out docs/first-voice]``: the README walk-through's pictures, taken of the real studio.

Builds a fresh demo workspace in a temporary folder, starts ``app.py`` on it, and drives Debian's Chromium with
Playwright (``requirements-dev.txt``) through the first steps: the Project tab, an import sliced and ready to
proofread, the training form. Rerun it when those tabs change so the README shows the studio as it is.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
UI_TIMEOUT_MS = 120_000
START_TIMEOUT_S = 180.0
VIEWPORT = {"width": 1400, "height": 1000}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_answering(url: str, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"app.py exited with {proc.returncode} before answering")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.5)  # polling an HTTP server that is still starting: nothing to wait on but time
    raise RuntimeError(f"app.py did not answer at {url} within {timeout_s:.0f} s")


SETTLED_JS = ("() => ![...document.querySelectorAll('.block')].some(b => b.classList.contains('pending')"
              " || getComputedStyle(b).opacity !== '1')")


def _shoot(page, out: Path, name: str) -> None:
    page.wait_for_function(SETTLED_JS, timeout=UI_TIMEOUT_MS)  # every pending output rendered
    path = out / name
    page.screenshot(path=str(path), full_page=False)
    print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")


def _capture(url: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                             args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(UI_TIMEOUT_MS)
            page.goto(url)
            page.locator("#project-steps tr[data-step]").first.wait_for()
            _shoot(page, out, "1-project.png")

            page.get_by_role("tab", name="Data", exact=True).click()
            page.locator("#data-ingest").get_by_text("Recordings → clips").first.click()
            page.locator("#ingest-start").click()
            page.wait_for_function("() => document.querySelectorAll('#proof-table [data-testid^=\"cell-\"]').length"
                                   " > 0", timeout=UI_TIMEOUT_MS)
            page.locator("#proof-table").scroll_into_view_if_needed()
            _shoot(page, out, "2-proofread.png")

            page.get_by_role("tab", name="Training", exact=True).click()
            page.locator("#train-command").wait_for()
            _shoot(page, out, "3-training.png")
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo.screenshots", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "first-voice", help="folder for the PNG files")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        print(f"error: {CHROMIUM} is missing (apt-get install chromium)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    from demo.workspace import build_demo

    with tempfile.TemporaryDirectory(prefix="studio-screenshots-") as tmp:
        workspace = build_demo(Path(tmp) / "workspace").root
        port = _free_port()
        url = f"http://127.0.0.1:{port}/"
        log = open(Path(tmp) / "studio.log", "wb")  # noqa: SIM115  (closed after the process ends)
        proc = subprocess.Popen([sys.executable, str(REPO / "app.py"), "--workspace", str(workspace),
                                 "--port", str(port)], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        try:
            _wait_answering(url, proc, START_TIMEOUT_S)
            _capture(url, args.out)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
            log.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
