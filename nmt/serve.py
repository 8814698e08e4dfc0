"""`nmt serve`: a small HTTP service around a Translator (FastAPI + uvicorn, an optional extra).

    POST /translate  {"sentences": [...], "beam": 5, "attention": true, "layer": -1, "head": null}
    GET  /health     model, checkpoint, attention layers and heads, limits
    GET  /           a page: type English, read the French, see the cross-attention heatmap

Concurrent requests are decoded together: a batcher collects what arrives within `batch_window_s` (up to
`max_batch_sentences`) and runs one `translate` per decoding setting on a single worker thread (the model is shared,
and one CPU translation at a time uses every core). Bad input is a 4xx with a message, never a 500.
"""


import asyncio
import contextlib
import threading
from dataclasses import dataclass
from importlib import resources
from typing import Callable

from nmt.errors import NMTError
from nmt.models.base import AttentionChoice
from nmt.translator import Translator

INSTALL_HINT = "pip install 'nmt[serve]' (or pip install fastapi uvicorn)"


@dataclass(frozen=True)
class Limits:
    max_sentences: int = 64  # per request
    max_chars: int = 1000  # per sentence
    max_beam: int = 16
    max_batch_sentences: int = 256  # decoded together across requests
    batch_window_s: float = 0.01  # how long the batcher waits for more requests


@dataclass
class _Job:
    sentences: list[str]
    beam: int
    attention: AttentionChoice | None
    future: asyncio.Future


class Batcher:
    """Queues jobs from concurrent requests and translates them in batches on one worker thread."""

    def __init__(self, translator: Translator, limits: Limits):
        self.translator, self.limits = translator, limits
        self.queue: asyncio.Queue = asyncio.Queue()
        self.lock = threading.Lock()
        self.batches_run = 0  # for tests and /health: how many translate calls served the requests
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def submit(self, sentences: list[str], beam: int, attention: AttentionChoice | None):
        future = asyncio.get_running_loop().create_future()
        await self.queue.put(_Job(sentences, beam, attention, future))
        return await future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            jobs = [await self.queue.get()]
            deadline = loop.time() + self.limits.batch_window_s
            while sum(len(j.sentences) for j in jobs) < self.limits.max_batch_sentences:
                try:
                    jobs.append(await asyncio.wait_for(self.queue.get(), max(0.0, deadline - loop.time())))
                except asyncio.TimeoutError:
                    break
            groups: dict[tuple, list[_Job]] = {}
            for job in jobs:  # one translate per decoding setting
                groups.setdefault((job.beam, job.attention), []).append(job)
            for (beam, attention), group in groups.items():
                sentences = [s for job in group for s in job.sentences]
                try:
                    results = await loop.run_in_executor(None, self._translate, sentences, beam, attention)
                except Exception as err:  # noqa: BLE001 - handed to the waiting requests, not lost here
                    for job in group:
                        if not job.future.done():
                            job.future.set_exception(err)
                    continue
                start = 0
                for job in group:
                    if not job.future.done():
                        job.future.set_result(results[start:start + len(job.sentences)])
                    start += len(job.sentences)

    def _translate(self, sentences, beam, attention):
        with self.lock:
            self.batches_run += 1
            return self.translator.translate(sentences, beam_size=beam, attention=attention)


def create_app(translator: Translator, limits: Limits = Limits()):
    try:
        from fastapi import FastAPI, HTTPException, Request
        from fastapi.responses import HTMLResponse, JSONResponse
        from pydantic import BaseModel, Field
    except ImportError:
        raise NMTError(f"the server needs FastAPI: {INSTALL_HINT}") from None

    class TranslateRequest(BaseModel):
        sentences: list[str] = Field(min_length=1, max_length=limits.max_sentences)
        beam: int | None = Field(default=None, ge=1, le=limits.max_beam)
        attention: bool = False
        layer: int = -1
        head: int | None = Field(default=None, ge=0)

    model = translator.model
    layers, heads = model.attention_layers_heads
    batcher = Batcher(translator, limits)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        batcher.start()  # inside the server's event loop
        yield

    app = FastAPI(title="nmt", description="English → French translation", docs_url="/docs", lifespan=lifespan)
    app.state.batcher = batcher

    @app.exception_handler(NMTError)
    async def user_error(request: Request, err: NMTError):
        return JSONResponse(status_code=400, content={"detail": str(err)})

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", "architecture": type(model).__name__.lower(),
                "checkpoint": str(translator.checkpoint) if translator.checkpoint else None,
                "attention_layers": layers, "attention_heads": heads, "beam": translator.decode.beam_size,
                "limits": limits.__dict__}

    @app.post("/translate")
    async def translate(request: TranslateRequest) -> dict:
        too_long = [i for i, s in enumerate(request.sentences) if len(s) > limits.max_chars]
        if too_long:
            raise HTTPException(status_code=413, detail=f"sentence {too_long[0]} is longer than "
                                                        f"{limits.max_chars} characters")
        if any("\n" in s or "\r" in s for s in request.sentences):
            raise HTTPException(status_code=422, detail="one sentence per list item: no line breaks inside")
        choice = None
        if request.attention and model.has_attention:
            choice = AttentionChoice(request.layer, request.head)
            model.check_attention_choice(choice)  # NMTError → 400
        beam = request.beam or translator.decode.beam_size
        results = await batcher.submit(request.sentences, beam, choice)
        return {"translations": [_as_json(r, choice is not None) for r in results], "beam": beam,
                "attention_layer": request.layer if choice else None, "attention_head": request.head}

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        return resources.files("nmt").joinpath("static/index.html").read_text(encoding="utf-8")

    return app


def _as_json(result, with_attention: bool) -> dict:
    item = {"source": result.source, "text": result.text}
    if with_attention and result.attention is not None:
        item.update(source_pieces=result.source_pieces, target_pieces=result.target_pieces,
                    attention=[[round(float(w), 4) for w in row] for row in result.attention.tolist()])
    return item


def run_server(translator: Translator, host: str, port: int, log: Callable[[str], None] = print) -> None:
    try:
        import uvicorn
    except ImportError:
        raise NMTError(f"the server needs uvicorn: {INSTALL_HINT}") from None
    app = create_app(translator)
    log(f"serving {translator.checkpoint} on http://{host}:{port}/ (Ctrl-C stops)")
    uvicorn.run(app, host=host, port=port, log_level="warning")
