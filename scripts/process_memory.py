"""Memory of a process tree sampled from /proc: the peak of the summed RSS (and of its anonymous part), and a
timeline, for the benchmarks that report peak memory."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path


class TreeMemory:
    """Peak of the summed VmRSS of a process and all its descendants, and of its anonymous part (RssAnon: without
    the pages of memory-mapped files, which the kernel can drop and read again)."""

    def __init__(self, pid: int, interval_s: float = 0.2):
        self.pid, self.peak, self.peak_anon, self.stop = pid, 0, 0, threading.Event()
        self.interval_s, self.started = interval_s, time.perf_counter()
        self.timeline: list[tuple[float, int, int]] = []  # (seconds since start, RSS, anonymous RSS)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(entry))
        tree, todo = [], [self.pid]
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(children.get(pid, []))
        return tree

    def _rss(self, pid: int, field: str = "VmRSS:") -> int:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def _run(self) -> None:
        while not self.stop.is_set():
            tree = self._tree()
            rss, anon = sum(self._rss(p) for p in tree), sum(self._rss(p, "RssAnon:") for p in tree)
            self.peak, self.peak_anon = max(self.peak, rss), max(self.peak_anon, anon)
            self.timeline.append((time.perf_counter() - self.started, rss, anon))
            time.sleep(self.interval_s)

    def finish(self) -> int:
        self.stop.set()
        self.thread.join()
        return self.peak


def reset_peak_rss() -> None:
    """Restart this process's RSS high-water mark (VmHWM) from its current RSS (Linux: /proc/self/clear_refs)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def peak_rss_bytes() -> int:
    """This process's RSS high-water mark since it started or since `reset_peak_rss`: no sampling gap."""
    with open("/proc/self/status") as status:
        return int(re.search(r"VmHWM:\s+(\d+) kB", status.read()).group(1)) * 1024
