"""Parser back-ends (gold, spaCy, spaCy-derived constituency, benepar) and the parse cache."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jaxenc.data.snli import read_snli
from jaxenc.errors import ConfigError, ParserUnavailableError, StructureError
from jaxenc.records import Sentence
from jaxenc.structures import cache, parsers
from jaxenc.structures.derive import derive_tree
from jaxenc.structures.formats import read_conllu
from jaxenc.structures.parsers import get_parser
from jaxenc.structures.trees import DependencyTree, Tree, parse_bracketed

REPO = Path(__file__).resolve().parents[1]
NUM_REAL_SENTENCES = 50


@pytest.fixture(scope="module")
def ewt_sentences(data_root):
    """The first sentences of UD English-EWT dev, with gold heads."""
    return read_conllu(data_root / "ud_english_ewt" / "en_ewt-ud-dev.conllu")[:NUM_REAL_SENTENCES]


@pytest.fixture(scope="module")
def spacy_parser():
    """The spaCy back-end; its pipeline is loaded once for the whole module."""
    return get_parser("spacy")


class CountingParser:
    """Wraps a parser and records the number of sentences of every `parse` call."""

    def __init__(self, parser, *, name=None, version=None):
        self.inner = parser
        self.name = name or parser.name
        self.version = version or parser.version
        self.kind = parser.kind
        self.calls: list[int] = []

    def parse(self, sentences):
        self.calls.append(len(sentences))
        return self.inner.parse(sentences)


def reaches_root(heads):
    """Reference tree check: one head 0 and every token reaches it in at most n steps."""
    if sum(head == 0 for head in heads) != 1:
        return False
    for token in range(1, len(heads) + 1):
        node, steps = token, 0
        while node != 0 and steps <= len(heads):
            node, steps = heads[node - 1], steps + 1
        if node != 0:
            return False
    return True


# --- spaCy ---------------------------------------------------------------------------------------


def test_spacy_parses_real_sentences_over_the_given_tokens(spacy_parser, ewt_sentences):
    trees = spacy_parser.parse(ewt_sentences)
    assert len(trees) == len(ewt_sentences)
    agree = total = 0
    for sentence, tree in zip(ewt_sentences, trees, strict=True):
        assert isinstance(tree, DependencyTree)
        assert tree.tokens == sentence.tokens
        assert len(tree.heads) == len(tree.labels) == len(sentence)
        assert reaches_root(tree.heads)
        tree.validate()
        # Determiners and adjectives attach to their noun in both UD and spaCy's scheme: a
        # misaligned tree (an off-by-one head) agrees on almost none of them.
        for deprel, gold_head, head in zip(sentence.deprels, sentence.heads, tree.heads,
                                           strict=True):
            if deprel in ("det", "amod"):
                total += 1
                agree += gold_head == head
    assert total > 100
    assert agree / total > 0.8


def test_spacy_batches_like_one_sentence_at_a_time(spacy_parser, ewt_sentences):
    sentences = ewt_sentences[:12]
    one_by_one = [spacy_parser.parse([sentence])[0] for sentence in sentences]
    assert spacy_parser.parse(sentences) == one_by_one


def test_spacy_sees_ptb_escapes_as_brackets_but_returns_them_verbatim(spacy_parser):
    escaped = Sentence(tokens=("I", "saw", "him", "-LRB-", "twice", "-RRB-", "today", "."))
    plain = Sentence(tokens=("I", "saw", "him", "(", "twice", ")", "today", "."))
    escaped_tree, plain_tree = spacy_parser.parse([escaped, plain])
    assert escaped_tree.tokens == escaped.tokens
    assert escaped_tree.heads == plain_tree.heads
    assert escaped_tree.labels == plain_tree.labels


def test_spacy_rejects_empty_tokens(spacy_parser):
    sentences = [Sentence(tokens=("fine",)), Sentence(tokens=("a", "", "b"), text="a  b")]
    with pytest.raises(StructureError, match='sentence #1 "a b"'):
        spacy_parser.parse(sentences)


def test_spacy_constituency_derives_phrases_over_the_same_tokens(spacy_parser, ewt_sentences):
    sentences = ewt_sentences[:10]
    parser = get_parser("spacy-constituency")
    assert parser.kind == "constituency" and spacy_parser.version in parser.version
    trees = parser.parse(sentences)
    for sentence, tree, dependency in zip(sentences, trees, spacy_parser.parse(sentences),
                                          strict=True):
        assert isinstance(tree, Tree)
        assert tuple(tree.leaves()) == sentence.tokens
        assert tree == derive_tree(dependency).tree


def test_spacy_default_model_and_missing_model():
    assert isinstance(get_parser("spacy"), parsers.Parser)
    assert get_parser("spacy").model in (parsers.SPACY_DEFAULT_MODEL,
                                         parsers.SPACY_FALLBACK_MODEL)
    with pytest.raises(ParserUnavailableError,
                       match="python -m spacy download xx_no_such_model"):
        get_parser("spacy", model="xx_no_such_model")


# --- gold ----------------------------------------------------------------------------------------


def test_gold_dependency_round_trip(ewt_sentences):
    trees = get_parser("gold", kind="dependency").parse(ewt_sentences)
    for sentence, tree in zip(ewt_sentences, trees, strict=True):
        assert (tree.tokens, tree.heads, tree.labels) == (sentence.tokens, sentence.heads,
                                                          sentence.deprels)


@pytest.mark.parametrize("binary", [False, True])
def test_gold_constituency_round_trip(data_root, binary):
    examples = read_snli(data_root / "snli" / "snli_1.0_dev.first1289.jsonl")[:20]
    sentences = [sentence for example in examples for sentence in example.sentences]
    trees = get_parser("gold", binary=binary).parse(sentences)
    for sentence, tree in zip(sentences, trees, strict=True):
        text = sentence.binary_tree if binary else sentence.tree
        assert tuple(tree.leaves()) == sentence.tokens
        assert tree.label == text.split()[0].lstrip("(")  # "ROOT", or "" for the binary parse
        assert parse_bracketed(tree.to_bracketed()) == tree


def test_gold_names_the_sentence_without_a_tree_and_suggests_spacy():
    sentences = [Sentence(tokens=("a",), tree="(X a)"), Sentence(tokens=("no", "tree"))]
    with pytest.raises(StructureError, match='sentence #1 "no tree".*spacy-constituency'):
        get_parser("gold").parse(sentences)
    with pytest.raises(StructureError, match="sentence #0.*get_parser\\('spacy'\\)"):
        get_parser("gold", kind="dependency").parse(sentences)


# --- benepar and the registry --------------------------------------------------------------------


# Imports jaxenc as if benepar, torch and nltk were not installed (the default install), whether
# or not they are.
WITHOUT_BENEPAR = textwrap.dedent("""
    import importlib.abc, importlib.metadata, sys

    BLOCKED = {"benepar", "torch", "nltk"}

    class NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"{name} is blocked in this test", name=name)

    version = importlib.metadata.version
    def blocked_version(name):
        if name in BLOCKED:
            raise importlib.metadata.PackageNotFoundError(name)
        return version(name)

    sys.meta_path.insert(0, NotInstalled())
    importlib.metadata.version = blocked_version
