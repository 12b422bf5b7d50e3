"""A local, read-only web inspector of a memory: the consciousness stream of a question, a memory's versions
as a timeline, a citizen's state over time.

The page (``static/``: plain HTML, CSS and JavaScript, nothing fetched from elsewhere) reads a small JSON API:

* ``GET /api/overview``: the levels and the citizens (``inspection.overview``), the temporal modes;
* ``GET /api/stream?citizen=&q=&mode=&levels=N1,N2,N3[&as_of=&range_start=&range_end=&budget=&k=]``: the whole
  ``ConsciousnessStream`` of the question and its rendered LLM context (``render.render_stream``);
* ``GET /api/memory?id=&level=[&citizen=]``: one memory with its versions (``inspection.memory_history``);
* ``GET /api/state?citizen=``: a citizen's state versions (``inspection.state_history``);
* ``GET /api/find?text=&level=[&citizen=]``: memories whose name or text contains ``text``.

GET (and HEAD) only; bad input is a JSON error (400, 404 for an unknown citizen or memory), never a traceback.
Every response carries a Content-Security-Policy that allows only the page's own files, and the page inserts
every text that comes from a memory as text, never as markup.  Bound to 127.0.0.1 by default; a request whose
``Host`` is not the address served (a DNS-rebinding page) is refused.

Only the standard library here: the memory modules are imported when a request needs them.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import socket
import socketserver
import sys
import threading
import time
from datetime import datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from llama_consciousness.memory import ConsciousnessMemory

__all__ = ["CSP", "UIServer", "add_ui_parser", "run_ui", "serve"]

logger = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent / "static"
CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:"
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
# path -> (file in static/, content type)
STATIC_ROUTES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
}
LEVELS = ("N1", "N2", "N3")
DEFAULT_BUDGET = 4000
MAX_BUDGET = 200_000
MAX_PARAMS = 32
LOCAL_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})


class BadRequest(ValueError):
    """Bad input: a 400 with its message."""


class NotFound(LookupError):
    """Nothing by that name: a 404 with its message."""


# -- parameters -----------------------------------------------------------------------------------------


def _one(params: dict[str, list[str]], name: str, default: str | None = None, *, required: bool = False) -> str | None:
    values = params.get(name)
    if not values:
        if required:
            raise BadRequest(f"missing parameter {name!r}")
        return default
    if len(values) > 1:
        raise BadRequest(f"parameter {name!r} given {len(values)} times")
    value = values[0].strip()
    if not value:
        if required:
            raise BadRequest(f"parameter {name!r} is empty")
        return default
    return value


def _int(params: dict[str, list[str]], name: str, default: int | None, low: int, high: int) -> int | None:
    text = _one(params, name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"parameter {name!r} must be an integer, got {text!r}") from None
    if not low <= value <= high:
        raise BadRequest(f"parameter {name!r} must be between {low} and {high}, got {value}")
    return value


def _time(params: dict[str, list[str]], name: str) -> datetime | None:
    from llama_consciousness.schema._time import parse_time

    text = _one(params, name)
    if text is None:
        return None
    at = parse_time(text)
    if at is None:
        raise BadRequest(f"parameter {name!r} is not an ISO-8601 time: {text!r} (e.g. 2025-09-10 or "
                         "2025-09-10T12:00:00Z)")
    return at


def _level(params: dict[str, list[str]], name: str = "level") -> str:
    level = _one(params, name, required=True)
    if level not in LEVELS:
        raise BadRequest(f"unknown level {level!r}; expected one of {', '.join(LEVELS)}")
    return level


def _levels(params: dict[str, list[str]]) -> list[str]:
    text = _one(params, "levels", ",".join(LEVELS))
    levels = [part.strip() for part in text.split(",") if part.strip()]
    if not levels:
        raise BadRequest("parameter 'levels' names no level")
    for level in levels:
        if level not in LEVELS:
            raise BadRequest(f"unknown level {level!r} in 'levels'; expected a comma-separated subset of N1,N2,N3")
    return list(dict.fromkeys(levels))


def _citizen_id(params: dict[str, list[str]], *, required: bool = True) -> str | None:
    from llama_consciousness.schema.common import validate_citizen_id

    citizen = _one(params, "citizen", required=required)
    if citizen is None:
        return None
    try:
        return validate_citizen_id(citizen)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def _known_citizen(memory: ConsciousnessMemory, citizen: str) -> str:
    if citizen not in memory.citizens():
        raise NotFound(f"unknown citizen {citizen!r}: no N1 memory of that citizen")
    return citizen


def _existing_graph(memory: ConsciousnessMemory, level: str, citizen: str | None) -> None:
    if level == "N1":
        if citizen is None:
            raise BadRequest("level N1 is personal: parameter 'citizen' is required")
        _known_citizen(memory, citizen)
    elif memory.plans(level).graph not in memory.graphs():
        raise NotFound(f"level {level} holds no memory yet")


# -- the API ---------------------------------------------------------------------------------------------


def api_overview(memory: ConsciousnessMemory, params: dict[str, list[str]]) -> dict[str, Any]:
    from llama_consciousness.ingestion.loader import DEMO_QUERY
    from llama_consciousness.inspection import overview
    from llama_consciousness.temporal import TEMPORAL_MODES

    return {**overview(memory), "modes": list(TEMPORAL_MODES), "all_levels": list(LEVELS),
            "demo_query": DEMO_QUERY, "default_budget": DEFAULT_BUDGET}


def api_stream(memory: ConsciousnessMemory, params: dict[str, list[str]]) -> dict[str, Any]:
    from pydantic import ValidationError

    from llama_consciousness.render import render_stream
    from llama_consciousness.schema import RetrievalIntention
    from llama_consciousness.schema.common import MAX_RESULTS_PER_LEVEL
    from llama_consciousness.temporal import TEMPORAL_MODES

    citizen = _citizen_id(params)
    query = _one(params, "q", required=True)
    mode = _one(params, "mode", "current")
    if mode not in TEMPORAL_MODES:
        raise BadRequest(f"unknown temporal mode {mode!r}; expected one of {', '.join(TEMPORAL_MODES)}")
    levels = _levels(params)
    if "N1" in levels:
        _known_citizen(memory, citizen)
    budget = _int(params, "budget", DEFAULT_BUDGET, 1, MAX_BUDGET)
    k = _int(params, "k", None, 1, MAX_RESULTS_PER_LEVEL)
    fields: dict[str, Any] = {"query_text": query, "citizen_id": citizen, "temporal_mode": mode, "query_levels": levels,
                              "as_of_time": _time(params, "as_of"), "time_range_start": _time(params, "range_start"),
                              "time_range_end": _time(params, "range_end")}
    if k is not None:
        fields["max_results_per_level"] = k
    try:
        intention = RetrievalIntention(**fields)
    except ValidationError as exc:
        raise BadRequest("; ".join(_validation_message(e) for e in exc.errors())) from None
    started = time.perf_counter()
    stream = memory.retrieve_stream(intention)
    elapsed_ms = (time.perf_counter() - started) * 1000
    context = render_stream(stream, budget)
    return {
        "request": {"citizen": citizen, "q": intention.query_text, "mode": mode, "levels": levels, "budget": budget,
                    "as_of": _iso(intention.as_of_time), "range_start": _iso(intention.time_range_start),
                    "range_end": _iso(intention.time_range_end)},
        "elapsed_ms": round(elapsed_ms, 1),
        "stream": stream.model_dump(mode="json", exclude=_EMBEDDINGS),
        "context": {"text": context.text, "tokens": context.tokens, "budget": context.budget,
                    "included": context.included, "left_out": context.left_out},
    }


# retrieved nodes carry no embedding, but never send one if they did
_EMBEDDINGS = {
    "levels": {"__all__": {part: {"__all__": {"embedding"}}
                           for part in ("vector_results", "graph_results", "keyword_results")}},
    "activation_tiers": {"__all__": {"__all__": {"embedding"}}},
}


def _validation_message(error: dict[str, Any]) -> str:
    where = ".".join(str(part) for part in error.get("loc", ()))
    message = str(error.get("msg", "invalid"))
    return f"{where}: {message}" if where else message


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def api_memory(memory: ConsciousnessMemory, params: dict[str, list[str]]) -> dict[str, Any]:
    from llama_consciousness.inspection import memory_history

    node_id = _one(params, "id", required=True)
    level = _level(params)
    citizen = _citizen_id(params) if level == "N1" else None  # N2 and N3 are shared: no citizen
    _existing_graph(memory, level, citizen)
    try:
        return memory_history(memory, node_id, level, citizen)
    except LookupError as exc:
        if isinstance(exc, (KeyError, IndexError)):
            raise  # a bug, not a missing memory
        raise NotFound(str(exc)) from None


def api_state(memory: ConsciousnessMemory, params: dict[str, list[str]]) -> dict[str, Any]:
    from llama_consciousness.inspection import state_history

    citizen = _known_citizen(memory, _citizen_id(params))
    current = memory.citizen_state(citizen)
    return {"citizen": citizen, "versions": state_history(memory, citizen),
            "current": current.model_dump(mode="json") if current else None}


def api_find(memory: ConsciousnessMemory, params: dict[str, list[str]]) -> dict[str, Any]:
    from llama_consciousness.inspection import find_memories

    text = _one(params, "text", "") or ""
    level = _level(params)
    citizen = _citizen_id(params) if level == "N1" else None
    _existing_graph(memory, level, citizen)
    limit = _int(params, "limit", 20, 1, 200)
    return {"level": level, "citizen": citizen, "text": text,
            "memories": find_memories(memory, text, level, citizen, limit=limit)}


API: dict[str, Callable[[Any, dict[str, list[str]]], Any]] = {
    "/api/overview": api_overview,
    "/api/stream": api_stream,
    "/api/memory": api_memory,
    "/api/state": api_state,
    "/api/find": api_find,
}


# -- HTTP ------------------------------------------------------------------------------------------------


def _json_bytes(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, default=str, separators=(",", ":")).encode("utf-8")


class _Handler(BaseHTTPRequestHandler):
    """One request; everything it keeps is its own (the memory and the page files are read-only to it)."""

    server: _HTTPServer
    server_version = "llama-consciousness-ui"
    sys_version = ""
    timeout = 60  # a client that stops sending does not keep its thread forever

    def version_string(self) -> str:
        return self.server_version

    def end_headers(self) -> None:
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        if self.server.verbose:
            super().log_message(format, *args)

    def _send(self, status: int, body: bytes, content_type: str, *, head: bool = False,
              extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _send_json(self, status: int, payload: Any, *, head: bool = False, extra: dict[str, str] | None = None) -> None:
        self._send(status, _json_bytes(payload), "application/json; charset=utf-8", head=head, extra=extra)

    def _error(self, status: int, message: str, *, head: bool = False, extra: dict[str, str] | None = None) -> None:
        self._send_json(status, {"error": message, "status": status}, head=head, extra=extra)

    def _host_allowed(self) -> bool:
        if self.server.any_host:
            return True
        host = (self.headers.get("Host") or "").strip().lower()
        if host.startswith("["):
            name = host[: host.find("]") + 1]
        else:
            name = host.rsplit(":", 1)[0] if ":" in host else host
        return name in self.server.allowed_names

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._handle(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._handle(head=True)

    def _refuse_method(self) -> None:
        self._error(HTTPStatus.METHOD_NOT_ALLOWED, f"{self.command} is not allowed: this page is read-only",
                    extra={"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method  # noqa: N815

    def _handle(self, head: bool) -> None:
        try:
            if not self._host_allowed():
                self._error(HTTPStatus.FORBIDDEN, "unexpected Host header", head=head)
                return
            parts = urlsplit(self.path)
            path = parts.path
            if path in STATIC_ROUTES:
                name, content_type = STATIC_ROUTES[path]
                self._send(HTTPStatus.OK, self.server.static[name], content_type, head=head)
                return
            route = API.get(path)
            if route is None:
                self._error(HTTPStatus.NOT_FOUND, f"no such page: {path}", head=head)
                return
            try:
                params = parse_qs(parts.query, keep_blank_values=True, strict_parsing=False,
                                  max_num_fields=MAX_PARAMS, errors="strict")
            except ValueError as exc:
                raise BadRequest(f"bad query string: {exc}") from None
            payload = route(self.server.memory, params)
            self._send_json(HTTPStatus.OK, payload, head=head)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away
        except NotFound as exc:
            self._error(HTTPStatus.NOT_FOUND, str(exc), head=head)
        except ValueError as exc:  # BadRequest, and the library's own checks of what was asked
            self._error(HTTPStatus.BAD_REQUEST, str(exc) or type(exc).__name__, head=head)
        except Exception:
            logger.exception("ui: %s %s failed", self.command, self.path)
            try:
                self._error(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error (details in the server's log)",
                            head=head)
            except OSError:
                pass


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    memory: Any
    static: dict[str, bytes]
    verbose: bool
    any_host: bool
    allowed_names: frozenset[str]

    def server_bind(self) -> None:
        # HTTPServer.server_bind asks DNS for a fully qualified name: not needed, and slow without a network
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = port


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


class UIServer:
    """The inspector on ``host:port`` (port 0: any free one), served on a daemon thread between ``start`` and
    ``stop``; ``url`` is where to point a browser."""

    def __init__(self, memory: ConsciousnessMemory, host: str = "127.0.0.1", port: int = 0, *,
                 verbose: bool = False) -> None:
        host = host.strip("[]")
        server_class = type("_Server", (_HTTPServer,), {"address_family": _family(host)})
        try:
            self.httpd: _HTTPServer = server_class((host, port), _Handler)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        self.httpd.memory = memory
        self.httpd.static = {name: (STATIC_DIR / name).read_bytes() for name, _ in set(STATIC_ROUTES.values())}
        self.httpd.verbose = verbose
        self.httpd.any_host = host in ("", "0.0.0.0", "::")
        bound = str(self.httpd.server_address[0]).lower()
        self.httpd.allowed_names = LOCAL_NAMES | {host.lower(), bound, f"[{bound}]"}
        self.host = host
        self.port: int = self.httpd.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = self.host
        if host in ("", "0.0.0.0"):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        return f"http://[{host}]:{self.port}/" if ":" in host else f"http://{host}:{self.port}/"

    def start(self) -> UIServer:
        if self._thread is None:
            self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                            name=f"llama-consciousness-ui:{self.port}", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket (requests under way finish on their own threads)."""
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self.httpd.server_close()

    def __enter__(self) -> UIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(memory: ConsciousnessMemory, host: str = "127.0.0.1", port: int = 0, *, verbose: bool = False) -> UIServer:
    """Start the inspector on a thread; returns the running :class:`UIServer` (``.url``, ``.stop()``)."""
    return UIServer(memory, host, port, verbose=verbose).start()


