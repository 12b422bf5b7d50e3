"""BM25 over one level graph's memories: a tantivy index on disk, kept current from the graph's change log.

Why tantivy rather than the graph's own full-text index: FalkorDB's index
returns every memory containing a word of the question (~4,000 per common
word at 50K memories) and cannot score BM25 with length normalisation, so
the channel read thousands of memories per question and let long memories
that repeat the question's words crowd out the short one that answers it.
Tantivy (Lucene's design in Rust) scores BM25 (k1 = 1.2, b = 0.75) and
keeps only the top k while it reads, so a question costs well under a
millisecond at 500K memories.  Long memories bring empty ballast documents
(``BALLAST_TERMS``), for a stronger length normalisation than b = 0.75.

Freshness across processes: every write stamps the memories it wrote with
the next numbers of the graph's change log (``change_seq``, see
``level_store``).  Before a search the index reads the log's head and
catches up on the memories written since it last looked, whoever wrote them.
A tantivy commit costs ~10 ms, too much for "store a turn, then recall"
every turn, so what was caught up is held in memory (``_Pending``) and
scored by the same formula until enough of it has gathered to commit.  The
committed watermark is kept beside the index, written after each commit: a
crash between the two replays a few memories, never loses one.

The same documents hold each memory's name for the graph channel, which
starts its walks from the memories a question names (``match_name``, the
fuzzy matching of ``scoring.names.EntityIndex``).  Why here rather than an
``EntityIndex`` built in the process: building one reads every name of the
level and costs ~50 us per name, so a citizen's first question paid 150-500
ms at 1,000 long messages (and again after a restart or a TTL), and the
index's objects lengthened every garbage collection of the process.  On disk
it is kept current by the same change log and costs a few term lookups.
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import re
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import Any

import tantivy

from llama_consciousness.errors import StorageError
from llama_consciousness.scoring.names import (
    EntityIndex, EntityMatch, best_per_entity, compact_key, fuzzy_bounds, key_similarity, normalize_entity_name,
    sorted_words_key,
    trigrams,
)
from llama_consciousness.scoring.updates import about_words, speaker_of

logger = logging.getLogger(__name__)

K1 = 1.2
B = 0.75
"""Tantivy's BM25 parameters (fixed in the library); the pending memories are scored with the same."""

BALLAST_TERMS = 40
"""A memory's terms per ballast document: empty documents beside it that count in the index's statistics only.

Why: tantivy's k1 and b are fixed, and at b = 0.75 a long message that repeats a question's common words
outranks the one that answers it.  Empty documents lower the average length a memory is measured against, which
is a stronger length normalisation (and a flatter idf) for long memories only: a short chat turn (under 40
terms) brings none.  The entity hubs did the same by accident on long messages (their names are short
documents), which is where most of the entity step's recall on BEAM came from.  Offline, keyword search alone
on BEAM's tune half (BM25 as tantivy's, the package's terms, R@10): 0.389 bare, 0.466 with the hubs, 0.481 with
the hubs and one ballast document per 40 terms (LoCoMo's tune half 0.620 in both); 20 terms gave BEAM 0.487 but
LoCoMo 0.612, 80 gave 0.483."""

FLUSH_DOCS = 512
"""Pending memories that trigger a commit: one ~10 ms commit per 512 writes instead of per write."""

MAX_QUERY_TERMS = 24

PURGE_TIMEOUT_S = 30.0
PURGE_POLL_S = 0.02
"""How long and how often :meth:`KeywordIndex.purge` asks for a writer another process holds (a commit takes
~10 ms)."""

_SEGMENT_FILE = re.compile(r"([0-9a-f]{32})\.")

# Words with no topic: question and auxiliary verbs, pronouns, articles,
# plus single letters, which include the pieces a tokenizer splitting on
# apostrophes leaves ("caroline's" -> "caroline", "s").  Dropped from
# memories and questions alike, so that lengths count words that can match.
STOP_WORDS = frozenset("""
a about after all also am an and any are as at be been before being but by can could did do does doing done
during for from had has have having he her hers him his how i if in into is it its just like many may me might
more most much my no not now of on once only or other our out over own said say says she should so some such
than that the their them then there these they this those through to too under until up us very was we were
what when where which while who whom why will with would you your
ll re ve
""".split()) | frozenset("abcdefghijklmnopqrstuvwxyz")

