"""Recordings -> a proofread manifest in a real browser (the Data tab's "Recordings → clips").

On a copy of the demo workspace: import and slice its demo recordings (a supervised job; real silero voice
activity, no ASR model: clips keep their subtitle text or none), open the proofreading table (worst first),
play a clip (the served wav has frames), correct a transcript in Amharic, delete a clip, save a manifest; the
manifest holds the correction and lacks the deleted clip. A page reload and a studio restart show the edits
still there. Every wait is on a visible condition with a timeout.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.browser.served_audio import served_audio
from tests.studio_process import StudioProcess

INGEST_TIMEOUT_MS = 300_000  # silero over ~40 s of audio plus process start on a busy 2-core machine
UI_TIMEOUT_MS = 60_000
CORRECTED = "የተስተካከለ ጽሑፍ ለሙከራ"


def open_ingest(page, url: str) -> None:
    page.goto(url)
    page.get_by_role("tab", name="Data", exact=True).click()
    page.locator("#data-ingest").get_by_text("Recordings → clips").first.click()
    page.locator("#ingest-start").wait_for(timeout=UI_TIMEOUT_MS)


def table_rows(page) -> list[list[str]]:
    """The proofreading table's cells, row by row (status first, id last)."""
    return page.locator("#proof-table").evaluate(
        "el => { const rows = {}; for (const cell of el.querySelectorAll('[role=gridcell][data-row]')) {"
        " (rows[cell.dataset.row] ??= [])[Number(cell.dataset.col)] = cell.innerText.trim(); }"
        " return Object.keys(rows).sort((a, b) => a - b).map(k => rows[k]); }")


def wait_rows(page, count: int) -> None:
    page.wait_for_function(
        "(count) => new Set([...document.querySelectorAll('#proof-table [role=gridcell][data-row]')]"
        ".map(cell => cell.dataset.row)).size >= count", arg=count, timeout=UI_TIMEOUT_MS)


def rows_by_id(page) -> dict[str, list[str]]:
    return {row[-1]: row for row in table_rows(page) if row and row[-1]}


def wait_message(page, text: str) -> None:
    page.wait_for_function("(text) => document.querySelector('#proof-message')?.innerText.includes(text)",
                           arg=text, timeout=UI_TIMEOUT_MS)


def click_row(page, clip_id: str) -> None:
    row = next(k for k, cells in enumerate(table_rows(page)) if cells[-1] == clip_id)
    page.locator(f"#proof-table [data-testid='cell-{row}-0']").click()
    page.wait_for_function("(id) => document.querySelector('#proof-details')?.innerText.includes(id)",
                           arg=clip_id, timeout=UI_TIMEOUT_MS)


