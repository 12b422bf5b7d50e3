"""What a process's first write and first question would otherwise load while a person waits.

Why: the first chat turn of a process took 160 ms where the next took 30 (a BEAM citizen of 300 long
messages, reopened): 90 ms building the tokenizer that counts a rendered context's tokens (tiktoken's
``cl100k_base``, 100,000 entries), 30 ms importing the ingestion modules.  Under a chatbot's load the
first people to speak all waited behind it (issue 40: cold turns at 16 conversations, p95 210-290 ms).

``ConsciousnessMemory(warm_up=True)``, the default, calls :func:`warm_up` when it opens, once per process.
In the opening thread, not beside it: built in a thread of its own, the tokenizer's scratch memory stayed
with that thread's allocator arena (25 MB more resident for the rest of the process), and a first question
asked meanwhile waited for it anyway.
"""

from __future__ import annotations

import importlib
import logging
import threading

log = logging.getLogger(__name__)

MODULES = (
    "llama_consciousness.ingestion.pipeline",
    "llama_consciousness.ingestion.writer",
    "llama_consciousness.ingestion.dedupe",
    "llama_consciousness.ingestion.updates",
)
"""What the first ``ingest`` (a chat turn's ``put_messages``) imports that opening a memory does not."""

_lock = threading.Lock()
_done = False


def warm_up() -> bool:
    """Import :data:`MODULES` and build the token counter (``render.token_counter``), once per process: True
    when this call did it.  Never raises: what failed is loaded (and fails) where it is first used, as it
    would have without the warm-up."""
    global _done
    from llama_consciousness.render import token_counter

    with _lock:
        if _done:
            return False
        _done = True
        for name in MODULES:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - raised again where it is used
                log.debug("warm-up: importing %s failed", name, exc_info=True)
        try:
            token_counter()("warm up")
        except Exception:  # noqa: BLE001 - the first rendered context says what is missing
            log.debug("warm-up: building the token counter failed", exc_info=True)
        return True
