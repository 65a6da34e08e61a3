"""Structure arrays end to end: jaxenc.structures.arrays against slow references, and the same
arrays from the featurizer, from a TFDS array_record build, and after batching."""

import chex
import ml_collections
import numpy as np
import pytest
import tensorflow_datasets as tfds

from jaxenc.data import registry, synthetic
from jaxenc.data import tfds_builders as jtfds
from jaxenc.data.batching import BUCKET_AXIS, Batcher, bucket_lengths, pad_rule
from jaxenc.data.featurize import RELATIONS_FILE, Featurizer, relation_vocabulary, tag_index
from jaxenc.data.vocab import ROOT, Vocabulary
from jaxenc.errors import ConfigError, StructureError
from jaxenc.records import Example, Sentence
from jaxenc.structures import arrays, parsers
from jaxenc.structures.relations import NONE_ID, SELF_ID, RelationVocabulary
from jaxenc.structures.trees import Tree, tree_from_sentence

ALL_FIELDS = ("segments", "blocks", "relations", "levels", "heads", "members")
NUM_SENTENCES = 200


# ----------------------------------------------------------------------------- slow references


def slow_segments(tree: Tree, num_levels: int = 3, min_split_len: int = 4) -> np.ndarray:
    """PSAN division by the spec's words, on the binarized, unary-collapsed tree."""
    def top(node):
        while len(node.children) == 1:
            node = node.children[0]
        return node

    phrases = [top(tree.binarize())]
    rows = []
    for _ in range(num_levels):
        divided = []
        for node in phrases:
            if len(node.leaves()) >= min_split_len:
                divided.extend(top(child) for child in node.children)
            else:
                divided.append(node)
        phrases = divided
        rows.append([index for index, node in enumerate(phrases) for _ in node.leaves()])
    return np.array(rows, np.int32)


def slow_blocks(segments: np.ndarray) -> np.ndarray:
    """int32[T, P, 2]: each level's (start, length) list, -1 padded to the longest level."""
    levels = []
    for row in segments:
        phrases = []
        for position, phrase in enumerate(row):
            if position == 0 or phrase != row[position - 1]:
                phrases.append([position, 0])
            phrases[-1][1] += 1
        levels.append(phrases)
    longest = max(len(phrases) for phrases in levels)
    return np.array([phrases + [[-1, -1]] * (longest - len(phrases)) for phrases in levels],
                    np.int32)


def path_to_root(node: int, parent: list[int]) -> list[int]:
    path = [node]
    while path[-1] != 0:
        path.append(parent[path[-1]])
    return path


def slow_relations(heads, labels, vocab: RelationVocabulary, max_distance: int) -> np.ndarray:
    """The spec's rule pair by pair: SELF, arcs up / down, (a, b) via the lowest common ancestor."""
    parent = [0, *heads]
    up, down = vocab.arc_ids(["", *labels])
    size = len(parent)
    result = np.zeros((size, size), np.int32)
    for i in range(size):
        for j in range(size):
            path_i, path_j = path_to_root(i, parent), path_to_root(j, parent)
            lca = next(node for node in path_i if node in path_j)
            a, b = path_i.index(lca), path_j.index(lca)
            if i == j:
                result[i, j] = SELF_ID
            elif (a, b) == (1, 0):
                result[i, j] = up[i]
            elif (a, b) == (0, 1):
                result[i, j] = down[j]
            elif a + b <= max_distance:
                result[i, j] = vocab.pair_id(a, b)
            else:
                result[i, j] = NONE_ID
    return result


def slow_levels(heads, max_level: int) -> np.ndarray:
    parent = [0, *heads]
    return np.array([min(len(path_to_root(i, parent)) - 1, max_level)
                     for i in range(len(parent))], np.int32)


def slow_node_heads(heads) -> np.ndarray:
    """The second node on each node's path to the [root] node (-1 for the [root] node)."""
    parent = [0, *heads]
    return np.array([(path_to_root(i, parent) + [-1])[1] for i in range(len(parent))], np.int32)


def slow_members(heads) -> np.ndarray:
    arcs = [[dependent, head - 1] for dependent, head in enumerate(heads) if head != 0]
    return np.array(arcs, np.int32).reshape(-1, 2)


# ----------------------------------------------------------------------------- data


def _first_sentences(examples: list[Example]) -> list[Sentence]:
    return [example.sentences[0] for example in examples]


@pytest.fixture(scope="module")
def synthetic_examples() -> list[Example]:
    return synthetic.generate(64, seed=3)


