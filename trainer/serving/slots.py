"""How many requests speak at once, and how many may wait: beyond both, a request is told the server is busy."""

from __future__ import annotations

import threading


class Busy(Exception):
    """No slot now and the queue is full (or the wait ran out): HTTP 503 with this one line."""


class SpeakingSlots:
    """``acquire()`` before answering (raises Busy), ``release()`` once the last byte is sent."""

    def __init__(self, concurrency: int, queue: int, wait_s: float) -> None:
        if concurrency < 1 or queue < 0 or wait_s <= 0:
            raise ValueError("concurrency must be >= 1, queue >= 0 and the wait > 0")
        self.concurrency, self.queue, self.wait_s = concurrency, queue, wait_s
        self._free = threading.Semaphore(concurrency)
        self._lock = threading.Lock()
        self.waiting = 0

    def acquire(self) -> None:
        if self._free.acquire(blocking=False):
            return
        with self._lock:
            if self.waiting >= self.queue:
                raise Busy(f"busy: {self.concurrency} request(s) speaking and {self.waiting} waiting; retry later")
            self.waiting += 1
        try:
            got = self._free.acquire(timeout=self.wait_s)
        finally:
            with self._lock:
                self.waiting -= 1
        if not got:
            raise Busy(f"busy: no free slot within {self.wait_s:.0f} s; retry later")

    def release(self) -> None:
        self._free.release()