""")


def test_benepar_without_model_says_how_to_install(monkeypatch, tmp_path):
    nltk_data = pytest.importorskip("nltk.data", reason="benepar (jaxenc[benepar]) not installed")
    if parsers._installed_version("benepar") is None:
        pytest.skip("benepar (jaxenc[benepar]) not installed")
    monkeypatch.setattr(nltk_data, "path", [str(tmp_path)])  # no model anywhere
    with pytest.raises(ParserUnavailableError) as error:
        get_parser("benepar")
    message = str(error.value)
    assert "\n" not in message
    assert "'benepar_en3' is not installed" in message
    assert "pip install 'jaxenc[benepar]'" in message
    assert "python -c \"import benepar; benepar.download('benepar_en3')\"" in message


@pytest.mark.parametrize("missing", ["benepar", "torch"])
def test_benepar_or_torch_not_installed_names_the_extra(monkeypatch, missing):
    monkeypatch.setattr(parsers, "_installed_version",  # all but `missing` look installed
                        lambda name: None if name == missing else "1.0")
    with pytest.raises(ParserUnavailableError) as error:
        get_parser("benepar")
    message = str(error.value)
    assert "\n" not in message
    assert f"the benepar parser needs {missing}, which" in message
    assert "run `pip install 'jaxenc[benepar]'`" in message


def test_default_install_without_benepar_fails_in_one_line_and_loads_no_heavy_library():
    script = WITHOUT_BENEPAR + textwrap.dedent("""
        import jaxenc.structures.cache
        from jaxenc.errors import ParserUnavailableError
        from jaxenc.structures.parsers import get_parser
        try:
            get_parser("benepar")
        except ParserUnavailableError as error:
            print(error)
        else:
            raise SystemExit("no error")
        get_parser("spacy")  # resolving the model must not load spaCy either
        print(sorted(name for name in ("torch", "benepar", "nltk", "spacy") if name in sys.modules))
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                            text=True, check=True)
    message, loaded = result.stdout.strip().split("\n")
    assert message.startswith("the benepar parser needs benepar, torch, nltk, which jaxenc does "
                              "not install by default: run `pip install 'jaxenc[benepar]'`")
    assert loaded == "[]"


