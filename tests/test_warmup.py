"""``warm_up``: opening a memory loads what a process's first write and first question would load."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from llama_consciousness import warmup

_PROBE = textwrap.dedent("""
    import sys
    from llama_consciousness import ConsciousnessMemory

    directory, warm = sys.argv[1], sys.argv[2] == "on"
    with ConsciousnessMemory(data_dir=directory, warm_up=warm):
        import tiktoken.registry
        loaded = [name for name in ("llama_consciousness.ingestion.pipeline", "llama_consciousness.ingestion.writer")
                  if name in sys.modules]
        print(len(loaded), "cl100k_base" in tiktoken.registry.ENCODINGS)
""")


@pytest.mark.parametrize("warm, expected", [("on", "2 True"), ("off", "0 False")])
def test_a_fresh_process_opens_with_the_first_turns_modules_and_tokenizer_loaded(memory, warm, expected) -> None:
    """In a process of its own (this one has loaded everything already), on the session's server."""
    done = subprocess.run([sys.executable, "-c", _PROBE, str(memory.data_dir), warm],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


def test_warm_up_runs_once_per_process_and_never_raises(monkeypatch) -> None:
    monkeypatch.setattr(warmup, "_done", False)
    monkeypatch.setattr(warmup, "MODULES", ("llama_consciousness.no_such_module", *warmup.MODULES))
    assert warmup.warm_up() is True  # the missing module is logged, the rest loaded
    assert "llama_consciousness.ingestion.pipeline" in sys.modules
    assert warmup.warm_up() is False
