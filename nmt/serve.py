"""`nmt serve`: a small HTTP service around an engine (FastAPI + uvicorn, an optional extra).

    POST /translate  {"sentences": [...], "beam": 5, "n_best": 1, "attention": true, "layer": -1, "head": null,
                      "prefixes": null, "constraints": null, "length_penalty": null, "no_repeat_ngram": null,
                      "sample_topk": null, "sample_topp": null, "temperature": null, "seed": null}
    GET  /health     engine, model, decode settings, attention layers and heads, limits
    GET  /           a page: type a sentence, read the translation, see the cross-attention heatmap

What keeps it standing when a client misbehaves:
- every request is priced before it is queued ((source + prefix + constraint pieces) × beam, or × draws when it
  samples) and refused with 413 past `max_request_cost`;
- a `Scheduler` cuts requests into chunks of at most `max_chunk_cost` and fills each decoding batch round-robin
  over the waiting requests, so a small request waits for at most one chunk of a big one, never for all of it;
- a chunk that fails is retried alone, so one bad sentence fails its own request only (and, being text the
  normalizer makes safe, it should not fail at all);
- a request body past `max_body_bytes` is a 413 before it is held in memory;
- past `max_backlog_s` of queued work (at the rate recent batches decoded), a request is a 503 with Retry-After;
- a request whose client hangs up leaves the queue (checked every `disconnect_poll_s` while it waits), and a batch
  whose clients have all gone stops decoding at its next step: the work of a client that timed out and resent is
  not done twice;
- bad input is a 4xx with a reason (inf/NaN in the JSON included), never a 500; on loopback the Host header must
  name this machine (DNS rebinding), other names only with --allow-host.
"""


import asyncio
import contextlib
import dataclasses
import errno
import ipaddress
import json
import math
import re
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from importlib import resources
from typing import Awaitable, Callable

from nmt.config import INT64_MAX, DecodeConfig, check_n_best, sampling_overrides
from nmt.constrained_search import MAX_PHRASES
from nmt.data.normalizer import replace_lone_surrogates
from nmt.engines import Engine
from nmt.errors import ConfigError, NMTError
from nmt.models.base import AttentionChoice
from nmt.search import SearchCancelled
from nmt.translator import (check_target_room, checked_constraints, encode_prefixes, prefix_count, sum_of_lengths,
                            with_overrides)

INSTALL_HINT = "pip install 'nmt[serve]' (or pip install fastapi uvicorn)"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


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


def request_decode(server: DecodeConfig, request) -> DecodeConfig:
    """The server's decode settings with a request's own (beam, length penalty, no-repeat, the sampler), checked as
    `nmt translate`'s options are: top-p or a temperature asks for sampling, which takes beam 1."""
    overrides = {"beam_size": request.beam, "length_penalty": request.length_penalty,
                 "no_repeat_ngram_size": request.no_repeat_ngram, "sampling_topp": request.sample_topp,
                 "sampling_temperature": request.temperature, "sampling_seed": request.seed,
                 **sampling_overrides(request.sample_topk, request.sample_topp, request.temperature, request.beam)}
    decode = with_overrides(server, overrides)
    if request.seed is not None and not decode.samples:  # as `nmt translate --seed` alone is refused
        raise ConfigError("seed seeds the sampler: add sample_topk (or sample_topp)")
    return decode