def test_missing_benepar_model_loads_no_heavy_library(tmp_path):
    pytest.importorskip("nltk.data", reason="benepar (jaxenc[benepar]) not installed")
    if parsers._installed_version("benepar") is None:
        pytest.skip("benepar (jaxenc[benepar]) not installed")
    script = textwrap.dedent(f"""
        import sys
        import nltk.data
        import jaxenc.structures.cache
        from jaxenc.errors import ParserUnavailableError
        from jaxenc.structures.parsers import get_parser
        nltk.data.path[:] = [{str(tmp_path)!r}]
        try:
            get_parser("benepar")
        except ParserUnavailableError:
            pass
        else:
            raise SystemExit("no error")
        print(sorted(name for name in ("torch", "benepar", "spacy") if name in sys.modules))
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                            text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_unknown_parser_and_option_are_config_errors():
    with pytest.raises(ConfigError, match="unknown parser 'stanza'.*gold, spacy"):
        get_parser("stanza")
    with pytest.raises(ConfigError, match="'gold' has no option beam.*kind, binary"):
        get_parser("gold", beam=4)
    with pytest.raises(ConfigError, match="neither"):
        get_parser("gold", kind="semantic")


# --- cache ---------------------------------------------------------------------------------------


def chain_sentences(count):
    """Small sentences with gold chain-shaped dependency trees and bracket trees."""
    return [Sentence(tokens=("w", f"x{index}", "y"), heads=(2, 3, 0), deprels=("a", "b", "root"),
                     tree=f"(S (A w) (B x{index} y))") for index in range(count)]


def test_cache_records_round_trip_any_words():
    words = Tree("ROOT", [Tree("S", [Tree("NP", [], "(a b)"), Tree("", [], "\u00e9 c")])])
    dependency = DependencyTree(("(", "x y", ")"), (2, 0, 2), ("punct", "ROOT", "punct"))
    for tree in (words, dependency):
        assert cache.from_record(cache.to_record(tree)) == tree


@pytest.mark.parametrize("kind", ["dependency", "constituency"])
def test_cache_second_call_does_not_parse(tmp_path, kind):
    sentences = chain_sentences(5)
    parser = CountingParser(get_parser("gold", kind=kind))
    first = cache.parse_cached(parser, sentences, tmp_path)
    second = cache.parse_cached(parser, sentences, tmp_path)
    assert parser.calls == [5]
    assert first == second == parser.inner.parse(sentences)


def test_cache_misses_for_another_parser_version_or_sentences(tmp_path):
    sentences = chain_sentences(3)
    gold = get_parser("gold", kind="dependency")
    base = CountingParser(gold)
    cache.parse_cached(base, sentences, tmp_path)
    for other in (CountingParser(gold, version="2"), CountingParser(gold, name="other")):
        cache.parse_cached(other, sentences, tmp_path)
        assert other.calls == [3]
    edited = [*sentences[:2], Sentence(tokens=sentences[2].tokens, heads=(3, 1, 0),
                                       deprels=("a", "b", "root"))]
    trees = cache.parse_cached(base, edited, tmp_path)
    assert base.calls == [3, 3]
    assert trees[2].heads == (3, 1, 0)


def test_cache_parses_duplicates_once_and_returns_separate_objects(tmp_path):
    one, two = chain_sentences(2)
    parser = CountingParser(get_parser("gold"))
    trees = cache.parse_cached(parser, [one, two, one], tmp_path)
    assert parser.calls == [2]
    assert trees[0] == trees[2] and trees[0] is not trees[2]


def test_cache_chunks_are_reused_and_files_written_whole(tmp_path):
    parser = CountingParser(get_parser("gold", kind="dependency"))
    cache.parse_cached(parser, chain_sentences(5), tmp_path, chunk_size=2)
    assert parser.calls == [2, 2, 1]
    assert len(list(tmp_path.glob("gold-*.json.gz"))) == 3
    cache.parse_cached(parser, chain_sentences(6), tmp_path, chunk_size=2)
    assert parser.calls == [2, 2, 1, 2]  # only the changed last chunk is parsed
    assert sorted(path.suffix for path in tmp_path.iterdir()) == [".gz"] * 4  # no temp files


def test_cache_reparses_a_corrupt_file(tmp_path):
    sentences = chain_sentences(2)
    parser = CountingParser(get_parser("gold"))
    expected = cache.parse_cached(parser, sentences, tmp_path)
    (path,) = tmp_path.iterdir()
    path.write_bytes(b"not gzip")
    assert cache.parse_cached(parser, sentences, tmp_path) == expected
    assert cache.parse_cached(parser, sentences, tmp_path) == expected
    assert parser.calls == [2, 2]


def test_cache_write_is_atomic(tmp_path):
    target = tmp_path / "chunk.json.gz"
    cache._write_atomically(target, {"trees": []})
    before = target.read_bytes()
    with pytest.raises(TypeError):
        cache._write_atomically(target, {"trees": [object()]})
    assert target.read_bytes() == before
    assert list(tmp_path.iterdir()) == [target]


def test_cache_with_spacy(tmp_path, spacy_parser, ewt_sentences):
    parser = CountingParser(spacy_parser)
    first = cache.parse_cached(parser, ewt_sentences, tmp_path)
    assert cache.parse_cached(parser, ewt_sentences, tmp_path) == first
    assert parser.calls == [len(ewt_sentences)]
    assert first == spacy_parser.parse(ewt_sentences)


@pytest.mark.parametrize(("show", "total", "disabled"), [
    (None, parsers.PROGRESS_MIN_SENTENCES - 1, True),  # few sentences: never a bar
    (None, parsers.PROGRESS_MIN_SENTENCES, True),      # many, but stderr is not a terminal here
    (False, parsers.PROGRESS_MIN_SENTENCES, True),
    (True, 3, False)])
def test_parsing_progress_bars_follow_the_callers_choice(show, total, disabled):
    with parsers.progress_bars(show):
        bar = parsers._progress(iter(range(total)), total, "parsing")
    assert bar.disable is disabled
    bar.close()
    assert parsers._SHOW_PROGRESS.get() is None  # the block's choice ends with it


def test_encode_passes_its_progress_bar_choice_to_the_parser(monkeypatch):
    from jaxenc import encoding

    seen = []
    monkeypatch.setattr(encoding.Encoder, "features",
                        lambda self, items: seen.append(parsers._SHOW_PROGRESS.get()) or [None])
    monkeypatch.setattr(encoding.Encoder, "_batches", lambda self, features, size: (0, iter(())))
    for name, value in (("dim", 4), ("params", {}), ("apply", None)):
        monkeypatch.setattr(encoding.Encoder, name, value)
    encoder = object.__new__(encoding.Encoder)  # no model: no sentence has tokens here
    for show in (False, True, None):
        assert encoder.encode(["a"], show_progress_bar=show).shape == (1, 4)
    assert seen == [False, True, None]
