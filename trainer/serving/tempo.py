"""OpenAI's ``speed`` (0.25 to 4.0): the spoken audio made faster or slower at the same pitch, by ffmpeg's
``atempo`` filter through PyAV (each atempo stage takes 0.5 to 2.0; stages chain for the rest)."""

from __future__ import annotations

import numpy as np

SPEED_RANGE = (0.25, 4.0)


def _stages(speed: float) -> list[float]:
    stages = []
    while speed > 2.0:
        stages.append(2.0)
        speed /= 2.0
    while speed < 0.5:
        stages.append(0.5)
        speed /= 0.5
    return [*stages, speed]


def change_speed(wave: np.ndarray, rate: int, speed: float) -> np.ndarray:
    """``wave`` played ``speed`` times as fast (its length divided by ``speed``), pitch kept."""
    if speed == 1.0 or wave.size == 0:
        return wave
    import av

    graph = av.filter.Graph()
    node = graph.add_abuffer(sample_rate=rate, format="flt", layout="mono", channels=1)
    for stage in _stages(speed):
        stretched = graph.add("atempo", f"{stage:.6f}")
        node.link_to(stretched)
        node = stretched
    sink = graph.add("abuffersink")
    node.link_to(sink)
    graph.configure()
    frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(wave, dtype=np.float32).reshape(1, -1), format="flt",
                                       layout="mono")
    frame.sample_rate, frame.pts = rate, 0
    graph.push(frame)
    graph.push(None)
    out = []
    while True:
        try:
            out.append(graph.pull().to_ndarray().reshape(-1))
        except (av.error.EOFError, av.error.BlockingIOError):
            break
    return np.concatenate(out).astype(np.float32) if out else np.zeros(0, dtype=np.float32)
