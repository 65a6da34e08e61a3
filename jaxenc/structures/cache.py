"""Parse a dataset once: parser outputs stored on disk and loaded on the next run.

`parse_cached(parser, sentences, cache_dir)` parses the distinct sentences in chunks of
`chunk_size`. Each chunk is one gzipped JSON file `cache_dir/<parser name>-<key>.json.gz`, written
atomically (temp file + rename), whose key hashes

- the parser's name, kind and version (the version names the library and model versions), and
- each sentence's content: its tokens and the gold annotations a parser may read.

So a dataset parsed before is loaded without calling the parser, while another parser, a new
model, or edited sentences miss instead of returning stale trees. An interrupted run keeps the
chunks it finished. Trees are stored as plain JSON (no pickles), so any jaxenc version reads them.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tqdm.auto import tqdm

from jaxenc.records import Sentence
from jaxenc.structures.parsers import Parser, ParseTree
from jaxenc.structures.trees import DependencyTree, Tree

CACHE_FORMAT = 1  # bumped when the file layout changes; older files then miss
DEFAULT_CHUNK_SIZE = 4096
_UNSAFE_FILE_CHARACTERS = re.compile(r"[^A-Za-z0-9_.-]")

# A tree as JSON: a dependency tree is ["dependency", tokens, heads, labels]; a constituency tree
# is ["constituency", node] with node = [label, word] for a leaf, [label, [node, ...]] otherwise.
Record = list
_log = logging.getLogger(__name__)


def parse_cached(parser: Parser, sentences: Sequence[Sentence], cache_dir: str | os.PathLike, *,
                 chunk_size: int = DEFAULT_CHUNK_SIZE) -> list[ParseTree]:
    """`parser.parse(sentences)`, read from `cache_dir` when these sentences were parsed before.

    Duplicate sentences are parsed once; every returned tree is a fresh object. Unreadable cache
    files (e.g. from another `CACHE_FORMAT`) are re-parsed and overwritten.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    distinct: dict[tuple, Sentence] = {}
    for sentence in sentences:
        distinct.setdefault(_content(sentence), sentence)
    contents = list(distinct)
    records: dict[tuple, Record] = {}
    starts = range(0, len(contents), chunk_size)
    for start in tqdm(starts, desc=f"{parser.name} parses", unit="chunk", disable=len(starts) < 2):
        chunk = contents[start:start + chunk_size]
        key = _chunk_key(parser, chunk)
        path = cache_dir / f"{_UNSAFE_FILE_CHARACTERS.sub('_', parser.name)}-{key[:32]}.json.gz"
        chunk_records = _load(path, key, len(chunk))
        if chunk_records is None:
            trees = parser.parse([distinct[content] for content in chunk])
            if len(trees) != len(chunk):
                raise RuntimeError(f"parser {parser.name!r} returned {len(trees)} trees for "
                                   f"{len(chunk)} sentences")
            chunk_records = [to_record(tree) for tree in trees]
            _write_atomically(path, {"format": CACHE_FORMAT, "key": key, "parser": parser.name,
                                     "kind": parser.kind, "version": parser.version,
                                     "trees": chunk_records})
        records.update(zip(chunk, chunk_records, strict=True))
    return [from_record(records[_content(sentence)]) for sentence in sentences]


def _content(sentence: Sentence) -> tuple:
    """What a parser may read of a sentence (everything but the display `text`)."""
    return (sentence.tokens, sentence.tree, sentence.binary_tree, sentence.heads,
            sentence.deprels, sentence.tags)


def _chunk_key(parser: Parser, contents: Sequence[tuple]) -> str:
    """sha256 hex digest of the parser's identity and the chunk's sentence contents."""
    identity = [CACHE_FORMAT, parser.name, parser.kind, parser.version]
    digest = hashlib.sha256(json.dumps(identity).encode())
    for content in contents:
        digest.update(json.dumps(content, ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def to_record(tree: ParseTree) -> Record:
    """A tree as plain JSON-able lists (layout above)."""
    if isinstance(tree, DependencyTree):
        return ["dependency", list(tree.tokens), list(tree.heads), list(tree.labels)]
    if isinstance(tree, Tree):
        return ["constituency", _node_record(tree)]
    raise TypeError(f"a parser returned {type(tree).__name__}, not a Tree or DependencyTree")


def from_record(record: Record) -> ParseTree:
    """The tree `to_record` stored."""
    kind, *fields = record
    if kind == "dependency":
        tokens, heads, labels = fields
        return DependencyTree(tuple(tokens), tuple(heads), tuple(labels))
    return _node_from_record(fields[0])


def _node_record(node: Tree) -> list:
    if node.word is not None:
        return [node.label, node.word]
    return [node.label, [_node_record(child) for child in node.children]]


def _node_from_record(record: list) -> Tree:
    label, body = record
    if isinstance(body, str):
        return Tree(label, [], body)
    return Tree(label, [_node_from_record(child) for child in body])


def _load(path: Path, key: str, count: int) -> list[Record] | None:
    """The chunk's records, or None when the file is absent, unreadable or not this chunk's."""
    if not path.exists():
        return None
    try:
        with gzip.open(path, "rt", encoding="utf-8") as file:
            stored = json.load(file)
    except (OSError, EOFError, ValueError) as error:
        _log.warning("re-parsing: cannot read parse cache %s (%s)", path, error)
        return None
    if (not isinstance(stored, dict) or stored.get("format") != CACHE_FORMAT
            or stored.get("key") != key or len(stored.get("trees", ())) != count):
        _log.warning("re-parsing: parse cache %s holds another chunk or format", path)
        return None
    return stored["trees"]


def _write_atomically(path: Path, payload: dict) -> None:
    """Writes gzipped JSON to a temp file beside `path`, then renames it over `path`."""
    descriptor, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                             suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as raw, \
                gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) as file:
            file.write(json.dumps(payload, ensure_ascii=False).encode())
        os.replace(temp_name, path)
    except BaseException:
        os.unlink(temp_name)
        raise
