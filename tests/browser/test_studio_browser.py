"""The studio in a real browser: all five tabs, data check, tokenizer verify, train, stop, resume, reload,
UI restart, checkpoints.

One scenario, in order, on a fresh demo workspace with a tiny CPU training run. Every tab is part of the
studio: a missing one fails the test. Screenshots of every tab go to test-artifacts/. Every wait is on a
visible condition with a timeout.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.browser.sections import fill_kept
from tests.browser.served_audio import served_audio
from tests.studio_process import StudioProcess
from webui.jobs.process_tools import is_process_alive
from webui.jobs.run_record import read_record

RUN_TIMEOUT_MS = 180_000  # a trainer start (torch import, model build) on a busy 2-core CI machine
UI_TIMEOUT_MS = 60_000


_started = [time.monotonic()]


def phase(name: str) -> None:
    """Print how long the scenario took to get here (shown by pytest when the test fails)."""
    print(f"[{time.monotonic() - _started[0]:6.1f} s] {name}", flush=True)


def open_tab(page, name: str) -> None:
    # Right after page.goto the page may still be building its eight tabs; on a loaded machine that takes longer
    # than playwright's default 30 s, so the click waits as long as the other UI waits do.
    page.get_by_role("tab", name=name, exact=True).click(timeout=UI_TIMEOUT_MS)


def section_open(page, elem_id: str) -> bool:
    """Whether the accordion ``#elem_id`` shows its fields (Gradio marks its toggle with the class "open")."""
    toggle = page.locator(f"#{elem_id} button.label-wrap").first
    return "open" in (toggle.get_attribute("class") or "").split()


def open_section(page, elem_id: str) -> None:
    """Open the Training form's section ``#elem_id`` unless it is open already: a fill opens a section that holds a
    changed field (issue 40), and a click on an open one would close it."""
    if not section_open(page, elem_id):
        page.locator(f"#{elem_id} button.label-wrap").first.click()
    page.wait_for_function(
        "(id) => document.querySelector(`#${id} button.label-wrap`).classList.contains('open')", arg=elem_id,
        timeout=UI_TIMEOUT_MS)


TABS = ("Data", "Tokenizer", "Training", "Checkpoints", "Test", "Listen", "Models", "System")


def log_text(page) -> str:
    return page.locator("#training-log textarea").input_value()


def wait_log(page, pattern: str, timeout_ms: int = RUN_TIMEOUT_MS) -> re.Match[str]:
    """Wait until the training log matches ``pattern`` (a regex, ^ and $ per line); returns the last match."""
    page.wait_for_function(
        "(pattern) => new RegExp(pattern, 'm').test(document.querySelector('#training-log textarea').value)",
        arg=pattern, timeout=timeout_ms,
    )
    return list(re.finditer(pattern, log_text(page), flags=re.MULTILINE))[-1]


def last_logged_step(page) -> int:
    steps = re.findall(r"^step (\d+)/", log_text(page), flags=re.MULTILINE)
    return int(steps[-1]) if steps else -1


def wait_step_after(page, step: int, timeout_ms: int = RUN_TIMEOUT_MS) -> int:
    """Wait until the log's last "step N/..." line is past ``step``; returns N."""
    page.wait_for_function(
        "(step) => { const found = [...document.querySelector('#training-log textarea').value"
        ".matchAll(/^step (\\d+)\\//gm)]; return found.length > 0 && Number(found[found.length - 1][1]) > step; }",
        arg=step, timeout=timeout_ms,
    )
    return last_logged_step(page)


def plot_points(page, elem_id: str) -> tuple[int, int]:
    """(points, last step) from the plot's caption, (0, -1) before the first point."""
    found = re.search(r"(\d+) points, up to step (\d+)", page.locator(f"#{elem_id}").inner_text())
    return (int(found.group(1)), int(found.group(2))) if found else (0, -1)


