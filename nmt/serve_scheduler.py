"""`nmt serve`'s queue: requests priced before they are queued, cut into chunks, and decoded on one worker thread
in batches filled round-robin over the waiting requests, so that a small request waits for at most one chunk of a
big one; a chunk that fails is retried alone, and a request whose client has gone stops being decoded."""

import asyncio
import contextlib
import dataclasses
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from nmt.config import DecodeConfig
from nmt.engines import Engine
from nmt.models.base import AttentionChoice
from nmt.search import SearchCancelled


@dataclass(frozen=True)
class Limits:
    max_sentences: int = 64  # per request
    max_chars: int = 1000  # per sentence
    max_beam: int = 16
    # Per request: sum over sentences of (source pieces + EOS) × beam. 4,096 admits the page's worst case (one
    # 1,000-character sentence, at most 256 pieces, at beam 16) and 64 ten-piece sentences at beam 5 (3,520);
    # 64 × 1,000 characters at beam 16 (~260,000) is refused (scripts/bench_serve.py measures the rest).
    max_request_cost: int = 4096
    refusal_delay_s: float = 1.0  # before a 413 for cost: slows a client that resends the same refused request
    max_chunk_cost: int = 1024  # per piece of a request decoded at once: bounds how long others wait behind it
    max_batch_sentences: int = 256  # decoded together across requests
    batch_window_s: float = 0.01  # how long the scheduler waits for more requests
    # A request body past this is a 413 before it is held in memory (unbounded, 200 MB of JSON took the server from
    # 0.33 to 0.89 GB). The largest valid request, 64 sentences of 1,000 characters all written as \uXXXX surrogate
    # pairs (12 bytes each), is ~770 kB.
    max_body_bytes: int = 1 << 20
    # Past this many seconds of queued work (the queue's cost over the rate recent batches decoded at), a request is
    # a 503 with Retry-After instead of a wait its client would likely give up on (and resend): under a flood the
    # server stays answerable and a load balancer can send the rest elsewhere.
    max_backlog_s: float = 30.0
    # How often a waiting request checks that its client is still there (a gone client's chunks are not decoded).
    disconnect_poll_s: float = 0.25


@dataclass
class _Job:
    """One request: its sentences cut into chunks; results fill in as chunks are decoded."""

    chunks: deque  # of (start index, (sentence, prefix or None, phrases) triples, cost)
    decode: DecodeConfig  # the engine's, with what the request changed (its beam, sampler, ...)
    n_best: int
    attention: AttentionChoice | None
    future: asyncio.Future
    results: list = field(default_factory=list)
    gone: threading.Event = field(default_factory=threading.Event)  # its client hung up (read by the worker)


def chunk_sentences(sentences: list, costs: list[int], max_chunk_cost: int) -> deque:
    """Consecutive runs of sentences (or any items) whose cost stays within `max_chunk_cost` (at least one each)."""
    chunks, start, total = deque(), 0, 0
    for i, cost in enumerate(costs):
        if i > start and total + cost > max_chunk_cost:
            chunks.append((start, sentences[start:i], total))
            start, total = i, 0
        total += cost
    if start < len(sentences):
        chunks.append((start, sentences[start:], total))
    return chunks


class Busy(Exception):
    """The queue holds more work than `Limits.max_backlog_s`: the request is refused (503), not queued."""

    def __init__(self, backlog_s: float):
        super().__init__(f"server busy: {backlog_s:.0f} s of translation queued; retry later")
        self.retry_after_s = max(1, math.ceil(backlog_s))


class ClientGone(Exception):
    """The client hung up before its translations were ready: its request left the queue."""