@pytest.fixture(scope="module")
def sst_examples(data_root) -> list[Example]:
    return registry.load("sst5_trees", "dev", data_root)[:NUM_SENTENCES]


@pytest.fixture(scope="module")
def ud_examples(data_root) -> list[Example]:
    return registry.load("ud_ewt", "dev", data_root)[:NUM_SENTENCES]


def _model_cfg(**options) -> ml_collections.ConfigDict:
    return ml_collections.ConfigDict({"name": "structures_test", "parser": "gold", **options})


def _featurizer(examples, kind, fields, vocab=None, **options) -> Featurizer:
    """A featurizer of `fields` with the [root] prefix (relations / levels index it)."""
    return Featurizer(kind=kind, vocab=Vocabulary.build(s.tokens for e in examples
                                                         for s in e.sentences),
                      model_cfg=_model_cfg(**options), structure_fields=fields, prefix=(ROOT,),
                      tags=tag_index(examples) if kind == "tagging" else None,
                      relation_vocab=vocab)


# ----------------------------------------------------------------------------- arrays.py


def test_synthetic_arrays_equal_the_slow_references(synthetic_examples):
    sentences = _first_sentences(synthetic_examples)
    vocab = arrays.build_relation_vocab(sentences)
    spec = arrays.StructureSpec(ALL_FIELDS, relation_vocab=vocab, max_level=2)
    assert spec.output_fields() == {"segments": 2, "blocks": 3, "relations": 2, "levels": 1,
                                    "heads": 1, "members": 2}
    for sentence, computed in zip(sentences, spec(sentences), strict=True):
        n = len(sentence.tokens)
        assert computed.keys() == spec.output_fields().keys()
        chex.assert_shape([computed["segments"], computed["relations"], computed["levels"],
                           computed["heads"], computed["members"]],
                          [(3, n), (n + 1, n + 1), (n + 1,), (n + 1,), (n - 1, 2)])
        expected_segments = slow_segments(tree_from_sentence(sentence))
        np.testing.assert_array_equal(computed["segments"], expected_segments)
        np.testing.assert_array_equal(computed["blocks"], slow_blocks(expected_segments))
        np.testing.assert_array_equal(computed["relations"], slow_relations(
            sentence.heads, sentence.deprels, vocab, max_distance=2))
        np.testing.assert_array_equal(computed["levels"], slow_levels(sentence.heads, 2))
        np.testing.assert_array_equal(computed["heads"], slow_node_heads(sentence.heads))
        np.testing.assert_array_equal(computed["members"], slow_members(sentence.heads))
        assert all(array.dtype == np.int32 for array in computed.values())


def test_ud_psan_segments_come_from_the_derived_dependency_tree(ud_examples):
    sentences = _first_sentences(ud_examples)
    assert all(s.tree is None and s.heads is not None for s in sentences)
    trees = arrays.parse_trees(sentences, ("segments",), "gold")
    derived_counts = []
    for sentence, trees_of_sentence in zip(sentences, trees, strict=True):
        assert trees_of_sentence.dependency is None
        constituency = trees_of_sentence.constituency
        assert constituency.leaves() == list(sentence.tokens)
        computed = arrays.structure_arrays(sentence, trees_of_sentence, ("segments",))
        np.testing.assert_array_equal(computed["segments"], slow_segments(constituency))
        derived_counts.append(computed["segments"].max(axis=1) + 1)
    level_one = np.mean([counts[0] for counts in derived_counts])
    assert 1.0 < level_one <= 2.0  # binarized: at most two phrases at level 1


def test_bad_requests_name_the_fix(synthetic_examples):
    sentence = synthetic_examples[0].sentences[0]
    with pytest.raises(ConfigError, match="unknown structure fields.*'depths'"):
        arrays.StructureSpec(("depths",))
    with pytest.raises(ConfigError, match="relation vocabulary"):
        arrays.StructureSpec(("relations",))
    with pytest.raises(ConfigError, match="unknown structure parser 'stanza'"):
        arrays.parse_trees([sentence], ("segments",), "stanza")
    with pytest.raises(ConfigError, match="benepar gives no dependency trees"):
        arrays.parse_trees([sentence], ("levels",), "benepar")
    other = synthetic_examples[1].sentences[0]
    trees = arrays.parse_trees([other], ("levels",))[0]
    with pytest.raises(StructureError, match="file.txt:3: dependency tree has"):
        arrays.structure_arrays(sentence, trees, ("levels",), source="file.txt:3")
    no_heads = Sentence(tokens=sentence.tokens, tree=sentence.tree)
    with pytest.raises(StructureError, match="no gold dependency heads"):
        arrays.parse_trees([no_heads], ("members",))