def host_of(header: str) -> str:
    """The host name of a Host header, without its port ("[::1]:8000" → "::1")."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


_HOST_NAME = re.compile(r"[a-z0-9._-]+|[0-9a-f:.]+")  # a DNS name or IPv4 address, or an IPv6 address


def allowed_host_name(text: str) -> str:
    """An --allow-host value as a Host header's host compares with it (`host_of`: lower case, no port or brackets):
    `mt.example:8000` and `[::1]` never matched, and every request was refused. A URL or what is no name is an
    error."""
    if "://" in text:
        host = host_of(text.split("://", 1)[1].split("/", 1)[0])
        raise NMTError(f"--allow-host {text!r} is a URL: name its host alone ({host})")
    host = host_of(text)
    if not _HOST_NAME.fullmatch(host):
        raise NMTError(f"--allow-host {text!r} is no host name (e.g. mt.example, 10.0.0.5 or [::1], a port or not)")
    return host


def allowed_hosts(bind_host: str, extra: list[str]) -> set[str] | None:
    """Host names a request may address: on loopback the local names (and `extra`); elsewhere anything, unless
    `extra` names some. None: no check."""
    try:
        loopback = bind_host == "localhost" or ipaddress.ip_address(bind_host).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        return {*LOOPBACK_NAMES, bind_host.lower(), *(h.lower() for h in extra)}
    return {h.lower() for h in extra} or None


def _safe_errors(errors) -> list[dict]:
    """Validation errors without the offending input (it may be inf/NaN, which JSON cannot carry)."""
    return [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
            for e in errors]


class BodyLimit:
    """ASGI middleware: a request body longer than `max_bytes` is answered 413 before more of it is read (by its
    Content-Length, or as it streams in without one); a body within the limit is handed on whole."""

    def __init__(self, app, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await self._refuse(send)
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                return await self._refuse(send)
            more = message.get("more_body", False)
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, send) -> None:
        content = json.dumps({"detail": f"request body over {self.max_bytes:,} bytes"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(content)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": content})


class HostCheck:
    """ASGI middleware: a request whose Host header names none of `hosts` is a 400 (DNS rebinding). Plain ASGI,
    not Starlette's BaseHTTPMiddleware: that one wraps `receive`, and a handler behind it cannot see its client
    hang up (`Request.is_disconnected` stays False)."""

    def __init__(self, app, hosts: set[str]):
        self.app, self.hosts = app, hosts

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            host = host_of(dict(scope["headers"]).get(b"host", b"").decode("latin-1"))
            if host not in self.hosts:
                content = json.dumps({"detail": f"Host {host!r} is not served here (start nmt serve with "
                                                f"--allow-host {host} to accept it)"}).encode()
                await send({"type": "http.response.start", "status": 400,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(content)).encode())]})
                return await send({"type": "http.response.body", "body": content})
        await self.app(scope, receive, send)


def create_app(engine: Engine, limits: Limits = Limits(), hosts: set[str] | None = None):
    try:
        from fastapi import FastAPI, HTTPException, Request
        from fastapi.exceptions import RequestValidationError
        from fastapi.responses import HTMLResponse, JSONResponse, Response
        from pydantic import BaseModel, ConfigDict, Field
    except ImportError:
        raise NMTError(f"the server needs FastAPI: {INSTALL_HINT}") from None

    class TranslateRequest(BaseModel):
        # A misspelt or unsupported field ("beam_size", "length_penalty") is a 422 naming it, not silently ignored,
        # and no value is coerced into another type ("beam": true or "5" is not a beam size).
        model_config = ConfigDict(extra="forbid", strict=True)
        sentences: list[str] = Field(min_length=1, max_length=limits.max_sentences)
        beam: int | None = Field(default=None, ge=1, le=limits.max_beam)
        n_best: int = Field(default=1, ge=1, le=limits.max_beam)  # at most the beam
        attention: bool = False
        layer: int | None = None  # null: the last layer; only beside "attention": true, like `nmt translate`'s
        head: int | None = Field(default=None, ge=0)
        # The start of each translation, in the target language (null: none): the model continues it.
        prefixes: list[str | None] | None = Field(default=None, max_length=limits.max_sentences)
        # Per sentence, target-language phrases its translation must hold, in any order ([]: none; beam search).
        constraints: list[list[str]] | None = Field(default=None, max_length=limits.max_sentences)
        # This request's decode settings beside the beam (null: the server's), named as `nmt translate`'s options.
        # JSON's reader takes NaN and Infinity: refused as what they are, not as "above the maximum".
        length_penalty: float | None = Field(default=None, ge=0.0, le=10.0, allow_inf_nan=False)
        no_repeat_ngram: int | None = Field(default=None, ge=0, le=64)
        sample_topk: int | None = Field(default=None, ge=0, le=1_000_000)
        sample_topp: float | None = Field(default=None, gt=0.0, le=1.0, allow_inf_nan=False)
        temperature: float | None = Field(default=None, gt=0.0, le=100.0, allow_inf_nan=False)
        seed: int | None = Field(default=None, ge=0, le=INT64_MAX)

    layers, heads = engine.attention_layers_heads
    scheduler = Scheduler(engine, limits)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        scheduler.start()  # inside the server's event loop
        yield

    app = FastAPI(title="nmt", description="Neural machine translation", docs_url="/docs", lifespan=lifespan)
    app.state.scheduler = scheduler
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)

    if hosts is not None:
        app.add_middleware(HostCheck, hosts=hosts)

    @app.exception_handler(NMTError)
    async def user_error(request: Request, err: NMTError):
        return JSONResponse(status_code=400, content={"detail": str(err)})

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, err: RequestValidationError):
        return JSONResponse(status_code=422, content={"detail": _safe_errors(err.errors())})

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", **engine.describe(), "has_attention": engine.has_attention,
                "attention_layers": layers, "attention_heads": heads,
                "beam": engine.decode.beam_size, "decode": engine.decode.__dict__, "limits": limits.__dict__,
                "batches_run": scheduler.batches_run, "backlog_s": round(scheduler.backlog_s(), 2),
                "requests_abandoned": scheduler.abandoned,
                # The server log shows the first few cuts; this counts them all (each answer says its own).
                "sources_cut": engine.truncations.count}

    @app.post("/translate")
    async def translate(request: TranslateRequest, http: Request):
        sentences, prefixes, constraints = request.sentences, request.prefixes, request.constraints
        if prefixes is not None and len(prefixes) != len(sentences):
            raise HTTPException(status_code=422, detail=f"{prefix_count(len(prefixes), len(sentences))}: "
                                                        "one per sentence (null for none)")
        if constraints is not None and len(constraints) != len(sentences):
            raise HTTPException(status_code=422, detail=f"constraints for {len(constraints)} sentences but "
                                                        f"{len(sentences)} sentences: a list for each ([] for none)")
        if any(len(phrases) > MAX_PHRASES for phrases in constraints or []):
            raise HTTPException(status_code=422, detail=f"at most {MAX_PHRASES} constraints a sentence")
        for what, texts in (("sentence", sentences), ("prefix", [p or "" for p in prefixes or []]),
                            ("constraint", [c for phrases in constraints or [] for c in phrases])):
            too_long = [i for i, s in enumerate(texts) if len(s) > limits.max_chars]
            if too_long:
                raise HTTPException(status_code=413, detail=f"{what} {too_long[0]} is longer than "
                                                            f"{limits.max_chars} characters")
            if any("\n" in s or "\r" in s for s in texts):
                raise HTTPException(status_code=422, detail=f"one {what} per list item: no line breaks inside")
        if not request.attention and (request.layer is not None or request.head is not None):
            # Else the layer or head would be ignored and the answer hold no attention: the client meant to ask for it.
            raise HTTPException(status_code=422, detail='"layer" and "head" choose which attention "attention": '
                                                        'true returns: add it')
        choice = None
        if request.attention and engine.has_attention:
            choice = AttentionChoice(-1 if request.layer is None else request.layer, request.head)
            engine.check_attention_choice(choice)  # NMTError → 400
        # A prefix the model cannot hold is the request's own fault, named by its place in it (NMTError → 400) before
        # it is queued: in a batch it would fail the batch, which then decodes every other request again alone.
        forced = encode_prefixes(engine.tokenizers, engine.normalizer, prefixes, len(sentences))
        check_target_room(forced, engine.max_target_positions, "prefix")
        decode = request_decode(engine.decode, request)  # ConfigError → 400
        check_n_best(request.n_best, decode)
        if constraints and any(constraints) and engine.name != "nmt":
            raise NMTError("CTranslate2 has no lexically constrained search: this server cannot take constraints")
        phrases = checked_constraints(engine, constraints, len(sentences), forced, decode)  # NMTError → 400
        rows = request.n_best if decode.samples else decode.beam_size
        costs = request_costs(engine, sentences, rows, limits.max_request_cost, prefixes,
                              [sum_of_lengths(p) for p in phrases] if phrases else None)
        if costs is None:
            await asyncio.sleep(limits.refusal_delay_s)  # a client looping on refusals waits, instead of flooding
            raise HTTPException(status_code=413, detail=f"request too costly: over {limits.max_request_cost} source "
                                                        "(prefix, constraint) pieces × beam (or draws); send fewer or "
                                                        "shorter sentences or a smaller beam")
        try:
            results = await scheduler.submit(sentences, costs, decode, choice, request.n_best, http.is_disconnected,
                                             prefixes, constraints if phrases else None)
        except Busy as busy:
            raise HTTPException(status_code=503, detail=str(busy),
                                headers={"Retry-After": str(busy.retry_after_s)}) from None
        except ClientGone:
            return Response(status_code=499)  # nginx's "client closed request": for the logs, nobody reads it
        return {"translations": [_as_json(r, choice is not None, request.n_best > 1) for r in results],
                "beam": decode.beam_size,
                "attention_layer": choice.layer if choice else None, "attention_head": choice.head if choice else None}

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        return resources.files("nmt").joinpath("static/index.html").read_text(encoding="utf-8")

    return app


def _as_json(result, with_attention: bool, with_n_best: bool) -> dict:
    """A translation with its score (what beam search ranks by: the length-normalized log-probability), its
    n-best list when asked for (best first, the translation itself first of all), and its attention."""
    best = result.hypotheses[0] if result.hypotheses else None  # none for an empty sentence: null scores
    item = {"source": replace_lone_surrogates(result.source), "text": result.text,
            "score": _number(best.score if best else None), "log_prob": _number(best.log_prob if best else None),
            "source_cut": result.source_cut}
    if with_n_best:
        item["n_best"] = [{"text": h.text, "score": _number(h.score), "log_prob": _number(h.log_prob)}
                          for h in result.hypotheses]
    if with_attention and result.attention is not None:
        item.update(source_pieces=result.source_pieces, target_pieces=result.target_pieces,
                    attention=[[round(float(w), 4) if math.isfinite(w) else 0.0 for w in row]
                               for row in result.attention.tolist()])
    return item


def _number(value: float | None) -> float | None:
    """A score as JSON can carry it (no inf or NaN)."""
    return round(value, 4) if value is not None and math.isfinite(value) else None


def host_address(host: str) -> str:
    """--host as the socket takes it: an IPv6 address written as URLs write it, in brackets (`[::1]`, as the server's
    own line prints it), loses them; it was "not an address of this machine"."""
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def check_bind_address(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, or one clear error (a bad address, a busy port) before any model loads."""
    if not host.strip():
        raise NMTError(f"--host {host!r} names no address: 0.0.0.0 serves on every interface (:: with IPv6), "
                       "127.0.0.1 on this machine only")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as err:
        raise NMTError(f"cannot serve on {host}: not an address of this machine ({err})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as err:
        sock.close()
        privileged = err.errno == errno.EACCES and 0 < port < 1024
        hint = f" (ports below 1024 are root's: --port {port + 8000 if port < 1000 else 8000})" if privileged else ""
        raise NMTError(f"cannot listen on {host}:{port}: {err.strerror or err}{hint}") from None
    return sock


def exposure_notice(host: str, port: int) -> str | None:
    """What a server bound to every interface should say: other machines reach it, with no authentication, and
    0.0.0.0 is no address to open in a browser. None for a specific address."""
    try:
        everywhere = ipaddress.ip_address(host).is_unspecified
    except ValueError:
        everywhere = host == ""
    if not everywhere:
        return None
    return (f"listening on every interface: any machine that reaches this one can use the server (it has no "
            f"authentication); open {server_url('127.0.0.1', port)} here")


def server_url(host: str, port: int) -> str:
    """The address to open: an IPv6 literal in brackets (http://[::1]:8000/), as URLs write it (RFC 3986), its zone's
    `%` written %25 (RFC 6874)."""
    return f"http://[{host.replace('%', '%25')}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def run_server(engine: Engine, listener: socket.socket, host: str, port: int, allow_host: list[str],
               log: Callable[[str], None] = print) -> None:
    try:
        import uvicorn
    except ImportError:
        raise NMTError(f"the server needs uvicorn: {INSTALL_HINT}") from None
    app = create_app(engine, hosts=allowed_hosts(host, allow_host))
    described = engine.describe()
    log(f"serving {described.get('checkpoint') or described.get('model')} ({engine.name} engine) on "
        f"{server_url(host, port)} (Ctrl-C stops)")
    notice = exposure_notice(host, port)
    if notice:
        log(notice)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listener])
    engine.truncations.summarize()  # the log's "counted, no longer shown" gets its total