_ID, _NID, _BODY = "id", "nid", "body"
_NAME, _KEY, _SORTED, _GRAMS, _SIZE, _TYPE = "name", "key", "sorted", "grams", "gsize", "type"
LAYOUT = 6
"""The index's own layout (fields); an index of another layout is rebuilt."""


def _analyzer(stop_words: Iterable[str]) -> Any:
    return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(r"[^\W_]+"))
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.ascii_fold())
            .filter(tantivy.Filter.custom_stopword(sorted(stop_words)))
            .filter(tantivy.Filter.stemmer("english"))
            .build())


_ANALYZER = _analyzer(STOP_WORDS)


def analyze(text: str) -> list[str]:
    """The terms of ``text`` as the index sees them: words lower-cased, accents folded, stop words dropped,
    English-stemmed ("Running dogs" -> ``["run", "dog"]``), in order, repeats kept."""
    return _ANALYZER.analyze(text)


def query_terms(text: str, max_terms: int = MAX_QUERY_TERMS) -> list[str]:
    """The distinct terms of a question, at most ``max_terms`` (a pasted page must not become 500 lookups)."""
    return list(dict.fromkeys(analyze(text)))[:max_terms]


ABOUT_MAX_CHARS = 600
"""The longest memory whose subjects (``about_words``) are indexed, as long as the offline update judge reads by
default (``IngestOptions.update_max_chars``): the patterns are of chat facts.  On BEAM's tune half, indexing them
up to 1,600 characters instead gave the same recall in every category, for 0.34 ms of ``memory_terms`` a message
against 0.20 ms (2,448 messages of conversations 1-3)."""


def memory_terms(name: str | None, description: str | None) -> list[str]:
    """The terms of a memory: its name, then its description (a name the description already contains, a title
    repeated in the text, is not counted twice), then, once each, the words of what it states something about
    that it does not say itself (``scoring.updates.about_words``: "home" for "we moved to Lyon"), so that a
    question about a thing finds the statement that names it in other words."""
    name, description = name or "", description or ""
    text = description if name in description else f"{name}\n{description}"
    terms = analyze(text)
    speaker, body = speaker_of(text)
    about = about_words(body, speaker) if len(body) <= ABOUT_MAX_CHARS else ""
    if about:  # only words the memory does not say itself: they name its subject, they do not repeat it
        have = set(terms)
        terms += [t for t in dict.fromkeys(analyze(about)) if t not in have]
    return terms


