"""Read back the wav a Gradio audio player serves (its download link): sample rate and frame count."""

from __future__ import annotations

import io

import soundfile

UI_TIMEOUT_MS = 60_000


def served_audio(page, elem_id: str) -> tuple[int, int]:
    """Fetch the file the player ``#elem_id`` serves and read its header."""
    link = page.locator(f"#{elem_id} a[data-testid='download-link']")
    link.wait_for(state="attached", timeout=UI_TIMEOUT_MS)
    response = page.request.get(link.get_attribute("href"))
    assert response.ok, f"{elem_id}: GET {link.get_attribute('href')} -> {response.status}"
    with soundfile.SoundFile(io.BytesIO(response.body())) as sound:
        return sound.samplerate, sound.frames
