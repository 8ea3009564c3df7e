"""Opening a closed section and typing into it without racing Gradio's first render of its fields.

Gradio 6 renders the fields of a closed accordion only when it opens. Once every one of them has loaded (a slow
audio player included), it sets each one's stored value again, an animation frame later (the frontend's
``render_previously_invisible_children``). A value typed in between is replaced by the stored one. On a loaded
CI machine this showed as ``--steps 25`` after the test had typed 4 into the Test tab's S2Mel steps, in the
section whose emotion-reference player loads last. So: wait until the section's last field is shown, let two
frames pass, and check after typing that the field kept what was typed.
"""

from __future__ import annotations

import time

UI_TIMEOUT_MS = 60_000

_FRAMES = ("(count) => new Promise(done => { const next = left => left ? requestAnimationFrame(() => next(left - 1))"
           " : done(); next(count); })")


def next_frames(page, count: int = 2) -> None:
    """Return after ``count`` animation frames of the page have passed."""
    page.evaluate(_FRAMES, count)


def open_settled(page, header_text: str, *shown: str, timeout_ms: int = UI_TIMEOUT_MS) -> None:
    """Open the accordion headed ``header_text`` and wait until each selector in ``shown`` (its slowest fields) is
    visible and two frames have passed, so Gradio's late first-render values are in before anything is typed."""
    page.get_by_text(header_text).click()
    for selector in shown:
        page.locator(selector).wait_for(state="visible", timeout=timeout_ms)
    next_frames(page)


def fill_kept(page, selector: str, text: str, timeout_ms: int = UI_TIMEOUT_MS) -> None:
    """Type ``text`` into the field ``selector`` and leave it; type it again while a late render took it back."""
    field = page.locator(selector)
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        field.fill(text)
        field.press("Tab")
        next_frames(page)
        if field.input_value() == text:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{selector} did not keep {text!r}: it shows {field.input_value()!r}")


def check_kept(page, locator, timeout_ms: int = UI_TIMEOUT_MS) -> None:
    """Check a radio or box and confirm over two frames that it stayed checked; check it again if not."""
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        locator.check()
        next_frames(page)
        if locator.is_checked():
            return
        if time.monotonic() > deadline:
            raise AssertionError("a checked option did not stay checked")