def _schema() -> Any:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field(_ID, stored=True, tokenizer_name="raw", index_option="basic")
    # the graph's internal id of the memory: the graph then seeks candidates by id instead of looking their
    # node_id up in its index (80 lookups: ~10 ms at 50K memories; 80 seeks: ~0.1 ms)
    builder.add_unsigned_field(_NID, stored=True)
    # the terms are analysed here (``memory_terms``) and joined by spaces: the index only splits them
    builder.add_text_field(_BODY, stored=False, tokenizer_name="whitespace", index_option="freq")
    # the name, its key (``normalize_entity_name``), the key's words sorted, its trigrams (spaces as "_", which
    # no key holds) and their number: what ``EntityIndex`` keeps in the process, for ``match_name``
    builder.add_text_field(_NAME, stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field(_KEY, stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field(_SORTED, stored=False, tokenizer_name="raw", index_option="basic")
    builder.add_text_field(_GRAMS, stored=False, tokenizer_name="whitespace", index_option="basic")
    builder.add_unsigned_field(_SIZE, stored=False, indexed=True, fast=True)
    builder.add_text_field(_TYPE, stored=True, tokenizer_name="raw", index_option="basic")  # entities: by type
    return builder.build()


MAX_NAME_CANDIDATES = 1000
"""Stored names read per name asked: those that share its key or its rarest trigrams (a level whose memories
share one title, thousands of "Session notes", offers its first thousand)."""


def _any_term(schema: Any, field_name: str, terms: Sequence[str]) -> Any:
    """Documents with any of ``terms`` in ``field_name``: term queries under one boolean query (tantivy's
    ``term_set_query`` builds an automaton per call, ~0.2 ms; a few term queries cost microseconds)."""
    return tantivy.Query.boolean_query([(tantivy.Occur.Should, tantivy.Query.term_query(schema, field_name, t))
                                        for t in terms])


def _gram_tokens(grams: Iterable[str]) -> list[str]:
    return [g.replace(" ", "_") for g in grams]


@dataclass
class _Pending:
    """Memories caught up since the last commit, scored here by the index's own formula."""

    # id -> (seq, tf, length, nid, name, node type)
    docs: dict[str, tuple[int, Counter[str], int, int, str, str]] = field(default_factory=dict)
    postings: dict[str, set[str]] = field(default_factory=dict)  # term -> ids
    tokens: int = 0
    ballast: int = 0  # the ballast documents the memories held here bring (``BALLAST_TERMS``)
    names: EntityIndex = field(default_factory=EntityIndex)

    def put(self, node_id: str, nid: int, seq: int, terms: Sequence[str], name: str, node_type: str) -> None:
        self.drop(node_id)
        tf = Counter(terms)
        self.docs[node_id] = (seq, tf, len(terms), nid, name, node_type)
        self.tokens += len(terms)
        self.ballast += ballast(len(terms))
        for term in tf:
            self.postings.setdefault(term, set()).add(node_id)
        self.names.assign([(node_id, name)])

    def drop(self, node_id: str) -> None:
        self.names.assign([(node_id, "")])
        old = self.docs.pop(node_id, None)
        if old is not None:
            self.tokens -= old[2]
            self.ballast -= ballast(old[2])
            for term in old[1]:
                ids = self.postings[term]
                ids.discard(node_id)
                if not ids:
                    del self.postings[term]


def ballast(length: int) -> int:
    """The ballast documents of a memory of ``length`` terms (see ``BALLAST_TERMS``)."""
    return length // BALLAST_TERMS


def bm25(tf: int, length: int, df: int, docs: int, avgdl: float) -> float:
    """One term's BM25 score in one memory (Lucene's idf, which never goes negative)."""
    idf = math.log(1.0 + (docs - df + 0.5) / (df + 0.5))
    return idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * length / max(avgdl, 1e-9)))


def _document(node_id: str, nid: int, tf: Counter[str], name: str, node_type: str) -> Any:
    doc = tantivy.Document(**{_ID: node_id, _NID: nid, _BODY: " ".join(tf.elements())})
    if node_type:
        doc.add_text(_TYPE, node_type)
    key = normalize_entity_name(name) if name else ""
    if key:  # a memory without a name (or one of punctuation only) is never named by a question
        grams = trigrams(compact_key(key))
        for field_name, value in ((_NAME, name), (_KEY, key), (_SORTED, sorted_words_key(key)),
                                  (_GRAMS, " ".join(_gram_tokens(grams)))):
            doc.add_text(field_name, value)
        doc.add_unsigned(_SIZE, len(grams))
    return doc