class Scheduler:
    """Queues requests and decodes them on one worker thread in batches filled round-robin, one chunk per request
    per turn (the model is shared, and one CPU translation at a time uses every core)."""

    def __init__(self, engine: Engine, limits: Limits):
        self.engine, self.limits = engine, limits
        self.waiting: deque[_Job] = deque()
        self.wakeup: asyncio.Event | None = None
        self.lock = threading.Lock()
        self.batches_run = 0  # for tests and /health: how many translate calls served the requests
        self.abandoned = 0  # requests that left the queue because their client hung up
        self.task: asyncio.Task | None = None
        self.recent = deque(maxlen=32)  # (cost, seconds) of the latest decoding batches: the rate the backlog takes

    def backlog_s(self) -> float:
        """Seconds the queued chunks would take at the recent cost-weighted decoding rate (0 before any batch)."""
        seconds = sum(s for _, s in self.recent)
        if not self.waiting or seconds <= 0:
            return 0.0
        rate = sum(c for c, _ in self.recent) / seconds
        return sum(cost for job in self.waiting for _, _, cost in job.chunks) / rate

    def start(self) -> None:
        self.wakeup = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def submit(self, sentences: list[str], costs: list[int], decode: DecodeConfig,
                     attention: AttentionChoice | None,
                     n_best: int = 1, gone: Callable[[], Awaitable[bool]] | None = None,
                     prefixes: list[str | None] | None = None, constraints: list[list[str]] | None = None):
        """The request's translations once every chunk is decoded (each starting with its sentence's prefix, if
        any, and holding its constraint phrases). `gone` says whether the client has hung up: then the request
        leaves the queue, a batch decoding only for gone clients stops at its next step, and ClientGone is raised."""
        backlog = self.backlog_s()
        if backlog > self.limits.max_backlog_s:
            raise Busy(backlog)
        items = list(zip(sentences, prefixes or [None] * len(sentences), constraints or [[]] * len(sentences)))
        job = _Job(chunk_sentences(items, costs, self.limits.max_chunk_cost), decode, n_best, attention,
                   asyncio.get_running_loop().create_future(), [None] * len(sentences))
        self.waiting.append(job)
        self.wakeup.set()
        while gone is not None:
            finished, _ = await asyncio.wait({job.future}, timeout=self.limits.disconnect_poll_s)
            if finished:
                break
            if await gone():
                self._abandon(job)
                raise ClientGone()
        return await job.future

    def _abandon(self, job: _Job) -> None:
        job.gone.set()
        self.abandoned += 1
        with contextlib.suppress(ValueError):
            self.waiting.remove(job)
        job.future.cancel()

    def _next_batch(self) -> list[tuple[_Job, tuple]]:
        """One round: the next chunk of every waiting request, in turn, until the batch is full. A request with
        chunks left goes to the back of the line; one whose client has gone is dropped."""
        batch, sentences = [], 0
        for _ in range(len(self.waiting)):
            if sentences >= self.limits.max_batch_sentences:
                break
            job = self.waiting.popleft()
            if job.future.done():
                continue
            chunk = job.chunks.popleft()
            batch.append((job, chunk))
            sentences += len(chunk[1])
            if job.chunks:
                self.waiting.append(job)
        return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self.waiting:
                self.wakeup.clear()
                await self.wakeup.wait()
                await asyncio.sleep(self.limits.batch_window_s)  # let concurrent requests join this batch
            batch = self._next_batch()
            groups: dict[tuple, list] = {}
            for job, chunk in batch:  # one translate per decoding setting
                key = (dataclasses.astuple(job.decode), job.n_best, job.attention)
                groups.setdefault(key, []).append((job, chunk))
            for members in groups.values():
                job = members[0][0]
                await self._decode(loop, members, job.decode, job.n_best, job.attention)

    async def _decode(self, loop, members: list, decode: DecodeConfig, n_best: int,
                      attention: AttentionChoice | None) -> None:
        items = [item for _, (_, chunk, _) in members for item in chunk]
        started = time.perf_counter()
        jobs = [job for job, _ in members]
        try:
            results = await loop.run_in_executor(None, self._translate, items, decode, n_best, attention,
                                                 lambda: all(job.gone.is_set() for job in jobs))
            self.recent.append((sum(cost for _, (_, _, cost) in members), time.perf_counter() - started))
        except SearchCancelled:  # every client of the batch hung up while it was decoding: stopped part way
            return
        except Exception as err:  # noqa: BLE001 - isolate: retry each chunk alone, fail only its own request
            if len(members) > 1:
                for member in members:
                    await self._decode(loop, [member], decode, n_best, attention)
                return
            job = members[0][0]
            self._fail(job, err)
            return
        offset = 0
        for job, (start, chunk, _) in members:
            job.results[start:start + len(chunk)] = results[offset:offset + len(chunk)]
            offset += len(chunk)
            if not job.chunks and not job.future.done():
                job.future.set_result(job.results)

    def _fail(self, job: _Job, err: Exception) -> None:
        with contextlib.suppress(ValueError):
            self.waiting.remove(job)
        if not job.future.done():
            job.future.set_exception(err)

    def _translate(self, items, decode, n_best, attention, cancelled):
        sentences, prefixes, phrases = (list(column) for column in zip(*items))
        with self.lock:
            self.batches_run += 1
            return self.engine.translate(sentences, attention=attention, n_best=n_best, cancelled=cancelled,
                                         prefixes=prefixes if any(prefixes) else None, decode=decode,
                                         constraints=phrases if any(phrases) else None)


def request_costs(engine: Engine, sentences: list[str], rows: int, budget: int,
                  prefixes: list[str | None] | None = None,
                  constraint_pieces: list[int] | None = None) -> list[int] | None:
    """Each sentence's cost ((source + prefix + constraint pieces) × its rows: the beam, or the draws when sampling;
    a forced prefix is decoded a step a piece, and constraints lengthen the search by theirs), or None as soon as the
    total passes `budget`: a refused request costs the server a few tokenizations, not one per sentence (a client
    looping on refusals must stay cheap)."""
    costs, total = [], 0
    for sentence, prefix, held in zip(sentences, prefixes or [None] * len(sentences),
                                      constraint_pieces or [0] * len(sentences)):
        costs.append((engine.count_pieces(sentence, prefix) + held) * rows)
        total += costs[-1]
        if total > budget:
            return None
    return costs