def wait_plot_beyond(page, elem_id: str, step: int, timeout_ms: int = RUN_TIMEOUT_MS) -> tuple[int, int]:
    page.wait_for_function(
        "([id, step]) => { const m = /(\\d+) points, up to step (\\d+)/.exec("
        "document.getElementById(id).innerText); return m && Number(m[2]) > step; }",
        arg=[elem_id, step], timeout=timeout_ms,
    )
    return plot_points(page, elem_id)


def count_visible_fields(page, scope: str) -> int:
    """The form fields a person sees in ``scope`` (inputs, text boxes, selects), hidden ones and buttons left out."""
    return page.evaluate(
        "(scope) => [...document.querySelector(scope).querySelectorAll('input, textarea, select')]"
        ".filter(f => f.type !== 'hidden' && f.type !== 'file' && f.offsetParent !== null"
        " && f.getClientRects().length > 0).length", scope)


def fill_number(page, elem_id: str, value: int) -> None:
    fill_kept(page, f"#{elem_id} input", str(value))  # a field just shown can take a late first-render value


def paste_number(page, elem_id: str, value: int) -> None:
    """Replace a number field's text the way a paste does: one input event, no key presses."""
    field = page.locator(f"#{elem_id} input")
    field.click()
    field.press("ControlOrMeta+a")
    page.keyboard.insert_text(str(value))


def type_then_start(page, elem_id: str, text: str) -> None:
    """Type into a field key by key with no delay and click Start at once, as a hurried user does."""
    field = page.locator(f"#{elem_id} input")
    field.click()
    field.press("ControlOrMeta+a")
    field.press_sequentially(text)
    page.locator("#train-start").click()


def run_data_and_tokenizer_checks(page, artifacts: Path) -> None:
    open_tab(page, "Data")
    page.locator("#data-check-run").click()
    badge = page.locator("#data-check-verdict .studio-badge")
    badge.wait_for(timeout=UI_TIMEOUT_MS)
    assert badge.get_attribute("data-tone") in ("ok", "warn"), page.locator("#data-check-verdict").inner_text()
    page.screenshot(path=str(artifacts / "tab-data.png"), full_page=True)
    open_tab(page, "Tokenizer")
    page.locator("#tok-verify-run").click()
    badge = page.locator("#tok-verify-verdict .studio-badge")
    badge.wait_for(timeout=UI_TIMEOUT_MS)
    assert badge.get_attribute("data-tone") == "ok", page.locator("#tok-verify-verdict").inner_text()
    page.screenshot(path=str(artifacts / "tab-tokenizer.png"), full_page=True)


def command_text(page) -> str:
    return page.locator("#train-command textarea").input_value()


def wait_command(page, needle: str, present: bool = True) -> None:
    page.wait_for_function(
        "([needle, present]) => document.querySelector('#train-command textarea').value.includes(needle) === present",
        arg=[needle, present], timeout=UI_TIMEOUT_MS)


