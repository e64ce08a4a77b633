"""Random bytes from the OS's CSPRNG, read for many values at a time: one system call
per Message-ID or GID cost as much as the rest of a publish (and 14% of a replay)."""

from __future__ import annotations

import os


class RandomPool:
    """Values of `size` random bytes, read `batch` at a time."""

    def __init__(self, size: int, batch: int = 512) -> None:
        self.size = size
        self.batch = batch
        self._pool: list[bytes] = []

    def take(self) -> bytes:
        """Fresh CSPRNG output, never handed out twice."""
        while True:
            try:
                return self._pool.pop()  # atomic under the GIL: no lock on the hot path
            except IndexError:
                # Threads that find the pool empty together each add a batch: every value
                # is still fresh output used once, so no lock is needed.
                raw = os.urandom(self.size * self.batch)
                self._pool.extend(raw[i : i + self.size] for i in range(0, len(raw), self.size))
