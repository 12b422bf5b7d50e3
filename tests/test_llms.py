"""The OpenAI path: ``llms.resolve_llm`` and the LLM entity extractor in ingestion, with a scripted LLM."""

from __future__ import annotations

import importlib.util
import json

import pytest
from llm_builders import FixedLLM

from llama_consciousness.cli import main
from llama_consciousness.ingestion.llm_judge import LLMUpdateJudge, UpdateJudgeError
from llama_consciousness.llms import LLMUnavailableError, resolve_llm
from llama_consciousness.schema import MemoryNode
from llama_consciousness.storage.level_store import NODE_LABEL

try:
    HAS_OPENAI = importlib.util.find_spec("llama_index.llms.openai") is not None
except ModuleNotFoundError:  # not even llama_index.llms
    HAS_OPENAI = False


def _entities(prompt: str) -> str:
    """A text about quokkas names Quokka Labs (the memory's text, not the prompt's example)."""
    text = prompt.split("Answer with")[0]
    return json.dumps([{"name": "Quokka Labs", "type": "Organization"}] if "quokka" in text.lower() else [])


def test_resolve_llm_without_a_key_stays_offline(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    scripted = FixedLLM()
    assert resolve_llm(None) is None and resolve_llm(scripted) is scripted
    assert resolve_llm("auto") is None
    with pytest.raises(LLMUnavailableError, match="OPENAI_API_KEY"):
        resolve_llm("openai")
    with pytest.raises(ValueError, match="unknown LLM"):
        resolve_llm("claude")
    with pytest.raises(TypeError):
        resolve_llm(42)
    with pytest.raises(UpdateJudgeError, match="OPENAI_API_KEY"):
        LLMUpdateJudge()


def test_with_a_key_openai_is_used_or_the_missing_extra_is_named(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    if HAS_OPENAI:  # the openai extra installed: a real client, never called here
        llm = resolve_llm("openai:gpt-4o-mini")
        assert type(llm).__name__ == "OpenAI" and llm.model == "gpt-4o-mini" and llm.timeout == 60.0
        assert resolve_llm("auto") is not None
    else:
        with pytest.raises(LLMUnavailableError, match=r"llama-consciousness\[openai\]"):
            resolve_llm("openai")
        assert resolve_llm("auto") is None  # offline, as without a key


def test_ingestion_extracts_entities_with_the_llm(memory, citizen, tmp_path) -> None:
    llm = FixedLLM(script=_entities, prompts=[])
    memory.ingest([MemoryNode(node_id="q1", level="N1", citizen_id=citizen, name="Partner call",
                              description="we signed the contract with the quokka team", energy=0.6,
                              confidence=0.8)], entity_llm=llm)
    assert any("quokka" in p for p in llm.prompts)
    names = {r[0] for r in memory.level("N1", citizen).graph.query(
        f"MATCH (n:{NODE_LABEL}) WHERE n.is_entity RETURN n.name").result_set}
    assert "Quokka Labs" in names  # the LLM's entity, which the offline extractor would not name


def test_cli_refuses_an_unavailable_llm_in_one_line(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = tmp_path / "m.jsonl"
    path.write_text("{}\n")
    assert main(["ingest", str(path), "--data-dir", str(tmp_path / "d"), "--entity-llm", "openai"]) == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err