def exercise_presets_and_yaml(page, scratch: Path) -> None:
    """GPU preset, save the form as YAML, load a partial YAML over it, back to the demo preset."""
    page.locator("#train-preset input").click()
    page.get_by_role("option", name="Amharic on one 24 GB GPU").click()
    page.locator("#train-apply-preset").click()
    wait_command(page, "--device cuda")  # a GPU preset (its memory settings come from the memory estimate)
    assert "--amp bf16" in command_text(page)

    page.get_by_text("Save or load the form (YAML)").click()
    page.locator("#train-save-yaml").click()
    page.locator("#train-yaml-file a").first.wait_for(timeout=UI_TIMEOUT_MS)
    partial = scratch / "partial_form.yaml"
    partial.write_text("batch_size: 3\nnot_an_option: 1\n")
    page.locator("#train-load-yaml input[type=file]").set_input_files(str(partial))
    wait_command(page, "--batch-size 3")
    assert "--device cuda" in command_text(page)  # what the file does not mention is kept
    assert "not_an_option" in page.locator("#train-form-message").inner_text()

    page.locator("#train-preset input").click()
    page.get_by_role("option", name="Demo (CPU, tiny)").click()
    page.locator("#train-apply-preset").click()
    wait_command(page, "--device cuda", present=False)
    assert "--device cpu" in command_text(page)

    # Issue 40: the S2Mel preset leaves the demo's warm-up as it is, so that field differs from its default: its
    # closed section opens, counts it in its title, and its small text says what it was changed from.
    assert not section_open(page, "train-group-optimisation")
    choose_preset(page, "S2Mel LoRA (12 GB GPU)")
    page.wait_for_function(
        "() => document.querySelector('#train-group-optimisation button.label-wrap').classList.contains('open')",
        timeout=UI_TIMEOUT_MS)
    assert re.search(r"Optimisation · \d+ changed", page.locator("#train-group-optimisation").inner_text())
    page.wait_for_function(  # the mark follows the fields' change (one refresh after the fill)
        "() => /changed from default/.test(document.getElementById('opt-warmup-steps').innerText)",
        timeout=UI_TIMEOUT_MS)
    assert page.locator("#opt-warmup-steps").is_visible()
    choose_preset(page, "Demo (CPU, tiny)")
    wait_command(page, "--train s2mel", present=False)