class KeywordIndex:
    """The BM25 index of one level graph (thread-safe; see the module docstring for how it stays current)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.RLock()
        directory.mkdir(parents=True, exist_ok=True)
        self._meta_path = directory / "watermark.json"
        # Opening is one step for every process and memory object on the directory: one that found no
        # watermark yet cleared the files another had just made (its next read failed: file not found).
        with open(directory / ".open.lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            meta = self._read_meta()
            fresh = meta is None or meta.get("layout") != LAYOUT or not tantivy.Index.exists(str(directory))
            if fresh:
                self._clear_files(keep=lock.name)
                meta = {"epoch": None, "seq": 0, "docs": 0, "tokens": 0}
            self._index = tantivy.Index(_schema(), path=str(directory), reuse=True)
            self.epoch: str | None = meta["epoch"]
            self._committed = int(meta["seq"])
            self._docs_added, self._tokens_added = int(meta["docs"]), int(meta["tokens"])
            if fresh:  # the next opener finds an index of this layout, and leaves it be
                self._write_meta()
        self.seen = self._committed  # the change log position caught up to, committed or pending
        self._pending = _Pending()
        # Files of a replaced graph that could not be cleared (another holder had the writer): ignored by
        # searches, and cleared by the next commit.
        self._base_stale = False

    # -- catching up -------------------------------------------------------------

    def behind(self, epoch: str | None, head: int) -> int | None:
        """Where to catch up from, given the graph's change log (``epoch``, ``head``); None when current.

        A log of another epoch is another graph under the same name (deleted and written again): the
        index starts over."""
        with self._lock:
            if epoch != self.epoch:
                self._reset(epoch)
            return None if self.seen >= head else self.seen

    def apply(self, epoch: str | None, rows: Iterable[Sequence[Any]], upto: int) -> None:
        """Take ``(node_id, id(node), name, description, change_seq, node_type)`` rows read up to log position
        ``upto``."""
        with self._lock:
            if epoch != self.epoch:
                return  # the graph was replaced while this page was read: the next search starts over
            for node_id, nid, name, description, seq, node_type in rows:
                seq = int(seq)
                held = self._pending.docs.get(node_id)
                if held is None or held[0] <= seq:
                    self._pending.put(node_id, int(nid), seq, memory_terms(name, description), name or "",
                                      node_type or "")
            self.seen = max(self.seen, upto)
            if len(self._pending.docs) >= FLUSH_DOCS:
                self.flush()

    def flush(self) -> bool:
        """Commit the pending memories; False when another writer holds the index (they stay pending)."""
        with self._lock:
            if not self._pending.docs and self._committed >= self.seen:
                return True
            writer = self._writer()
            if writer is None:
                return False
            disk = self._read_meta()
            if disk is not None and disk.get("layout") == LAYOUT and disk["epoch"] != self.epoch:
                # Another index object started the files over under another epoch (an erasure, a graph
                # replaced) since this one last looked: what it holds pending may be what was erased, and
                # must not be written back.  It takes the files as they are; the next search catches up.
                self._adopt(disk)
                return True
            if self._base_stale:
                writer.delete_all_documents()
            for node_id, (_, tf, length, nid, name, node_type) in self._pending.docs.items():
                writer.delete_documents_by_term(_ID, node_id)  # with its ballast, which has its id
                writer.add_document(_document(node_id, nid, tf, name, node_type))
                extra = ballast(length)
                for _ in range(extra):
                    writer.add_document(tantivy.Document(**{_ID: node_id}))
                self._docs_added += 1 + extra
                self._tokens_added += length
            writer.commit()
            if self._base_stale:  # the replaced graph's segments: off the disk now, not at some later merge
                writer.garbage_collect_files()
            writer.wait_merging_threads()
            self._committed = self.seen
            self._write_meta()
            self._index.reload()
            self._pending = _Pending()
            self._base_stale = False
            return True

    def rebuild(self) -> None:
        """Start over from the graph at the next search (the graph's ids no longer match the index's)."""
        with self._lock:
            self._reset(self.epoch)

    def purge(self, epoch: str | None, timeout_s: float = PURGE_TIMEOUT_S) -> None:
        """Start over under ``epoch`` (the graph's change log after an erasure) with the old index's files
        deleted from the disk; the next search indexes the graph again from its change log.

        Why more than :meth:`behind` does on a new epoch: a tantivy delete only marks documents, and their
        words, names and ids stay in the segment files until a merge rewrites them, so an erased memory
        would still be read on the disk.  This empties the index, has tantivy delete the files no commit
        uses, and removes any segment file it does not know of (a crashed writer's); it waits for the writer
        that another index object (another process) may hold, and raises ``StorageError`` when that one
        keeps it past ``timeout_s``.  That other object writes nothing it held pending back: its next commit
        finds the files started over under another epoch and adopts them (:meth:`flush`).
        """
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                writer = self._writer()
                if writer is not None:
                    self._reset(epoch, writer)
                    return
            if time.monotonic() >= deadline:
                raise StorageError(f"keyword index {self.directory} not purged: another process held its writer "
                                   f"for {timeout_s:.0f} s; the erased memories' words are still in its files")
            time.sleep(PURGE_POLL_S)

    # -- searching ------------------------------------------------------------------

    def search(self, terms: Sequence[str], limit: int) -> list[tuple[str, int, float]]:
        """``(node_id, id(node), score)`` of the ``limit`` best memories for ``terms``, best first (ties by
        node_id)."""
        if not terms or limit <= 0:
            return []
        with self._lock:
            searcher = self._index.searcher()
            pending = self._pending
            stale = self._base_stale  # the files hold a replaced graph: only the pending memories count
            base_docs = 0 if stale else searcher.num_docs
            query = tantivy.Query.boolean_query(
                [(tantivy.Occur.Should, tantivy.Query.term_query(self._index.schema, _BODY, t)) for t in terms])
            # a committed memory that is also pending is scored by its newer, pending text
            hits = [] if stale else searcher.search(query, limit + len(pending.docs)).hits
            nids: dict[str, int] = {}
            scores: dict[str, float] = {}
            for score, address in hits:
                doc = searcher.doc(address)
                node_id = doc[_ID][0]
                if node_id not in pending.docs:
                    nids[node_id], scores[node_id] = int(doc[_NID][0]), float(score)
            if pending.docs:
                held = len(pending.docs) + pending.ballast  # documents, the ballast's included
                docs = base_docs + held
                avgdl = (self._tokens_added + pending.tokens) / max(self._docs_added + held, 1)
                for term in terms:
                    ids = pending.postings.get(term)
                    if not ids:
                        continue
                    df = (0 if stale else searcher.doc_freq(_BODY, term)) + len(ids)
                    for node_id in ids:
                        _, tf, length, nids[node_id], _, _ = pending.docs[node_id]
                        scores[node_id] = scores.get(node_id, 0.0) + bm25(tf[term], length, df, docs, avgdl)
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
        return [(node_id, nids[node_id], score) for node_id, score in ranked]

    def match_name(self, name: str, threshold: float = 0.85, limit: int | None = None,
                   types: Iterable[str] | None = None) -> list[EntityMatch]:
        """The memories ``name`` may mean, as ``EntityIndex.match`` finds them among the level's names: the
        same key (score 1.0), then the same words in another order or a trigram Dice of at least
        ``threshold``; best first, ties by stored name, then node_id.  ``types``: only memories of these
        node types (the entities a mention may be)."""
        key = normalize_entity_name(name)
        if not key:
            return []
        grams = trigrams(compact_key(key))
        kinds = None if types is None else sorted(set(types))
        with self._lock:
            pending = self._pending
            rows = pending.names.match(name, threshold) if pending.docs else []
            if kinds is not None:
                rows = [row for row in rows if pending.docs[row.entity_id][5] in kinds]
            if not self._base_stale:
                rows += self._committed_matches(key, grams, threshold, pending.docs, kinds)
        return best_per_entity(rows, limit)

    def _committed_matches(self, key: str, grams: frozenset[str], threshold: float,
                           skip: dict[str, Any], kinds: list[str] | None) -> list[EntityMatch]:
        searcher = self._index.searcher()
        schema = self._index.schema
        should = [tantivy.Query.term_query(schema, _KEY, key),
                  tantivy.Query.term_query(schema, _SORTED, sorted_words_key(key))]
        bounds = fuzzy_bounds(len(grams), threshold)
        if bounds is not None:
            least, most, overlap = bounds
            known = sorted((searcher.doc_freq(_GRAMS, token), token) for token in _gram_tokens(grams))
            known = [(df, token) for df, token in known if df > 0]
            probe = len(grams) - overlap + 1 - (len(grams) - len(known))  # grams no name has count as probed
            if probe > 0:
                should.append(tantivy.Query.boolean_query([
                    (tantivy.Occur.Must, tantivy.Query.range_query(schema, _SIZE, tantivy.FieldType.Unsigned,
                                                                   least, most)),
                    (tantivy.Occur.Must, _any_term(schema, _GRAMS, [t for _, t in known[:probe]])),
                ]))
        query = tantivy.Query.boolean_query([(tantivy.Occur.Should, q) for q in should])
        if kinds is not None:
            query = tantivy.Query.boolean_query([(tantivy.Occur.Must, query), (
                tantivy.Occur.Must, _any_term(schema, _TYPE, kinds))])
        out: list[EntityMatch] = []
        for _, address in searcher.search(query, MAX_NAME_CANDIDATES).hits:
            doc = searcher.doc(address)
            node_id = doc[_ID][0]
            if node_id in skip:  # pending holds its newer name
                continue
            stored = doc[_KEY][0]
            score = 1.0 if stored == key else key_similarity(key, stored, grams)
            if score >= threshold or stored == key:
                out.append(EntityMatch(node_id, doc[_NAME][0], score))
        return out

    # -- files ----------------------------------------------------------------------

    def _writer(self) -> Any:
        """A writer of the index files, or None while another process (or memory object) holds them."""
        try:
            return self._index.writer(heap_size=15_000_000, num_threads=1)
        except ValueError as exc:
            logger.debug("keyword index %s busy: %s", self.directory, exc)
            return None

    def _reset(self, epoch: str | None, writer: Any = None) -> None:
        if writer is None:
            writer = self._writer()  # None: another holder has it; its files are ignored until this one commits
        if writer is not None:
            writer.delete_all_documents()
            writer.commit()
            writer.garbage_collect_files()
            self._remove_unused_segments()  # under the writer's lock: nobody is writing segments
            writer.wait_merging_threads()
            self._index.reload()
        self._base_stale = writer is None
        self.epoch, self._committed, self.seen = epoch, 0, 0
        self._docs_added = self._tokens_added = 0
        self._pending = _Pending()
        self._write_meta()

    def _adopt(self, meta: dict[str, Any]) -> None:
        """Take the files as another index object left them (``meta``: their watermark), dropping what is
        pending here."""
        self.epoch, self._committed = meta["epoch"], int(meta["seq"])
        self.seen = self._committed
        self._docs_added, self._tokens_added = int(meta["docs"]), int(meta["tokens"])
        self._pending = _Pending()
        self._base_stale = False
        self._index.reload()

    def _remove_unused_segments(self) -> None:
        """Delete the segment files (``<segment id>.<part>``) that the last commit (``meta.json``) does not use:
        tantivy's own collection only deletes files it recorded as written (``.managed.json``)."""
        try:
            meta = json.loads((self.directory / "meta.json").read_text())
            used = {segment["segment_id"].replace("-", "") for segment in meta.get("segments", [])}
        except (OSError, ValueError, KeyError, TypeError):
            return  # no readable commit: nothing can be told apart safely
        for child in self.directory.iterdir():
            segment = _SEGMENT_FILE.match(child.name)
            if segment and segment.group(1) not in used and child.is_file():
                child.unlink(missing_ok=True)

    def _read_meta(self) -> dict[str, Any] | None:
        try:
            meta = json.loads(self._meta_path.read_text())
            return meta if {"epoch", "seq", "docs", "tokens"} <= set(meta) else None
        except (OSError, ValueError):
            return None

    def _write_meta(self) -> None:
        meta = {"layout": LAYOUT, "epoch": self.epoch, "seq": self._committed, "docs": self._docs_added,
                "tokens": self._tokens_added}
        tmp = self._meta_path.with_name(f".watermark.{os.getpid()}.{threading.get_ident()}.tmp")  # one per writer
        tmp.write_text(json.dumps(meta))
        os.replace(tmp, self._meta_path)

    def _clear_files(self, keep: str | None = None) -> None:
        for child in self.directory.iterdir():
            if keep is not None and str(child) == keep:
                continue
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)


class KeywordIndexes:
    """One :class:`KeywordIndex` per level graph under ``root`` (a temporary directory when None, removed by
    :meth:`close`)."""

    def __init__(self, root: Path | None) -> None:
        self._temporary = root is None
        self.root = Path(tempfile.mkdtemp(prefix="lc-keyword-")) if root is None else root
        self._indexes: dict[str, KeywordIndex] = {}
        self._lock = threading.Lock()

    def directory(self, graph: str) -> Path:
        # graph names are validated, but a file name must also be short and case-safe on every system
        return self.root / f"{graph[:40]}-{sha256(graph.encode()).hexdigest()[:16]}"

    def get(self, graph: str) -> KeywordIndex:
        with self._lock:
            index = self._indexes.get(graph)
            if index is None:
                index = self._indexes[graph] = KeywordIndex(self.directory(graph))
            return index

    def remove(self, graph: str) -> None:
        """Forget the index of a deleted graph, its files included."""
        with self._lock:
            self._indexes.pop(graph, None)
            shutil.rmtree(self.directory(graph), ignore_errors=True)

    def close(self) -> None:
        """Commit what is pending (a restart then has less to catch up on); drop a temporary root."""
        with self._lock:
            for index in self._indexes.values():
                try:
                    index.flush()
                except Exception as exc:  # closing must not fail on a full disk
                    logger.warning("keyword index %s not committed: %s", index.directory, exc)
            self._indexes.clear()
            if self._temporary:
                shutil.rmtree(self.root, ignore_errors=True)
