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


SHOWN_WORKSPACE = "~/studio/workspace"  # where a reader's own workspace would be, in place of the temporary one
# Rewrites every text node and field value: the pictures show the studio as a user's machine would, not ours.
MASK_JS = """(pairs) => {
  const swap = (text) => pairs.reduce((t, [from, to]) => t.split(from).join(to), text);
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) node.nodeValue = swap(node.nodeValue);
  for (const field of document.querySelectorAll('input, textarea')) field.value = swap(field.value);
}"""
SHOWN_TEXT_JS = ("() => [document.body.innerText,"
                 " ...[...document.querySelectorAll('input, textarea')].map(f => f.value)].join('\\n')")


class PathLeak(RuntimeError):
    """A picture would show a path of the machine that made it."""


def machine_paths(workspace: Path) -> list[tuple[str, str]]:
    """(a path of this machine, what a picture shows instead), longest first so a folder inside another is
    replaced whole."""
    pairs = {str(workspace): SHOWN_WORKSPACE, sys.executable: "python", str(Path(sys.executable).parent) + "/": "",
             str(REPO) + "/": "", str(REPO): ".", str(Path.home()): "~"}
    return sorted(pairs.items(), key=lambda pair: -len(pair[0]))


def hide_machine_paths(page, pairs: list[tuple[str, str]]) -> None:
    """Show the page's paths as a reader's machine would have them, then check that none of ours is left."""
    page.evaluate(MASK_JS, [list(pair) for pair in pairs])
    shown = page.evaluate(SHOWN_TEXT_JS)
    tmp_root = str(Path(tempfile.gettempdir())) + "/"
    left = [path for path, _ in pairs if path in shown] + ([tmp_root] if tmp_root in shown else [])
    if left:
        raise PathLeak(f"the page still shows {left[0]!r}; the picture would carry a path of this machine")


def _shoot(page, out: Path, name: str, pairs: list[tuple[str, str]]) -> None:
    page.wait_for_function(SETTLED_JS, timeout=UI_TIMEOUT_MS)  # every pending output rendered
    hide_machine_paths(page, pairs)
    path = out / name
    page.screenshot(path=str(path), full_page=False)
    print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")


def _capture(url: str, out: Path, pairs: list[tuple[str, str]]) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                             args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(UI_TIMEOUT_MS)
            page.goto(url)
            page.locator("#project-steps tr[data-step]").first.wait_for()
            _shoot(page, out, "1-project.png", pairs)

            page.get_by_role("tab", name="Data", exact=True).click()
            page.locator("#data-ingest").get_by_text("Recordings → clips").first.click()
            page.locator("#ingest-start").click()
            page.wait_for_function("() => document.querySelectorAll('#proof-table [data-testid^=\"cell-\"]').length"
                                   " > 0", timeout=UI_TIMEOUT_MS)
            page.locator("#proof-table").scroll_into_view_if_needed()
            _shoot(page, out, "2-proofread.png", pairs)

            page.get_by_role("tab", name="Training", exact=True).click()
            page.locator("#train-command").wait_for()
            _shoot(page, out, "3-training.png", pairs)
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
            _capture(url, args.out, machine_paths(workspace))
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