@pytest.mark.slow
@pytest.mark.timeout(900)  # 450 s on a quiet 2-core machine; 580 s seen beside busy workers
def test_train_stop_resume_reload_and_restart(page, studio_workspace: Path, artifacts: Path,
                                              tmp_path: Path) -> None:
    _started[0] = time.monotonic()
    output_dir = studio_workspace / "runs" / "demo"
    app = StudioProcess(studio_workspace, tmp_path / "studio-1.log")
    restarted: StudioProcess | None = None
    try:
        app.wait_ready()
        phase("studio ready")
        page.goto(app.url)
        page.get_by_role("tab", name="Training", exact=True).wait_for()
        for name in TABS:  # every one, none optional
            page.get_by_role("tab", name=name, exact=True).wait_for(timeout=UI_TIMEOUT_MS)
        run_data_and_tokenizer_checks(page, artifacts)
        phase("data and tokenizer checked")

        # -- a fresh run: log lines and the loss curve grow ---------------------------------------------
        open_tab(page, "Training")
        exercise_presets_and_yaml(page, tmp_path)
        phase("presets and YAML")
        open_section(page, "train-group-length")
        open_section(page, "train-group-logging")
        fill_number(page, "opt-log-interval", 1)
        fill_number(page, "opt-val-interval", 1000)
        paste_number(page, "opt-save-interval", 2)
        command = page.locator("#train-command textarea")
        wait_command(page, "--save-interval 2")  # a paste updates the preview like typing does
        wait_command(page, "--val-interval 1000")  # each field's preview update may land in either order
        assert str(output_dir) in command.input_value()

        # Fast typing straight into Start (no pause, no blur): the last keystroke is in what starts.
        type_then_start(page, "opt-max-steps", "400")
        wait_log(page, r"^step 2/\d+")
        phase("first run logging")
        # The status shows the command that was started, and the box shows the same command.
        started = page.locator("#train-status-command").inner_text()
        assert "--max-steps 400" in started and "--save-interval 2" in started and "--resume" not in started
        assert started == command.input_value()
        page.locator("#train-start").click()  # a second Start is refused beside the badge, not over it
        page.wait_for_function(
            "() => /in use by a running process/.test(document.querySelector('#train-start-message').innerText)",
            timeout=UI_TIMEOUT_MS)
        assert page.locator("#train-status-line").get_attribute("data-state") == "running"
        points, last = wait_plot_beyond(page, "train-loss-plot", 1)
        assert points >= 2
        more, later = wait_plot_beyond(page, "train-loss-plot", last)
        assert more > points and later > last  # the curve grows while we watch
        page.screenshot(path=str(artifacts / "tab-training-running.png"), full_page=True)

        phase("curves grew")
        open_tab(page, "System")
        page.wait_for_function(
            "() => /running/.test(document.getElementById('system-processes').innerText)", timeout=UI_TIMEOUT_MS)
        page.screenshot(path=str(artifacts / "tab-system.png"), full_page=True)
        open_tab(page, "Training")

        # -- graceful stop: saved at step N ---------------------------------------------------------------
        page.locator("#train-stop").click()
        saved_step = wait_stopped_at(page)
        assert saved_step >= 2 and (output_dir / "latest.pth").is_file()

        phase("stopped")
        # The demo preset gives the run the workspace's vocoder: the model spoke at its saves (step 2 at least).
        page.locator("#train-samples-refresh").click()
        page.wait_for_function(
            "() => /step \\d+: 3 sample\\(s\\)/.test(document.querySelector('#train-samples-note')?.innerText)",
            timeout=UI_TIMEOUT_MS)
        rate, frames = served_audio(page, "train-samples-player-0")
        assert rate == 24000 and frames > 0
        phase("samples play")
        # -- resume: the command says so, and so does the pre-flight -------------------------------------------
        page.locator("#train-resume input").check()
        page.wait_for_function(
            "() => document.querySelector('#train-command textarea').value.includes('--resume auto')")
        page.locator("#train-preflight").click()
        page.wait_for_function(
            "(n) => document.querySelector('#train-preflight-report').innerText.includes('resume from step ' + n)",
            arg=saved_step, timeout=RUN_TIMEOUT_MS)
        assert page.locator("#preflight-verdict").get_attribute("data-ok") == "true"

        phase("pre-flight says resume")
        page.locator("#train-start").click()
        wait_log(page, rf"resumed from \S+ at step {saved_step}\b")
        before_reload = wait_step_after(page, saved_step)
        run_id = page.locator("#train-status-line").get_attribute("data-run")
        assert run_id

        phase("resumed run logging")
        # -- a page reload shows the run's log again, and it keeps going ---------------------------------------
        page.reload()
        open_tab(page, "Training")
        wait_log(page, rf"resumed from \S+ at step {saved_step}\b", UI_TIMEOUT_MS)
        after_reload = wait_step_after(page, before_reload)
        assert after_reload > before_reload

        phase("reload shows the log")
        # -- a restarted UI finds the same run still running -----------------------------------------------------
        app.stop()
        phase("first UI stopped")
        record = read_record(output_dir)
        assert record["run_id"] == run_id and is_process_alive(record["pid"], record["create_time"])
        restarted = StudioProcess(studio_workspace, tmp_path / "studio-2.log")
        restarted.wait_ready()
        phase("second UI ready")
        page.goto(restarted.url)
        open_tab(page, "Training")
        page.locator(f'#train-status-line[data-run="{run_id}"][data-state="running"]').wait_for(
            timeout=UI_TIMEOUT_MS)
        wait_log(page, rf"resumed from \S+ at step {saved_step}\b", UI_TIMEOUT_MS)
        wait_step_after(page, after_reload)
        assert "--resume auto" in page.locator("#train-command textarea").input_value()

        phase("restarted UI reattached")
        page.locator("#train-stop").click()
        assert wait_stopped_at(page) > saved_step
        page.screenshot(path=str(artifacts / "tab-training-stopped.png"), full_page=True)
        open_tab(page, "Checkpoints")
        page.locator("#ckpt-list-run").click()
        page.wait_for_function(
            "() => { const t = document.getElementById('ckpt-list-table').innerText;"
            " return t.includes('latest.pth') && t.includes('COMPLETE'); }", timeout=UI_TIMEOUT_MS)
        page.screenshot(path=str(artifacts / "tab-checkpoints.png"), full_page=True)
    finally:
        page.screenshot(path=str(artifacts / "last-state.png"), full_page=True)
        app.stop()
        if restarted is not None:
            restarted.stop()


