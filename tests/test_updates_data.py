"""The knowledge-update benchmark's generator (benchmarks/updates_data.py): pure, no servers."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

import updates_data as ud  # noqa: E402

NAMED = ("speaker", "other", "person", "city", "company", "car", "phone")


@pytest.fixture(scope="module")
def generated():
    return {split: ud.generate(seed=7, citizens=6, split=split) for split in ud.SPLITS}


def _flat(convs):
    return ([(s.node_id, s.speaker, s.text, s.when, s.batch, s.role) for c in convs for s in c.said],
            [u for c in convs for u in c.updates], [d for c in convs for d in c.distractors])


def test_deterministic_per_seed():
    assert _flat(ud.generate(3, 4, "test")) == _flat(ud.generate(3, 4, "test"))
    assert _flat(ud.generate(3, 4, "test")) != _flat(ud.generate(4, 4, "test"))
    assert _flat(ud.generate(3, 4, "tune")) != _flat(ud.generate(3, 4, "test"))


def test_halves_are_disjoint():
    for name, words in ud.VOCAB.items():
        assert len(set(words)) == len(words), f"{name} has duplicates"
        tune, test = set(ud.half(words, "tune")), set(ud.half(words, "test"))
        assert tune and test and not tune & test, name
    tune_p, test_p = ud.phrasings("tune"), ud.phrasings("test")
    assert tune_p.keys() == test_p.keys()
    for key in tune_p:
        if tune_p[key] or test_p[key]:
            assert tune_p[key] and test_p[key], f"{key}: one half is empty"
        assert not set(tune_p[key]) & set(test_p[key]), key
    for fam in ud.FAMILIES:
        for fld in ud.PHRASING_FIELDS:
            items = getattr(fam, fld)
            assert len(set(items)) == len(items), f"{fam.name}.{fld} has duplicates"
    tune_v, test_v = ud.vocabulary("tune"), ud.vocabulary("test")
    fav_tune = {w for k, v in tune_v.items() if k.startswith("fav:") for w in v}
    fav_test = {w for k, v in test_v.items() if k.startswith("fav:") for w in v}
    assert fav_tune and fav_test and not fav_tune & fav_test
    for ranges in (ud.AGES, ud.TICKETS):
        (_, hi1), (lo2, _) = ranges["tune"], ranges["test"]
        assert hi1 < lo2  # (an age is drawn below its range's top, so age + 1 stays inside)
    assert not set(ud.YEARS["tune"]) & set(ud.YEARS["test"])
    with pytest.raises(ValueError):
        ud.half([1, 2], "all")


def test_generated_text_uses_its_half_only(generated):
    for split, other in (("test", "tune"), ("tune", "test")):
        foreign = [w for name in NAMED for w in ud.half(ud.VOCAB[name], other)]
        foreign += [w for k, v in ud.vocabulary(other).items() if k.startswith("fav:") for w in v]
        pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, foreign)) + r")\b")
        for conv in generated[split]:
            for s in conv.said:
                assert not pattern.search(s.description), (split, s.description)
            for u in conv.updates:
                assert not pattern.search(u.question), (split, u.question)


def test_gold_ids_exist_and_are_ordered(generated):
    for convs in generated.values():
        for conv in convs:
            by_id = conv.by_id()
            assert len(by_id) == len(conv.said), "node ids are unique"
            assert conv.updates and conv.distractors
            arrival = {s.node_id: i for i, s in enumerate(conv.said)}
            for u in conv.updates:
                old, new = by_id[u.old_id], by_id[u.new_id]
                assert old.speaker == new.speaker == u.speaker
                assert old.when < new.when
                assert (old.role, new.role) == ("update_old", "update_new")
                assert u.gold_type in ("reality_changed", "discovered_false")
                assert u.question.endswith("?")
                if u.late:
                    assert old.batch > new.batch and arrival[u.old_id] > arrival[u.new_id]
                else:
                    assert arrival[u.old_id] < arrival[u.new_id]
            descriptions = [s.description for s in conv.said]
            assert len(set(descriptions)) == len(descriptions), "texts unique in a conversation"


def test_distractors_and_fillers_are_never_outdated(generated):
    for convs in generated.values():
        for conv in convs:
            outdated = conv.outdated_ids
            assert outdated == {u.old_id for u in conv.updates}
            for d in conv.distractors:
                assert d.base_id not in outdated and d.other_id not in outdated
                assert d.kind in ud.DISTRACTOR_KINDS
            assert not {u.new_id for u in conv.updates} & outdated
            for s in conv.said:
                assert (s.node_id in outdated) == (s.role == "update_old")


def test_mixture(generated):
    updates = [u for c in generated["test"] for u in c.updates]
    distractors = [d for c in generated["test"] for d in c.distractors]
    assert {u.kind for u in updates} == set(ud.KINDS)
    assert {u.gold_type for u in updates} == {"reality_changed", "discovered_false"}
    assert any(u.late for u in updates)
    assert {d.kind for d in distractors} == set(ud.DISTRACTOR_KINDS)
    assert len({u.family for u in updates}) >= 8
    assert sum(s.role == "filler" for c in generated["test"] for s in c.said) > len(updates)


def test_memory_nodes(generated):
    conv = generated["test"][0]
    batches = conv.memories()
    assert [len(b) for b in batches] == [len(b) for b in conv.batches()]
    node = batches[0][0]
    said = conv.batches()[0][0]
    assert node.node_id == said.node_id and node.level == "N1" and node.citizen_id == conv.citizen_id
    assert node.description == f"{said.speaker}: {said.text}" and node.extra["speaker"] == said.speaker
    assert node.valid_at == said.when


def test_the_written_pairs_load_and_the_pairs_benchmark_prints_its_table(capsys):
    import updates_pairs as up

    for name in up.SETS:
        rows = up.load(name)
        assert {r["label"] for r in rows} == {"update", "none"}
        assert all(r["type"] in ("reality_changed", "discovered_false") for r in rows if r["label"] == "update")
        assert all(r["older"].strip() and r["newer"].strip() and r["speaker"] for r in rows)
    assert up.main(["--set", "dev", "--by", "kind"]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| dev")]
    assert table[0].startswith("| dev (tuned on) | all | ") and any("| kind: additional |" in t for t in table)
    found = re.search(r"\((\d+)/160\)", table[0])
    assert found and 0 < int(found.group(1)) <= 160


def test_the_written_conversations_load_as_conversations():
    convs = ud.load_written(BENCH / "updates_conversations_dev.json")
    assert len(convs) == 16 and sum(len(c.updates) for c in convs) == 96
    for conv in convs:
        said = conv.by_id()
        for u in conv.updates:
            assert said[u.old_id].speaker == said[u.new_id].speaker == u.speaker
            assert said[u.old_id].when < said[u.new_id].when and u.question.endswith("?")
        assert conv.memories() and all(m.citizen_id == conv.citizen_id for batch in conv.memories() for m in batch)