# ----------------------------------------------------------------------------- featurizer


@pytest.mark.parametrize("dataset", ["synthetic", "sst", "ud"])
def test_featurizer_arrays_equal_structure_arrays(dataset, request):
    examples, kind, fields = {
        "synthetic": ("synthetic_examples", "single", ALL_FIELDS),
        "sst": ("sst_examples", "single", ("segments", "blocks")),
        "ud": ("ud_examples", "tagging", ALL_FIELDS),
    }[dataset]
    examples = request.getfixturevalue(examples)
    sentences = _first_sentences(examples)
    vocab = arrays.build_relation_vocab(sentences) if "relations" in fields else None
    features = _featurizer(examples, kind, fields, vocab, num_levels=2).many(examples)
    for example, feature in zip(examples, features, strict=True):
        sentence = example.sentences[0]
        tree = (tree_from_sentence(sentence) if sentence.tree is not None
                else arrays.parse_trees([sentence], ("segments",))[0].constituency)
        dependency = (arrays.parse_trees([sentence], ("levels",))[0].dependency
                      if sentence.heads is not None else None)
        expected = arrays.structure_arrays(sentence, arrays.SentenceTrees(tree, dependency),
                                           fields, relation_vocab=vocab, num_levels=2)
        structure_keys = {key for key in feature if key.startswith("sentence/")} - {
            "sentence/tokens"}
        assert structure_keys == {f"sentence/{key}" for key in expected}
        for key, array in expected.items():
            np.testing.assert_array_equal(feature[f"sentence/{key}"], array)
        assert len(feature["sentence/tokens"]) == len(sentence.tokens) + 1


def test_batched_arrays_are_the_natural_ones_then_padding(ud_examples):
    vocab = arrays.build_relation_vocab(_first_sentences(ud_examples))
    features = _featurizer(ud_examples, "tagging", ALL_FIELDS, vocab).many(ud_examples)
    longest = max(len(f["sentence/tokens"]) for f in features)
    batcher = Batcher(features, batch_size=32, buckets=bucket_lengths(longest, 16),
                      shuffle=False)
    seen = set()
    for batch in batcher.epoch(0):
        length = batch["sentence/tokens"].shape[1]
        for key, padded in batch.items():
            if key in ("sentence/lengths", "weight", "index"):
                continue
            pad, axes = pad_rule(key)
            for row, index in enumerate(batch["index"]):
                if index < 0:
                    assert np.all(padded[row] == pad)
                    continue
                natural = features[index][key]
                expected = np.full(padded.shape[1:], pad, padded.dtype)
                expected[tuple(slice(0, size) for size in np.shape(natural))] = natural
                np.testing.assert_array_equal(padded[row], expected)
                assert all(size == length for size, axis in zip(padded.shape[1:], axes,
                                                                strict=True)
                           if axis == BUCKET_AXIS)
        seen.update(int(i) for i in batch["index"] if i >= 0)
    assert seen == set(range(len(features)))


def test_relation_vocabulary_saved_by_a_run_gives_the_same_ids(ud_examples, tmp_path):
    train, rest = ud_examples[:150], ud_examples[150:]
    fields = ("relations", "levels")
    built = relation_vocabulary(tmp_path, _model_cfg(), fields, train)
    assert relation_vocabulary(tmp_path, _model_cfg(), ("segments",), train) is None
    built.save(tmp_path / RELATIONS_FILE)
    # A later run (resume, evaluation) loads the file rather than rebuilding from its train split.
    reloaded = relation_vocabulary(tmp_path, _model_cfg(), fields, rest)
    assert reloaded == built and reloaded.names == built.names
    assert relation_vocabulary(tmp_path / "fresh", _model_cfg(), fields, rest) != built
    first = _featurizer(rest, "tagging", fields, built).many(rest)
    second = _featurizer(rest, "tagging", fields, reloaded).many(rest)
    for one, two in zip(first, second, strict=True):
        np.testing.assert_array_equal(one["sentence/relations"], two["sentence/relations"])
    with pytest.raises(ConfigError, match="'relations'.*relation vocabulary"):
        _featurizer(rest, "tagging", fields, None)