def choose_preset(page, name: str) -> None:
    page.locator("#train-preset input").click()
    page.get_by_role("option", name=name, exact=True).click()
    page.locator("#train-apply-preset").click()


def wait_stopped_at(page) -> int:
    """The step a stopped run saved at, read in the same look that saw it (a second read raced a re-render)."""
    seen = page.wait_for_function(
        "() => { const m = /stopped, saved at step (\\d+)/.exec(document.querySelector('#train-status').innerText);"
        " return m && m[1]; }", timeout=RUN_TIMEOUT_MS)
    return int(seen.json_value())


@pytest.mark.slow
def test_indextts2_demo_trains_stops_and_resumes(page, studio_workspace: Path, artifacts: Path,
                                                 tmp_path: Path) -> None:
    """The IndexTTS2 preset: the page names the model, offers what applies, trains, stops, resumes."""
    _started[0] = time.monotonic()
    output_dir = studio_workspace / "v2" / "runs" / "demo"
    app = StudioProcess(studio_workspace, tmp_path / "studio-v2.log")
    try:
        app.wait_ready()
        page.goto(app.url)
        open_tab(page, "Training")
        choose_preset(page, "Demo (IndexTTS2)")
        wait_command(page, str(studio_workspace / "v2" / "data" / "train_pairs.jsonl"))
        badge = page.locator('#train-model-version-badge[data-version="2"]')
        badge.wait_for(timeout=UI_TIMEOUT_MS)
        assert "IndexTTS2 GPT" in badge.inner_text()
        # Issue 40: the first view holds the decisions, a dozen fields at most, and a run starts from it alone.
        assert count_visible_fields(page, "#tab-training") <= 12
        assert str(studio_workspace / "v2" / "data" / "train_pairs.jsonl") in \
            page.locator('#train-data-summary [data-field="train_manifest"]').inner_text()
        fill_number(page, "opt-max-steps", 60)
        wait_command(page, "--max-steps 60")
        assert str(output_dir) in command_text(page) and "--resume" not in command_text(page)
        phase("IndexTTS2 form ready")

        page.locator("#train-start").click()
        wait_log(page, r"^step \d+/\d+")
        assert "IndexTTS2" in log_text(page)  # the trainer says which model it built
        phase("IndexTTS2 run logging")
        page.locator("#train-change-data").click()
        assert "IndexTTS2 paired manifest" in page.locator("#opt-train-manifest").inner_text()
        page.get_by_text("Logging and checkpoints").click()
        assert not page.locator("#opt-vocoder").is_visible()  # options of another generation are hidden
        page.locator("#train-stop").click()  # a stop saves, whatever the save interval
        saved_step = wait_stopped_at(page)
        assert saved_step >= 2 and (output_dir / "latest.pth").is_file()
        phase("stopped")

        page.locator("#train-resume input").check()
        wait_command(page, "--resume auto")
        page.locator("#train-start").click()
        wait_log(page, rf"resumed from \S+ at step {saved_step}\b")
        wait_step_after(page, saved_step)
        page.locator("#train-stop").click()
        assert wait_stopped_at(page) > saved_step
        page.screenshot(path=str(artifacts / "tab-training-indextts2.png"), full_page=True)
        phase("resumed and stopped again")

        open_tab(page, "Checkpoints")
        picker = page.locator("#ckpt-output-dir input")
        picker.fill(str(output_dir))
        picker.press("Enter")
        page.wait_for_function(
            "() => { const t = document.getElementById('ckpt-list-table').innerText;"
            " return t.includes('latest.pth') && t.includes('IndexTTS2'); }", timeout=UI_TIMEOUT_MS)
    finally:
        page.screenshot(path=str(artifacts / "last-state-indextts2.png"), full_page=True)
        app.stop()
