"""The one encode path of a trained encoder: sentences in, sentence vectors out.

`Encoder` is what `jaxenc.load(EXPORT_DIR)` returns and what `Encoder.from_workdir(WORKDIR)`
builds from a training run (the transfer evaluation's `CheckpointEncoder` is one):

    enc = jaxenc.load("exports/disan_trec")
    vectors = enc.encode(["What is the capital of France ?", "hello"])  # float32[2, D]
    batches = enc.featurize(texts, batch_size=64)  # padded numpy batches, one per bucket shape
    out = jax.jit(enc.apply)(enc.params, batches[0])  # float32[64, D]

What a sentence may be (`SentenceLike`):
- a string, tokenised as the training data was (`Encoder.tokenizer`, the training dataset's
  `DatasetInfo.tokenizer`): "whitespace" where the dataset ships tokenised text (TREC, SST, MR,
  the synthetic data: its tokens are its text split on whitespace), "text" =
  `jaxenc.text_io.tokenize` where the reader tokenises raw text (SICK, MRPC, STS, SNLI, a
  corpus). A dataset's own text so gives its own tokens;
- a list of tokens, used as given;
- a `jaxenc.records.Sentence` (a reader's record, with its gold trees when it has them).

Featurizing is the training featurizer's (`jaxenc.data.featurize.Featurizer`) with the run's
vocabulary, lower-case fallback, OOV policy, prefix tokens, relation vocabulary and structure
options, so `features` of a dataset's own sentences equal the features the model was trained and
evaluated on. Structures come from the run's parser. A model trained on gold trees (parser
"gold") reads the gold trees of the records that have them and parses the other sentences
(strings, token lists) with `text_parser` (spaCy by default: other trees than the gold ones, so
other vectors than a record with its gold tree would get).

Batches and long sentences (`jaxenc.encode_batching`): a batch holds at most `batch_size` rows
and `token_budget` tokens, so every training bucket has `batch_size` rows (the shapes of an
export's functions) and a longer bucket fewer; a sentence over `max_length` tokens (default
DEFAULT_MAX_LENGTH = 512) is cut to its first ones with a warning or refused (`long_sentences`).
`encode` runs on one device (the batch is not sharded). Sentences without tokens (an empty
string; every word dropped under data.oov="drop") are in no batch and encode to zeros, also with
`normalize_embeddings`; nothing is ever nan.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import ml_collections
import numpy as np

from jaxenc import encode_batching, prediction
from jaxenc.data.batching import bucket_lengths
from jaxenc.data.vocab import Vocabulary
from jaxenc.encode_batching import INDEX, ROLE, Batch
from jaxenc.errors import ConfigError
from jaxenc.records import Example, Sentence
from jaxenc.structures import parsers
from jaxenc.text_io import TOKENIZERS

SentenceLike = str | Sequence[str] | Sentence

DEFAULT_BATCH_SIZE = 64
DEFAULT_MAX_LENGTH = 512  # tokens of a sentence, prefix tokens included (encode_batching)
LONG_SENTENCES = ("truncate", "error")  # the policies for a sentence over max_length
# A one-word sentence with both gold trees: the shapes of a bucket without parsing anything.
_PROBE = Sentence(tokens=("probe",), text="probe", tree="(S (NN probe))", heads=(0,),
                  deprels=("root",))


def short_digest(*parts: object) -> str:
    """12 hex digits identifying `parts` (cache names)."""
    return hashlib.sha1("\x1f".join(map(str, parts)).encode("utf-8")).hexdigest()[:12]


def as_sentence(item: SentenceLike, tokenizer: str = "whitespace") -> Sentence:
    """A `Sentence` of a string (tokenised by `TOKENIZERS[tokenizer]`), of a list of tokens or a
    Sentence itself. TypeError for anything else."""
    if isinstance(item, Sentence):
        return item
    if isinstance(item, str):
        return Sentence(tokens=TOKENIZERS[tokenizer](item), text=item)
    if isinstance(item, Sequence) and all(isinstance(token, str) for token in item):
        return Sentence(tokens=tuple(item), text=" ".join(item))
    raise TypeError(f"cannot encode {type(item).__name__} {str(item)[:60]!r}: pass a string, a "
                    "list of tokens or a jaxenc.records.Sentence")


def default_text_parser(structure_fields: Sequence[str]) -> str:
    """The parser for sentences without gold trees: "spacy-constituency" when only phrase trees
    are needed, else "spacy" (it gives both kinds)."""
    from jaxenc.structures.arrays import CONSTITUENCY, FIELD_TREES

    kinds = {FIELD_TREES[field] for field in structure_fields}
    return "spacy-constituency" if kinds == {CONSTITUENCY} else "spacy"


@functools.lru_cache(maxsize=32)
def _jitted_apply(model_json: str, vocab_size: int) -> Callable[..., jax.Array]:
    """The jitted `Encoder.apply` of a model config (JSON) and word-table size, shared by every
    Encoder of that model: one compilation per batch shape in a process."""
    from jaxenc.models.registry import build_encoder

    module = build_encoder(json.loads(model_json), vocab_size)

    @jax.jit
    def jitted(params: dict, fields: Mapping[str, Any], dropout_rng: jax.Array | None = None
               ) -> jax.Array:
        rngs = {} if dropout_rng is None else {"dropout": dropout_rng}
        return module.apply({"params": params}, fields, train=dropout_rng is not None,
                            rngs=rngs)["sentence"]

    def apply(params: dict, batch: Mapping[str, Any], dropout_rng: jax.Array | None = None
              ) -> jax.Array:
        return jitted(params, {key: value for key, value in batch.items() if key != INDEX},
                      dropout_rng)

    apply.jitted = jitted  # without the "index" step: what jax.export lowers
    return apply


class Encoder:
    """A trained sentence encoder: featurize -> apply -> float32[N, D] vectors (module doc).

    Args:
      model_cfg: the model section of the training config (`name` + hyperparameters).
      params: the encoder's parameters (`params["embed"]["embedding"]` float32[V, d]).
      vocab: the input vocabulary (its `lowercase` as trained).
      lowercase_fallback: unknown words are looked up lower-cased too (data.lowercase_fallback).
      found: bool[V], the words that have a vector when words without one are dropped
        (data.oov="drop"), else None.
      relation_vocab: the relation ids of a model with the "relations" field.
      tokenizer: a key of `jaxenc.text_io.TOKENIZERS`, how strings become tokens.
      text_parser: the parser of sentences without gold trees when the model's parser is "gold"
        (default: `default_text_parser`; None for a model without structure fields).
      buckets: the training bucket lengths; bucket_step: their step, for longer sentences.
      expansion: the training vocabulary's `ExpandedVocabulary` (data.expand_vocabulary): each
        call first adds the words of its sentences that the vectors file has.
      parse_cache_dir: where parser outputs are cached (None: not cached).
      dim: D, the size of a sentence vector, when known (else computed when needed).
      name: identifies the encoder and its weights (the transfer evaluation's cache key).
      max_length: the most tokens of a sentence encoded, prefix tokens included (encode_batching).
      long_sentences: "truncate" a longer sentence to its first `max_length` tokens (one
        warning per call) or raise an "error" naming it.
      token_budget: the most tokens (rows x bucket length) of a batch; None: `batch_size` x the
        largest training bucket, per call.
      head: the run's task head (`jaxenc.prediction.Head`: classification or relatedness), what
        `predict` applies; None for an encoder without one.
    """

    def __init__(self, model_cfg: Mapping[str, Any], params: dict, vocab: Vocabulary, *,
                 lowercase_fallback: bool, found: np.ndarray | None = None,
                 relation_vocab: Any = None, tokenizer: str = "whitespace",
                 text_parser: str | None = None, buckets: Sequence[int] = (64,),
                 bucket_step: int = 8, expansion: Any = None,
                 parse_cache_dir: str | os.PathLike | None = None, dim: int | None = None,
                 name: str = "encoder", max_length: int = DEFAULT_MAX_LENGTH,
                 long_sentences: str = "truncate", token_budget: int | None = None,
                 head: prediction.Head | None = None):
        from jaxenc.models.registry import structure_spec

        if tokenizer not in TOKENIZERS:
            raise ConfigError(f"unknown tokenizer {tokenizer!r} (fix: one of "
                              f"{', '.join(TOKENIZERS)})")
        if long_sentences not in LONG_SENTENCES:
            raise ConfigError(f"long_sentences={long_sentences!r} (fix: one of "
                              f"{', '.join(LONG_SENTENCES)}; eval.transfer: --long_sentences)")
        if token_budget is not None and token_budget < 1:
            raise ConfigError(f"token_budget={token_budget} (fix: a positive number of tokens, "
                              "or None for batch_size x the largest training bucket)")
        self._model_cfg = ml_collections.ConfigDict(dict(model_cfg))
        needs = structure_spec(self._model_cfg)
        self.structure_fields, self.prefix_tokens = needs.fields, needs.prefix_tokens
        if max_length <= len(self.prefix_tokens):
            raise ConfigError(f"max_length={max_length} leaves no word after the model's "
                              f"{len(self.prefix_tokens)} prefix tokens (fix: a larger max_length)")
        self._packing = None if needs.packing is None else dataclasses.replace(
            needs.packing, capacity="worst", groups=1, epochs=1)
        self._params, self.vocab, self.found = params, vocab, found
        self.lowercase_fallback, self.relation_vocab = lowercase_fallback, relation_vocab
        self.tokenizer = tokenizer
        structured = bool(self.structure_fields)  # else no parser is ever used
        self.parser = self._model_cfg.get("parser", "gold") if structured else None
        self.text_parser = (text_parser or default_text_parser(self.structure_fields)
                            if structured else None)
        self.buckets, self.bucket_step = tuple(int(b) for b in buckets), int(bucket_step)
        self._expansion, self.parse_cache_dir, self.name = expansion, parse_cache_dir, name
        self._dim = dim
        self.max_length, self.long_sentences = int(max_length), long_sentences
        self.token_budget = token_budget
        self.head = head

    @classmethod
    def from_workdir(cls, workdir: str | os.PathLike, **overrides: Any) -> Encoder:
        """The encoder of a `python -m train.main` run directory (its best checkpoint)."""
        return cls(**{**workdir_arguments(workdir), **overrides})

    @classmethod
    def initialised(cls, model_cfg: Mapping[str, Any], sentences: Sequence[SentenceLike], *,
                    seed: int = 0, **options: Any) -> Encoder:
        """An encoder with freshly initialised weights (no training), for pictures of what a
        model computes before it learns (`jaxenc.viz.attention_maps`) and for tests.

        Args:
          model_cfg: a model section (`name` + hyperparameters, e.g.
            `jaxenc.configs.model_config("psan", parser="gold")`).
          sentences: its vocabulary is their words (strings are split on whitespace); their
            dependency trees (the model's parser: "gold" reads the records' own) give the
            relation vocabulary of a model with the "relations" field.
          seed: the initialisation's PRNG seed.
          options: other constructor arguments (`lowercase_fallback` defaults to True).
        """
        from jaxenc.models.registry import build_encoder

        options.setdefault("lowercase_fallback", True)
        items = [as_sentence(item, options.get("tokenizer", "whitespace")) for item in sentences]
        vocab = Vocabulary.build(item.tokens for item in items)
        encoder = cls(model_cfg, {}, vocab, **options)
        if "relations" in encoder.structure_fields and encoder.relation_vocab is None:
            from jaxenc.structures.arrays import build_relation_vocab
            from jaxenc.structures.relations import DEFAULT_MAX_DISTANCE

            config = encoder.model_config
            encoder.relation_vocab = build_relation_vocab(
                items, encoder.parser,
                max_distance=config.get("max_distance", DEFAULT_MAX_DISTANCE),
                keep_subtypes=config.get("keep_subtypes", False),
                direction=config.get("relation_direction", "split"))
        fields = {key: value for key, value in
                  encoder.example_batch(encoder.buckets[0], 1).items() if key != INDEX}
        module = build_encoder(encoder._model_cfg, len(vocab))
        encoder._params = jax.jit(lambda key: module.init(key, fields, train=False))(
            jax.random.key(seed))["params"]
        return encoder

    # ------------------------------------------------------------------------- properties

    @property
    def model_config(self) -> dict[str, Any]:
        """The model section (`name` + hyperparameters), a plain dict."""
        return self._model_cfg.to_dict()

    @property
    def params(self) -> dict:
        """The encoder's parameters, a plain pytree of arrays (nested dicts)."""
        return self._params

    @property
    def apply(self) -> Callable[..., jax.Array]:
        """`apply(params, batch, dropout_rng=None) -> float32[B, D]`: the sentence vectors of a
        batch (`featurize`'s; its "index" is ignored). Pure and jitted: downstream code can jit,
        vmap, grad and shard it. With `dropout_rng` (a PRNG key) it runs in training mode
        (dropout on), for fine-tuning. `apply.jitted(params, fields, dropout_rng)` is the jitted
        function itself (fields without "index")."""
        table = self._params["embed"]["embedding"]
        return _jitted_apply(json.dumps(self.model_config, sort_keys=True), int(table.shape[0]))

    @property
    def dim(self) -> int:
        """D, the size of a sentence vector."""
        if self._dim is None:
            probe = self.example_batch(self.buckets[0], 1)
            self._dim = int(jax.eval_shape(self.apply, self.params, probe).shape[-1])
        return self._dim

    # ------------------------------------------------------------------------- featurizing

    def sentences(self, items: Sequence[SentenceLike]) -> list[Sentence]:
        """`items` as Sentences (strings tokenised by `tokenizer`)."""
        return [as_sentence(item, self.tokenizer) for item in items]

    def features(self, items: Sequence[SentenceLike]) -> list[dict[str, np.ndarray] | None]:
        """Per sentence, its fields at natural length as the training featurizer computes them
        (`tokens` int32[n] with the prefix tokens first, n <= max_length, structure arrays such
        as `segments` int32[T, n]), or None for a sentence without tokens (it encodes to zeros).
        A sentence over `max_length` tokens is cut or refused (`long_sentences`,
        encode_batching)."""
        sentences = encode_batching.within_max_length(
            self.sentences(items), self.max_length, len(self.prefix_tokens), self.long_sentences)
        self.expand_vocabulary(token for sentence in sentences for token in sentence.tokens)
        by_parser = collections.defaultdict(list)
        for index, sentence in enumerate(sentences):
            if sentence.tokens:
                by_parser[self._parser_of(sentence)].append(index)
        features: list[dict[str, np.ndarray] | None] = [None] * len(sentences)
        prefix = ROLE + "/"
        for parser, members in by_parser.items():
            examples = [Example(sentences=(sentences[i],), label=0, uid=f"sentence {i}")
                        for i in members]  # the "single" featurizer wants a label
            for index, example in zip(members, self._featurizer(parser).many(examples),
                                      strict=True):
                fields = {key[len(prefix):]: value for key, value in example.items()
                          if key.startswith(prefix)}
                features[index] = fields if len(fields["tokens"]) else None
        return features

    def featurize(self, items: Sequence[SentenceLike],
                  batch_size: int = DEFAULT_BATCH_SIZE) -> list[Batch]:
        """The batches `encode` runs: dicts of numpy arrays `tokens` int32[B, L], `lengths`
        int32[B], the structure fields padded to L (e.g. `relations` int32[B, L, L]) and
        `index` int32[B] (each row's position in `items`, -1 for filler rows); L is a bucket
        length and B <= `rows_per_batch(L, batch_size)` (encode_batching: B = batch_size in the
        training buckets, the shapes of an export's functions). Sentences without tokens are in
        no batch."""
        return list(self._batches(self.features(items), batch_size)[1])

    def example_batch(self, length: int, batch_size: int) -> Batch:
        """A batch of bucket `length` with `batch_size` rows (one one-word sentence, then filler
        rows): the shapes and dtypes of every batch of that shape (what the exported functions
        take)."""
        (probe,) = self._featurizer("gold").many([Example(sentences=(_PROBE,), label=0)])
        fields = {key.split("/", 1)[1]: value for key, value in probe.items()
                  if key.startswith(ROLE + "/")}
        return next(encode_batching.assemble([fields], np.zeros(1, np.int64), length,
                                             batch_size, self._packing))

    def rows_per_batch(self, length: int, batch_size: int) -> int:
        """The rows of a full batch of bucket `length`: `batch_size` where batch_size x length
        fits the token budget, else the largest power of two <= budget // length, at least 1."""
        return encode_batching.rows_per_batch(length, batch_size, self._budget(batch_size))

    def bucket_lengths(self, longest: int) -> tuple[int, ...]:
        """The training buckets, then multiples of the step up to one holding `longest`."""
        return encode_batching.bucket_lengths(self.buckets, self.bucket_step, longest)

    def expand_vocabulary(self, words: Iterable[str]) -> None:
        """With the run's data.expand_vocabulary: adds the `words` that have a vector in its
        data.embeddings (jaxenc.data.expansion; the word table grows in powers of two, each size
        one more compilation). `features` does so with its sentences' words. Else nothing."""
        expansion = self._expansion
        if expansion is None:
            return
        expansion.add(words)
        if len(expansion.vocab) != len(self.vocab):
            self.vocab, self.found = expansion.vocab, expansion.found
            self._params = {**self._params, "embed": {
                **self._params["embed"], "embedding": jax.device_put(expansion.table)}}

    # ------------------------------------------------------------------------- encoding

    def encode(self, sentences: SentenceLike | Sequence[SentenceLike],
               batch_size: int = DEFAULT_BATCH_SIZE, show_progress_bar: bool | None = None,
               normalize_embeddings: bool = False) -> np.ndarray:
        """float32[N, D] sentence vectors, row i for sentences[i] (float32[D] for a single
        string or Sentence). Batches hold at most `batch_size` rows and `token_budget` tokens (or
        one row); a sentence over `max_length` tokens is cut or refused (`long_sentences`;
        encode_batching).

        Args:
          sentences: strings, token lists or Sentences (module doc); an empty list gives [0, D].
          batch_size: the most rows of a batch; with the token budget it sets each bucket's
            rows (`rows_per_batch`, encode_batching: one compilation per batch shape).
          show_progress_bar: None: on a terminal only; the same for the parser's bar (from
            `parsers.PROGRESS_MIN_SENTENCES` sentences on).
          normalize_embeddings: unit L2 norm (a zero vector stays zero).
        """
        from tqdm import tqdm

        single = isinstance(sentences, (str, Sentence))
        items = [sentences] if single else list(sentences)
        with parsers.progress_bars(show_progress_bar):
            features = self.features(items)
        num_batches, batches = self._batches(features, batch_size)
        encoded = None
        params, apply = self.params, self.apply
        for batch in tqdm(batches, total=num_batches, unit="batch",
                          desc=f"encoding {len(items)} sentences",
                          disable=None if show_progress_bar is None else not show_progress_bar):
            vectors = np.asarray(apply(params, batch))
            if encoded is None:
                encoded = np.zeros((len(items), vectors.shape[1]), np.float32)
            real = batch[INDEX] >= 0
            encoded[batch[INDEX][real]] = vectors[real]
        if encoded is None:  # no sentence with tokens
            encoded = np.zeros((len(items), self.dim), np.float32)
        if normalize_embeddings:
            norms = np.linalg.norm(encoded, axis=1, keepdims=True)
            encoded = np.divide(encoded, norms, out=np.zeros_like(encoded), where=norms > 0)
        return encoded[0] if single else encoded

    def predict(self, items: Sequence[SentenceLike] | Sequence[tuple[SentenceLike, SentenceLike]],
                batch_size: int = DEFAULT_BATCH_SIZE,
                show_progress_bar: bool | None = None) -> prediction.Predictions:
        """The run's task head on `items`: sentences (classification of single sentences) or
        (first, second) pairs (pair classification, relatedness), encoded as `encode` does.

        Returns `Predictions`: probabilities float32[N, K] and the class names (labels) or the
        expected scores (relatedness), row i for items[i]. ConfigError for an encoder without a
        head (a tagging or seq2seq run, or an export written without one) or items that are not
        pairs where the head reads pairs.
        """
        head = self.head
        if head is None:
            raise ConfigError(f"{self.name} has no task head to predict with: it encodes only "
                              "(fix: export a classification or relatedness run, then "
                              "jaxenc.load(...).predict)")
        items = list(items)
        if head.kind == "single":
            u, v = self.encode(items, batch_size, show_progress_bar), None
        else:
            bad = next((i for i, item in enumerate(items) if isinstance(item, (str, Sentence))
                        or len(item) != 2), None)
            if bad is not None:
                raise ConfigError(f"item {bad} is not a (first, second) pair: the head of this "
                                  f"{head.kind} run reads sentence pairs (fix: pass a list of "
                                  "2-tuples of sentences)")
            u = self.encode([first for first, _ in items], batch_size, show_progress_bar)
            v = self.encode([second for _, second in items], batch_size, show_progress_bar)
        probabilities = head.apply(head.params, u, v) if items else np.zeros(
            (0, head.num_classes), np.float32)
        return head.predictions(np.asarray(probabilities))

    # ------------------------------------------------------------------------- internals

    def _parser_of(self, sentence: Sentence) -> str:
        """The run's parser, or `text_parser` for a sentence without the gold trees it needs."""
        from jaxenc.structures.arrays import CONSTITUENCY, DEPENDENCY, FIELD_TREES

        if self.parser != "gold":
            return self.parser or "gold"  # None: no structure fields, nothing is parsed
        kinds = {FIELD_TREES[field] for field in self.structure_fields}
        has_heads = sentence.heads is not None
        has_gold = ((DEPENDENCY not in kinds or has_heads)  # a phrase tree derives from heads
                    and (CONSTITUENCY not in kinds or has_heads or sentence.tree is not None))
        return "gold" if has_gold else self.text_parser

    def _featurizer(self, parser: str) -> Any:
        """The training featurizer of a "single" sentence, with `parser`."""
        from jaxenc.data.featurize import Featurizer

        model_cfg = ml_collections.ConfigDict(self.model_config)
        if "parser" in model_cfg:
            model_cfg.parser = parser
        return Featurizer(
            kind="single", vocab=self.vocab, model_cfg=model_cfg,
            structure_fields=self.structure_fields, prefix=self.prefix_tokens, found=self.found,
            lowercase_fallback=self.lowercase_fallback, relation_vocab=self.relation_vocab,
            parse_cache_dir=self.parse_cache_dir, keep_empty=True)

    def _budget(self, batch_size: int) -> int:
        """The most tokens of a batch: `token_budget`, else batch_size x the largest training
        bucket."""
        return self.token_budget or batch_size * self.buckets[-1]

    def _batches(self, features: Sequence[dict[str, np.ndarray] | None], batch_size: int
                 ) -> tuple[int, Iterator[Batch]]:
        """(number of batches, the batches) of the features that are not None
        (`encode_batching.batches`)."""
        return encode_batching.batches(features, batch_size, self.buckets, self.bucket_step,
                                       self._budget(batch_size), self._packing)


def workdir_arguments(workdir: str | os.PathLike) -> dict[str, Any]:
    """`Encoder` arguments of a training run directory: its best checkpoint, vocabulary, relation
    vocabulary, featurizing options and buckets; with data.expand_vocabulary the expansion from
    data.embeddings; named `ckpt-<folder>-<digest of its path and best steps>`."""
    from jaxenc.data.embeddings import load_vectors
    from jaxenc.data.expansion import ExpandedVocabulary
    from jaxenc.data.featurize import RELATIONS_FILE
    from jaxenc.data.registry import DATASETS
    from jaxenc.structures.relations import RelationVocabulary
    from jaxenc.training.checkpointing import load_trained_model
    from jaxenc.training.run_files import BEST_DIR, saved_dataset

    workdir = Path(workdir)
    _, model_params, vocab, config = load_trained_model(workdir)
    params = model_params["encoder"]
    data = config.data
    found = None
    if data.embeddings and data.oov == "drop":  # words without a vector are dropped
        found = load_vectors(data.embeddings, vocab, oov="drop",
                             lowercase_fallback=data.lowercase_fallback).found
    expansion = None
    if data.get("expand_vocabulary"):
        expansion = ExpandedVocabulary(vocab, params["embed"]["embedding"], data.embeddings, found,
                                       lowercase_fallback=data.lowercase_fallback)
    relations = workdir / RELATIONS_FILE  # the run's relation ids, if its model has any
    dataset = DATASETS.get(config.task.dataset)
    resolved = workdir.resolve()
    best = sorted(p.name for p in (workdir / BEST_DIR).iterdir()) if (
        workdir / BEST_DIR).is_dir() else []
    return dict(
        model_cfg=config.model, params=params, vocab=vocab,
        lowercase_fallback=data.lowercase_fallback, found=found,
        relation_vocab=RelationVocabulary.load(relations) if relations.is_file() else None,
        tokenizer=dataset.tokenizer if dataset else "whitespace",
        buckets=bucket_lengths(data.max_length, data.bucket_step), bucket_step=data.bucket_step,
        expansion=expansion, parse_cache_dir=workdir / "parse_cache",
        name=f"ckpt-{resolved.name}-{short_digest(resolved, *best)}",
        head=prediction.head_of_run(config, saved_dataset(workdir), model_params))
