"""Batches built ahead: a background thread plans and collates the next updates while the device runs this one."""

from __future__ import annotations

import queue
import threading
from typing import Callable, Generic, Iterable, Iterator, TypeVar

Plan = TypeVar("Plan")
Built = TypeVar("Built")

_END = object()


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


class Prefetcher(Generic[Plan, Built]):
    """Iterates `(plan, build(plan))` for each plan of `plans`, with planning and building done on one background
    thread up to `depth` items ahead, so the training loop finds its next batches ready.

    Order and content are exactly those of the plain loop (one thread, in order), so runs stay deterministic and
    exact resume is unchanged. An error while planning or building is raised in the consumer at the item where it
    happened. Use as a context manager: leaving it (early stop, an error, Ctrl-C) stops the thread.
    """

    def __init__(self, plans: Iterable[Plan], build: Callable[[Plan], Built], depth: int = 2):
        self._plans, self._build = plans, build
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._work, name="batch-prefetch", daemon=True)

    def __enter__(self) -> "Prefetcher[Plan, Built]":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _put(self, item: object) -> bool:
        """Hand `item` over, giving up when the consumer has gone (it would never take it)."""
        while not self._stopping.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _work(self) -> None:
        try:
            for plan in self._plans:
                if not self._put((plan, self._build(plan))):
                    return
        except BaseException as err:  # noqa: BLE001 - raised in the consumer
            self._put(_Failure(err))
            return
        self._put(_END)

    def __iter__(self) -> Iterator[tuple[Plan, Built]]:
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item

    def close(self) -> None:
        self._stopping.set()
        if self._thread.ident is not None:  # started
            self._thread.join()