# -- the command -----------------------------------------------------------------------------------------


def add_ui_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``ui`` sub-command, on the ``add_subparsers()`` of the ``llama-consciousness`` parser."""
    ui = subparsers.add_parser("ui", help="a local web page to look into the memory (read-only)",
                               description="Serve a read-only web inspector of the memory: ask a question and see "
                                           "the whole consciousness stream (tiers, traversal graph, learning "
                                           "moments, LLM context), a memory's versions, a citizen's state.")
    ui.add_argument("--data-dir", default=None,
                    help="the memory's data directory (default: $LLAMA_CONSCIOUSNESS_HOME)")
    ui.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1: this machine only; the page has no login)")
    ui.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765; 0: any free port)")
    ui.add_argument("--open", action="store_true", help="open the page in a browser")
    ui.add_argument("--embed-model", default=None,
                    help="the embedding the memory was written with: wordllama (default), openai, openai:<model>")
    ui.add_argument("--verbose", action="store_true", help="log every request")
    ui.set_defaults(func=run_ui)
    return ui


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_ui(args: argparse.Namespace) -> int:
    """Open the memory and serve the inspector until Ctrl-C (or SIGTERM)."""
    from llama_consciousness.memory import ConsciousnessMemory

    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be between 0 and 65535, got {args.port}")
    in_main = threading.current_thread() is threading.main_thread()
    previous: Any = None
    if in_main:  # SIGTERM stops the page as Ctrl-C does: a clean stop, exit status 0
        previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        with ConsciousnessMemory(data_dir=args.data_dir, embed_model=getattr(args, "embed_model", None)) as memory:
            try:
                server = UIServer(memory, args.host, args.port, verbose=getattr(args, "verbose", False))
            except OSError as exc:
                raise ValueError(str(exc)) from None
            server.start()
            try:
                print(f"llama-consciousness ui: serving {server.url}  (read-only; Ctrl-C to stop)", flush=True)
                if args.host not in ("127.0.0.1", "localhost", "::1"):
                    print("warning: the page has no login; anyone who can reach "
                          f"{args.host}:{server.port} can read this memory", file=sys.stderr, flush=True)
                if args.open:
                    import webbrowser

                    webbrowser.open(server.url)
                stop = threading.Event()
                while not stop.wait(0.5):
                    pass
            except KeyboardInterrupt:
                print("\nstopped", flush=True)
            finally:
                server.stop()
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)
    return 0