def test_recordings_to_a_proofread_manifest_in_the_browser(page, studio_workspace: Path, artifacts: Path,
                                                          tmp_path: Path):
    ingest = studio_workspace / "ingest"
    with StudioProcess(studio_workspace, tmp_path / "studio.log") as studio:
        studio.wait_ready()
        open_ingest(page, studio.url)
        page.locator("#ingest-start").click()
        page.wait_for_function(
            "() => { const b = document.querySelector('#ingest-summary .studio-badge, #ingest-job-message .studio-badge');"
            " return b && b.innerText.length > 0; }", timeout=INGEST_TIMEOUT_MS)
        summary = page.locator("#ingest-summary").inner_text()
        assert "9 clip(s) from 2 recording(s)" in summary and "3 rejected" in summary, (
            summary, page.locator("#ingest-job-log textarea").input_value(), studio.output())
        wait_rows(page, 9)
        rows = table_rows(page)
        assert [row[0] for row in rows[:3]] == ["rejected"] * 3 and rows[3][0] == "ok", rows  # worst first
        assert "no_text" in rows[0][2]
        page.screenshot(path=str(artifacts / "ingest-sliced.png"), full_page=True)

        story = [row[-1] for row in rows if "story" in row[-1]]
        edited, deleted = story[0], story[1]
        click_row(page, edited)
        rate, frames = served_audio(page, "proof-audio")
        assert rate == 22050 and frames > 0
        page.wait_for_function("() => { const d = document.querySelector('#proof-audio #duration');"
                               " return d && d.innerText.trim() !== '' && d.innerText.trim() !== '0:00'; }",
                               timeout=UI_TIMEOUT_MS)  # the player has loaded the clip
        editor = page.locator("#proof-text textarea")
        editor.click()
        editor.press("ControlOrMeta+a")
        page.keyboard.insert_text(CORRECTED)  # a paste: an input event without key presses
        page.locator("#proof-pending .studio-badge").wait_for(timeout=UI_TIMEOUT_MS)
        page.locator("#proof-apply").click()
        wait_message(page, f"transcript of {edited} saved")
        page.wait_for_function("() => !document.querySelector('#proof-pending .studio-badge')", timeout=UI_TIMEOUT_MS)
        page.wait_for_function("([id, text]) => [...document.querySelectorAll('#proof-table [role=row]')]"
                               ".some(row => row.innerText.includes(id) && row.innerText.includes(text))",
                               arg=[edited, CORRECTED], timeout=UI_TIMEOUT_MS)

        click_row(page, deleted)
        page.locator("#proof-delete").click()
        wait_message(page, f"{deleted} deleted")
        page.locator("#proof-save").click()
        wait_message(page, "MANIFEST SAVED")
        manifest = Path(page.locator("#proof-manifest textarea").input_value())
        assert manifest.parent == ingest / "manifests" and manifest.is_file()
        saved = {row["id"]: row for row in map(json.loads, manifest.read_text(encoding="utf-8").splitlines())}
        assert saved[edited]["text"] == CORRECTED and deleted not in saved
        assert len(saved) == 5 and all((manifest.parent / row["audio"]).is_file() for row in saved.values())
        page.locator("#proof-use-manifest").click()  # on to preprocessing
        page.wait_for_function("(path) => document.querySelector('#data-prep-input textarea').value === path",
                               arg=str(manifest), timeout=UI_TIMEOUT_MS)
        page.screenshot(path=str(artifacts / "ingest-proofread.png"), full_page=True)

        page.reload()  # the edits come back from disk
        open_ingest(page, studio.url)
        wait_rows(page, 9)
        after = rows_by_id(page)
        assert after[edited][0] == "ok (edited)" and after[edited][4] == CORRECTED, after[edited]
        assert after[deleted][0] == "deleted", after[deleted]

    with StudioProcess(studio_workspace, tmp_path / "studio2.log") as studio:  # a studio restart
        studio.wait_ready()
        open_ingest(page, studio.url)
        wait_rows(page, 9)
        after = rows_by_id(page)
        assert after[edited][4] == CORRECTED and after[deleted][0] == "deleted"
        page.locator("#proof-save").click()
        wait_message(page, "MANIFEST SAVED")
        second = Path(page.locator("#proof-manifest textarea").input_value())
        assert second != manifest and manifest.is_file()  # never over an earlier one
        page.screenshot(path=str(artifacts / "ingest-after-restart.png"), full_page=True)

        # The suggested Amharic ASR models, with their licences; picking one fills the model and MMS language.
        page.get_by_text("Transcription (optional)").click()
        suggestions = page.locator("#ingest-asr-suggestions")
        suggestions.wait_for(timeout=UI_TIMEOUT_MS)
        assert "facebook/mms-1b-all" in suggestions.inner_text() and "CC-BY-NC-4.0" in suggestions.inner_text()
        page.locator("#ingest-asr-pick input").click()
        page.get_by_role("option", name="facebook/mms-1b-all", exact=True).click()
        page.wait_for_function("() => document.querySelector('#ingest-asr-model textarea, #ingest-asr-model input')"
                               "?.value === 'facebook/mms-1b-all'", timeout=UI_TIMEOUT_MS)
        assert page.locator("#ingest-asr-lang").locator("textarea, input").first.input_value() == "amh"
        page.locator("#ingest-asr-suggestions").screenshot(path=str(artifacts / "ingest-asr-models.png"))
