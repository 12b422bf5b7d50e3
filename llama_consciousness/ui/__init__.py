"""The ``ui`` command: a local, read-only web page to look into a memory.

``serve(memory)`` starts it on a thread and returns the running :class:`UIServer` (``.url``, ``.stop()``);
``llama-consciousness ui`` serves until Ctrl-C.  Plain HTML, CSS and JavaScript shipped in ``static/``: no
external asset, no build step.
"""

from llama_consciousness.ui.server import UIServer, add_ui_parser, run_ui, serve

__all__ = ["UIServer", "add_ui_parser", "run_ui", "serve"]
