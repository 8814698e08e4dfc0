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
The queue is `nmt.serve_scheduler`, the socket and the Host names `nmt.serve_hosts`; this module is the app.
"""


import asyncio
import contextlib
import json
import math
import socket
from importlib import resources
from typing import Callable

from nmt.config import INT64_MAX, DecodeConfig, check_n_best, sampling_overrides
from nmt.constrained_search import MAX_PHRASES
from nmt.data.normalizer import replace_lone_surrogates
from nmt.engine_inputs import (check_target_room, checked_constraints, encode_prefixes, prefix_count, sum_of_lengths,
                               with_overrides)
from nmt.engines import Engine
from nmt.errors import ConfigError, NMTError
from nmt.models.base import AttentionChoice
from nmt.serve_hosts import HostCheck, allowed_hosts, exposure_notice, server_url
from nmt.serve_scheduler import Busy, ClientGone, Limits, Scheduler, request_costs

INSTALL_HINT = "pip install 'nmt[serve]' (or pip install fastapi uvicorn)"


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
        problem = request_shape_problem(request, limits)
        if problem is not None:
            raise HTTPException(status_code=problem[0], detail=problem[1])
        sentences, prefixes, constraints = request.sentences, request.prefixes, request.constraints
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


def request_shape_problem(request, limits: Limits) -> tuple[int, str] | None:
    """(HTTP status, detail) for a request whose lists do not pair up with its sentences, whose texts are too long or
    hold line breaks, or that chooses an attention layer or head without asking for attention; None when none."""
    sentences, prefixes, constraints = request.sentences, request.prefixes, request.constraints
    if prefixes is not None and len(prefixes) != len(sentences):
        return 422, f"{prefix_count(len(prefixes), len(sentences))}: one per sentence (null for none)"
    if constraints is not None and len(constraints) != len(sentences):
        return 422, (f"constraints for {len(constraints)} sentences but {len(sentences)} sentences: a list for each "
                     "([] for none)")
    if any(len(phrases) > MAX_PHRASES for phrases in constraints or []):
        return 422, f"at most {MAX_PHRASES} constraints a sentence"
    for what, texts in (("sentence", sentences), ("prefix", [p or "" for p in prefixes or []]),
                        ("constraint", [c for phrases in constraints or [] for c in phrases])):
        too_long = [i for i, s in enumerate(texts) if len(s) > limits.max_chars]
        if too_long:
            return 413, f"{what} {too_long[0]} is longer than {limits.max_chars} characters"
        if any("\n" in s or "\r" in s for s in texts):
            return 422, f"one {what} per list item: no line breaks inside"
    if not request.attention and (request.layer is not None or request.head is not None):
        # Else the layer or head would be ignored and the answer hold no attention: the client meant to ask for it.
        return 422, '"layer" and "head" choose which attention "attention": true returns: add it'
    return None


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