def test_spacy_trees_are_parsed_once_and_cached(synthetic_examples, tmp_path, monkeypatch):
    examples = synthetic_examples[:24]
    sentences = _first_sentences(examples)
    vocab = jtfds.family_relation_vocab("spacy")
    featurizer = _featurizer(examples, "single", ALL_FIELDS, vocab, parser="spacy")
    cached = Featurizer(**{**_featurizer_fields(featurizer), "parse_cache_dir": tmp_path})
    first = cached.many(examples)
    assert len(list(tmp_path.glob("spacy-*.json.gz"))) == 1
    trees = arrays.parse_trees(sentences, ALL_FIELDS, "spacy")
    monkeypatch.setattr(parsers.SpacyParser, "parse", _must_not_parse)
    again = cached.many(examples)
    for sentence, trees_of_sentence, one, two in zip(sentences, trees, first, again, strict=True):
        assert trees_of_sentence.dependency.tokens == sentence.tokens
        expected = arrays.structure_arrays(sentence, trees_of_sentence, ALL_FIELDS,
                                           relation_vocab=vocab)
        for key, array in expected.items():
            np.testing.assert_array_equal(one[f"sentence/{key}"], array)
            np.testing.assert_array_equal(two[f"sentence/{key}"], array)


def _must_not_parse(self, sentences):
    raise AssertionError("parsed again although the parse cache holds these sentences")


def _featurizer_fields(featurizer: Featurizer) -> dict:
    return {name: getattr(featurizer, name) for name in (
        "kind", "vocab", "model_cfg", "structure_fields", "prefix", "tags", "relation_vocab")}


# ----------------------------------------------------------------------------- TFDS


def _write_slice(source, target, keep_lines: int) -> None:
    target.write_text("".join(source.read_text(encoding="utf-8").splitlines(True)[:keep_lines]),
                      encoding="utf-8")


def _write_conllu_slice(source, target, keep_sentences: int) -> None:
    sentences = source.read_text(encoding="utf-8").split("\n\n")[:keep_sentences]
    target.write_text("\n\n".join(sentences) + "\n\n", encoding="utf-8")


@pytest.fixture(scope="module")
def tfds_builds(data_root, tmp_path_factory):
    """Small slices of SST and UD-EWT laid out like shared/data, and the full synthetic data, built
    once with ready-made structure configs: {(dataset, config): (records by split, examples)}."""
    manual = tmp_path_factory.mktemp("manual")
    (manual / "sst_ptb_trees").mkdir()
    for split in ("train", "dev", "test"):
        _write_slice(data_root / "sst_ptb_trees" / f"{split}.txt",
                     manual / "sst_ptb_trees" / f"{split}.txt", 40)
    ud = manual / "ud_english_ewt"
    ud.mkdir()
    for path in sorted((data_root / "ud_english_ewt").glob("*.conllu")):
        _write_conllu_slice(path, ud / path.name, 30)
    tfds_dir = tmp_path_factory.mktemp("tfds")
    builds = {}
    for dataset, config in (("sst5_trees", "psan_gold"), ("ud_ewt", "dt_gold"),
                            ("ud_ewt", "tree_lstm_gold"), ("ud_ewt", "psan_gold"),
                            ("synthetic", "hyper_gold")):
        jtfds.prepare(dataset, tfds_dir, manual_dir=manual, config=config)
        sources = tfds.data_source(f"jaxenc_{dataset}/{config}", data_dir=str(tfds_dir),
                                   download=False)
        records = {split: [source[i] for i in range(len(source))]
                   for split, source in sources.items()}
        builds[dataset, config] = records
    return builds


@pytest.mark.parametrize("dataset, config, kind", [
    ("sst5_trees", "psan_gold", "single"), ("ud_ewt", "dt_gold", "tagging"),
    ("ud_ewt", "tree_lstm_gold", "tagging"), ("ud_ewt", "psan_gold", "tagging"),
    ("synthetic", "hyper_gold", "single")])
def test_tfds_arrays_equal_the_featurizer_arrays(tfds_builds, dataset, config, kind):
    records = tfds_builds[dataset, config]
    spec = jtfds.structure_spec_of(config)
    assert sorted(records) == ["dev", "test", "train"]
    for split, split_records in records.items():
        examples = [jtfds.to_example(record) for record in split_records]
        featurizer = _featurizer(examples, kind, spec.fields, spec.relation_vocab)
        features = featurizer.many(examples[:NUM_SENTENCES])
        for record, feature in zip(split_records, features, strict=False):
            stored = jtfds.structures_of(record)
            assert stored.keys() == {f"sentence/{key}" for key in spec.output_fields()}
            for key, array in stored.items():
                assert array.dtype == np.int32
                np.testing.assert_array_equal(array, feature[key], err_msg=f"{split} {key}")
