"""Tasks: an encoder composed with a head, plus the task's loss and metrics.

A `Task` reads a batch (flat dict, docs/ARCHITECTURE.md "Batches"):
- `build_model(encoder)` -> flax module `(batch, *, train) -> outputs` (the encoder is a submodule
  named "encoder", so its word table sits at params["encoder"]["embed"]["embedding"]);
- `loss(outputs, batch)` -> scalar, a mean weighted by `batch["weight"]` (filler rows count 0);
- `eval_outputs(outputs, batch)` -> per-example arrays [B] that the host concatenates over a split;
- `summarize(collected)` -> named metrics of the split (`primary_metric` among them, higher is
  better; the loop keeps the checkpoint that maximises it);
- classification and relatedness tasks also give `vector_head()`: their head alone, over
  sentence vectors (what a trained run's export predicts with, `jaxenc.prediction`);
- generating tasks (`generates`, e.g. translation) also give `test_outputs(model, params,
  batch)` (jittable per-example outputs such as decoded tokens, computed once on the test split
  with the best parameters) and `test_metrics(collected, examples)` (e.g. sacrebleu's BLEU, with
  lines for results.md).
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxenc.data.batching import sentence_fields
from jaxenc.data.featurize import target_sentence
from jaxenc.data.vocab import BOS, UNK, Vocabulary
from jaxenc.errors import ConfigError
from jaxenc.layers.embed import EMBEDDING_PARAM
from jaxenc.layers.masks import length_mask
from jaxenc.layers.transformer import TransformerDecoder
from jaxenc.models.registry import own_decoder
from jaxenc.records import Example
from jaxenc.tasks import decoding, losses, metrics
from jaxenc.tasks.heads import (
    ClassifierHead,
    RelatednessHead,
    expected_score,
    pair_features,
    parse_pair_features,
)

Batch = Mapping[str, jax.Array]
Outputs = dict[str, jax.Array]


def weighted_mean(values: jax.Array, weights: jax.Array) -> jax.Array:
    """sum(w * x) / max(sum(w), 1) over all elements (same shapes)."""
    return jnp.sum(values * weights) / jnp.maximum(jnp.sum(weights), 1.0)


class Task(abc.ABC):
    """One supervised objective over batches of a dataset kind (module docstring)."""

    kind: str  # the dataset kind (jaxenc.data.featurize.ROLES says which roles a batch has)
    primary_metric: str
    generates: bool = False  # whether test_outputs / test_metrics add test metrics

    @abc.abstractmethod
    def build_model(self, encoder: nn.Module) -> nn.Module:
        """The trainable module: encoder + head."""

    @abc.abstractmethod
    def loss(self, outputs: Outputs, batch: Batch) -> jax.Array:
        """Scalar training loss of a batch."""

    @abc.abstractmethod
    def eval_outputs(self, outputs: Outputs, batch: Batch) -> dict[str, jax.Array]:
        """Per-example quantities [B] that `summarize` turns into metrics."""

    @abc.abstractmethod
    def summarize(self, collected: Mapping[str, np.ndarray]) -> dict[str, float]:
        """Metrics of a split from the concatenated `eval_outputs` of its real examples."""

    def test_outputs(self, model: nn.Module, params: dict, batch: Batch) -> dict[str, jax.Array]:
        """Per-example outputs [B, ...] for `test_metrics` (generating tasks only; jittable)."""
        raise NotImplementedError(f"{type(self).__name__} generates nothing")

    def test_metrics(self, collected: Mapping[str, np.ndarray],
                     examples: Sequence[Example]) -> tuple[dict[str, float], list[str]]:
        """(metrics, lines for results.md) from the concatenated `test_outputs` of the real test
        examples; `collected["index"]` is each row's position in `examples`."""
        raise NotImplementedError(f"{type(self).__name__} generates nothing")


# ----------------------------------------------------------------------------- heads alone


class VectorHead(nn.Module):
    """A classification or relatedness task's head over sentence vectors: u [B, D] (and v
    [B, D] of the second sentences of pairs) -> {"logits": [B, K]} or {"log_probs": [B, K]}, as
    the task model computes them from its encoder's vectors. Its one submodule is named "head",
    as in the task model, so a trained model's `params["head"]` apply as they are."""

    head: nn.Module
    kind: str  # "single", "pair" or "relatedness"
    features: Sequence[str] = ()

    def __call__(self, u: jax.Array, v: jax.Array | None = None) -> Outputs:
        if self.kind == "relatedness":
            return {"log_probs": self.head(u, v)}
        if self.kind == "pair":
            u = pair_features(u, v, self.features)
        return {"logits": self.head(u, train=False)}


# ----------------------------------------------------------------------------- classification


class SentenceClassifier(nn.Module):
    """batch {sentence/...} -> {"logits": [B, K]}: head(encoder(sentence)["sentence"])."""

    encoder: nn.Module
    head: nn.Module

    def __call__(self, batch: Batch, *, train: bool) -> Outputs:
        encoded = self.encoder(sentence_fields(batch, "sentence"), train=train)
        return {"logits": self.head(encoded["sentence"], train=train)}


class PairClassifier(nn.Module):
    """batch {first/..., second/...} -> {"logits": [B, K]} over pair features of a TIED encoder."""

    encoder: nn.Module
    head: nn.Module
    features: Sequence[str]

    def __call__(self, batch: Batch, *, train: bool) -> Outputs:
        u = self.encoder(sentence_fields(batch, "first"), train=train)["sentence"]
        v = self.encoder(sentence_fields(batch, "second"), train=train)["sentence"]
        return {"logits": self.head(pair_features(u, v, self.features), train=train)}


class ClassificationTask(Task):
    """Single-sentence ("single") or sentence-pair ("pair") classification, cross-entropy loss.

    Metrics: accuracy, loss, and F1 of class 1 for binary tasks (MRPC's second number).
    """

    primary_metric = "accuracy"

    def __init__(self, kind: str, num_classes: int, head_cfg: ml_collections.ConfigDict):
        self.kind, self.num_classes = kind, num_classes
        self.head_cfg = head_cfg
        self.features = parse_pair_features(head_cfg.pair_features) if kind == "pair" else ()

    def _head(self) -> nn.Module:
        return ClassifierHead(self.num_classes, tuple(self.head_cfg.hidden_dims),
                              self.head_cfg.activation, self.head_cfg.dropout_rate)

    def build_model(self, encoder: nn.Module) -> nn.Module:
        if self.kind == "pair":
            return PairClassifier(encoder, self._head(), self.features)
        return SentenceClassifier(encoder, self._head())

    def vector_head(self) -> VectorHead:
        return VectorHead(self._head(), self.kind, self.features)

    def loss(self, outputs: Outputs, batch: Batch) -> jax.Array:
        per_example = losses.classification_losses(outputs["logits"], batch["label"])
        return weighted_mean(per_example, batch["weight"])

    def eval_outputs(self, outputs: Outputs, batch: Batch) -> dict[str, jax.Array]:
        return {"prediction": jnp.argmax(outputs["logits"], -1), "label": batch["label"],
                "loss": losses.classification_losses(outputs["logits"], batch["label"])}

    def summarize(self, collected: Mapping[str, np.ndarray]) -> dict[str, float]:
        result = {"accuracy": metrics.accuracy(collected["prediction"], collected["label"]),
                  "loss": float(np.mean(collected["loss"]))}
        if self.num_classes == 2:
            result["f1"] = metrics.binary_f1(collected["prediction"], collected["label"])
        return result


# ----------------------------------------------------------------------------- relatedness


class PairRelatedness(nn.Module):
    """batch {first/..., second/...} -> {"log_probs": [B, K]} (Tai et al. head, tied encoder)."""

    encoder: nn.Module
    head: nn.Module

    def __call__(self, batch: Batch, *, train: bool) -> Outputs:
        u = self.encoder(sentence_fields(batch, "first"), train=train)["sentence"]
        v = self.encoder(sentence_fields(batch, "second"), train=train)["sentence"]
        return {"log_probs": self.head(u, v)}


class RelatednessTask(Task):
    """Relatedness scores in [1, K] (SICK-R, STS-B): loss KL(sparse target || p); metrics
    Pearson, Spearman and MSE of the expected score."""

    kind = "relatedness"
    primary_metric = "pearson"

    def __init__(self, num_classes: int, min_score: float, head_cfg: ml_collections.ConfigDict):
        self.num_classes, self.min_score = num_classes, min_score
        self.hidden_dim = head_cfg.relatedness_hidden_dim

    def build_model(self, encoder: nn.Module) -> nn.Module:
        return PairRelatedness(encoder, RelatednessHead(self.num_classes, self.hidden_dim))

    def vector_head(self) -> VectorHead:
        return VectorHead(RelatednessHead(self.num_classes, self.hidden_dim), self.kind)

    def _losses(self, outputs: Outputs, batch: Batch) -> jax.Array:
        target = losses.relatedness_target(batch["score"], self.num_classes, self.min_score)
        return losses.kl_divergences(target, outputs["log_probs"])

    def loss(self, outputs: Outputs, batch: Batch) -> jax.Array:
        return weighted_mean(self._losses(outputs, batch), batch["weight"])

    def eval_outputs(self, outputs: Outputs, batch: Batch) -> dict[str, jax.Array]:
        return {"prediction": expected_score(outputs["log_probs"], self.min_score),
                "score": batch["score"],
                "loss": self._losses(outputs, batch)}

    def summarize(self, collected: Mapping[str, np.ndarray]) -> dict[str, float]:
        predicted, gold = collected["prediction"], collected["score"]
        return {"pearson": metrics.pearson(predicted, gold),
                "spearman": metrics.spearman(predicted, gold),
                "mse": metrics.mean_squared_error(predicted, gold),
                "loss": float(np.mean(collected["loss"]))}


# ----------------------------------------------------------------------------- token level


def _token_summary(collected: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Token accuracy and per-token loss from per-example sums (correct, count, loss)."""
    count = max(float(np.sum(collected["count"])), 1.0)
    return {"accuracy": float(np.sum(collected["correct"])) / count,
            "loss": float(np.sum(collected["loss"])) / count}


def _token_eval_outputs(correct: jax.Array, valid: jax.Array,
                        token_losses: jax.Array) -> dict[str, jax.Array]:
    """Per-example sums over valid positions: correct/valid bool [B, T], losses [B, T]."""
    valid = valid.astype(jnp.float32)
    correct = correct.astype(jnp.float32) * valid
    return {"correct": correct.sum(-1), "count": valid.sum(-1),
            "loss": (token_losses * valid).sum(-1)}


class Tagger(nn.Module):
    """batch {sentence/...} -> {"logits": [B, L, K]}: a classifier on every word-aligned token
    state (the encoder output's "tokens"; hypernodes and pooled slots never get a tag)."""

    encoder: nn.Module
    head: nn.Module

    def __call__(self, batch: Batch, *, train: bool) -> Outputs:
        encoded = self.encoder(sentence_fields(batch, "sentence"), train=train)
        return {"logits": self.head(encoded["tokens"], train=train)}


class TaggingTask(Task):
    """Token tagging (POS): cross-entropy over positions whose tag is >= 0 (prefix/padding: -1).

    Metrics: token accuracy, per-token loss and "unknown_word_accuracy", the accuracy on the
    tokens outside the training vocabulary (read as the unknown id, UNK), the usual tagger
    breakdown of where errors come from; absent when a split has no such token.
    """

    kind = "tagging"
    primary_metric = "accuracy"

    def __init__(self, num_tags: int, head_cfg: ml_collections.ConfigDict):
        self.num_tags, self.head_cfg = num_tags, head_cfg

    def build_model(self, encoder: nn.Module) -> nn.Module:
        return Tagger(encoder, ClassifierHead(self.num_tags, tuple(self.head_cfg.hidden_dims),
                                              self.head_cfg.activation,
                                              self.head_cfg.dropout_rate))

    @staticmethod
    def _valid(batch: Batch) -> jax.Array:
        tags = batch["tags"]
        lengths = batch["sentence/lengths"]
        return (tags >= 0) & length_mask(lengths, tags.shape[1]) & (batch["weight"][:, None] > 0)

    def _token_losses(self, outputs: Outputs, batch: Batch) -> jax.Array:
        return losses.classification_losses(outputs["logits"], jnp.maximum(batch["tags"], 0))

    def loss(self, outputs: Outputs, batch: Batch) -> jax.Array:
        valid = self._valid(batch).astype(jnp.float32)
        return weighted_mean(self._token_losses(outputs, batch), valid)

    def eval_outputs(self, outputs: Outputs, batch: Batch) -> dict[str, jax.Array]:
        """Per-example sums [B]: correct, count, loss over the tagged tokens, and
        unknown_correct, unknown_count over those whose word is the unknown id."""
        valid = self._valid(batch)
        correct = jnp.argmax(outputs["logits"], -1) == batch["tags"]
        sums = _token_eval_outputs(correct, valid, self._token_losses(outputs, batch))
        unknown = (valid & (batch["sentence/tokens"] == UNK)).astype(jnp.float32)
        return {**sums, "unknown_correct": (correct * unknown).sum(-1),
                "unknown_count": unknown.sum(-1)}

    def summarize(self, collected: Mapping[str, np.ndarray]) -> dict[str, float]:
        summary = _token_summary(collected)
        unknown = float(np.sum(collected["unknown_count"]))
        if unknown:
            summary["unknown_word_accuracy"] = float(np.sum(collected["unknown_correct"])) / unknown
        return summary


# ----------------------------------------------------------------------------- seq2seq


def decoder_io(batch: Batch) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Teacher forcing from `target/tokens` = [BOS, w_1..w_n, EOS] (int32[B, T]).

    Returns decoder inputs [BOS, w_1..w_n] [B, T-1], their lengths n+1 [B], and the outputs to
    predict [w_1..w_n, EOS] [B, T-1].
    """
    tokens = batch["target/tokens"]
    return tokens[:, :-1], batch["target/lengths"] - 1, tokens[:, 1:]


class Seq2Seq(nn.Module):
    """batch {source/..., target/...} -> {"logits": [B, T-1, V]} (a decoder over the encoder
    output's "memory" slots, those "memory_mask" marks real). `encode`, then `decode_step` (the
    decoder's key/value-cached decode mode) or `next_logits` (the full-buffer reference) are the
    halves that `translate` calls (method= of apply).

    With `share_word_table` the decoder also gets the encoder's word table (params
    encoder/embed/embedding) as `word_table`: the decoders that a model brings
    (EncoderSpec.decoder) read their inputs from it.
    """

    encoder: nn.Module
    decoder: nn.Module
    share_word_table: bool = False

    def __call__(self, batch: Batch, *, train: bool) -> Outputs:
        encoded = self.encode(batch, train=train)
        inputs, input_lengths, _ = decoder_io(batch)
        logits = self.decoder(inputs, input_lengths, encoded["memory"], encoded["memory_mask"],
                              train=train, **self._shared())
        return {"logits": logits}

    def encode(self, batch: Batch, *, train: bool = False) -> Outputs:
        """The encoder outputs of `source/...`."""
        return self.encoder(sentence_fields(batch, "source"), train=train)

    def next_logits(self, tokens: jax.Array, position: jax.Array, memory: jax.Array,
                    memory_mask: jax.Array) -> jax.Array:
        """Decoder logits [N, V] at `position` int32[] of a token buffer int32[N, T], the
        decoder rerun over all T positions (the uncached reference)."""
        lengths = jnp.full(tokens.shape[:1], tokens.shape[1], jnp.int32)
        return self.decoder(tokens, lengths, memory, memory_mask, train=False, position=position,
                            **self._shared())

    def decode_step(self, tokens: jax.Array, position: jax.Array, memory: jax.Array,
                    memory_mask: jax.Array, max_length: int) -> jax.Array:
        """Decoder logits [N, V] after the tokens int32[N] at `position` int32[] of a sequence
        of at most `max_length`, in decode mode: apply with "cache" mutable, which holds the
        keys and values of the positions so far (created by the first call, see the decoders'
        `cache_length`)."""
        logits = self.decoder(tokens[:, None], None, memory, memory_mask, train=False,
                              position=position, cache_length=max_length, **self._shared())
        return logits[:, 0]

    def _shared(self) -> dict[str, jax.Array]:
        """{"word_table": the encoder's word table} when the decoder reads it, else {}."""
        if not self.share_word_table:
            return {}
        table = self.encoder.variables["params"]
        for key in EMBEDDING_PARAM:
            table = table[key]
        return {"word_table": table}


def translate(model: Seq2Seq, params: dict, batch: Batch, *, max_length: int,
              beam_size: int = 1, length_penalty: float = 0.6, cached: bool = True) -> jax.Array:
    """int32[B, max_length] decoded target ids of `source/...` (jaxenc.tasks.decoding: greedy
    for beam_size 1, else beam search), a pure function of (params, batch).

    cached: decode with the decoder's key/value cache (`Seq2Seq.decode_step`; the cache is
    created by one step at position 0, which also projects the memory into it), O(T) decoder
    positions per sequence; False reruns the decoder over the whole token buffer at every step
    (`decoding.full_buffer_step`), O(T^2), the reference that tests and benchmarks compare with.

    The batch's filler rows (`weight` 0, when the batch has weights) are not decoded: they
    start finished and come out as PAD, so the loop ends with the last real row.
    """
    variables = {"params": params}
    encoded = model.apply(variables, batch, method=Seq2Seq.encode)
    memory, memory_mask = encoded["memory"], encoded["memory_mask"]
    batch_size = memory.shape[0]
    if beam_size > 1:  # beam_size rows per example, example-major
        memory, memory_mask = (jnp.repeat(x, beam_size, axis=0) for x in (memory, memory_mask))
    rows = memory.shape[0]
    if cached:
        def step_fn(tokens, position, cache):  # reads the tokens at `position` only
            logits, updated = model.apply({**variables, "cache": cache}, tokens[:, position],
                                          position, memory, memory_mask, max_length,
                                          method=Seq2Seq.decode_step, mutable=["cache"])
            return logits, updated["cache"]

        cache = step_fn(jnp.full((rows, 1), BOS, jnp.int32), jnp.int32(0), {})[1]
    else:
        step_fn, cache = decoding.full_buffer_step(lambda tokens, position: model.apply(
            variables, tokens, position, memory, memory_mask, method=Seq2Seq.next_logits)), ()
    filler = batch["weight"] <= 0 if "weight" in batch else None
    if beam_size == 1:
        return decoding.greedy_decode(step_fn, cache, batch_size, max_length, done=filler)
    return decoding.beam_search(step_fn, cache, batch_size, beam_size, max_length,
                                length_penalty, done=filler)[0]


class GreedySamples:
    """Greedy outputs (`translate`, beam 1) of the first `count` examples of an evaluation batch
    as printable lines (target, then output): the training loop prints them at each evaluation
    of a seq2seq task. One compilation, at the first call.

    Args:
      model: the Seq2Seq task model.
      batch: a batch of the split (its first `count` rows are decoded, filler rows left out).
      vocab: the target vocabulary.
      count: how many examples.
      max_length: the most tokens decoded.
    """

    def __init__(self, model: Seq2Seq, batch: Mapping[str, np.ndarray], vocab: Vocabulary,
                 count: int, max_length: int):
        real = int(np.sum(np.asarray(batch["weight"])[:count] > 0))
        self.batch = {key: np.asarray(value)[:real] for key, value in batch.items()}
        self.vocab = vocab
        self._decode = jax.jit(functools.partial(translate, model, max_length=max_length))

    def __call__(self, params: dict) -> list[str]:
        outputs = np.asarray(self._decode(params, self.batch))
        targets, lengths = self.batch["target/tokens"], self.batch["target/lengths"]
        lines = []
        for target, length, output in zip(targets, lengths, outputs, strict=True):
            lines += [f"  target: {' '.join(self.vocab.decode(target[1:length - 1]))}",
                      f"  greedy: {' '.join(self.vocab.decode(decoding.strip_special(output)))}"]
        return lines


# task.head.decoder.name: the generic Transformer decoder (its sizes in task.head.decoder), or
# the decoder the encoder's model brings (jaxenc.models.registry.EncoderSpec.decoder).
DECODERS = ("transformer", "model")


class Seq2SeqTask(Task):
    """Translation or autoencoding: token cross-entropy (label smoothing) incl. EOS, padding
    masked; metrics: token accuracy (teacher forcing), per-token loss and perplexity. Given the
    target vocabulary it also decodes the test split (head.decoder: beam_size, length_penalty,
    max_decode_length) and reports sacrebleu's corpus BLEU of the detokenised output."""

    primary_metric = "accuracy"

    def __init__(self, kind: str, target_vocab_size: int, head_cfg: ml_collections.ConfigDict,
                 target_vocab: Vocabulary | None = None):
        self.kind, self.target_vocab_size = kind, target_vocab_size
        self.decoder_cfg = head_cfg.decoder
        self.target_vocab = target_vocab
        self.generates = target_vocab is not None
        if self.decoder_cfg.name not in DECODERS:
            raise ConfigError(f"task.head.decoder.name={self.decoder_cfg.name!r} is not one of "
                              f"{', '.join(DECODERS)} (fix: --config.task.head.decoder.name="
                              "transformer)")
        if self.decoder_cfg.name == "model" and kind != "unlabelled":
            raise ConfigError("a model's own decoder reads the input word table, so its output "
                              f"vocabulary is the input one: it cannot decode a {kind} dataset "
                              "(fix: --config.task.head.decoder.name=transformer)")

    def build_model(self, encoder: nn.Module) -> nn.Module:
        cfg = self.decoder_cfg
        if cfg.name == "model":
            return Seq2Seq(encoder, own_decoder(encoder, self.target_vocab_size),
                           share_word_table=True)
        decoder = TransformerDecoder(self.target_vocab_size, cfg.model_dim, cfg.num_layers,
                                     cfg.num_heads, cfg.ff_dim, cfg.dropout_rate,
                                     dtype=encoder.config.compute_dtype)
        return Seq2Seq(encoder, decoder)

    @staticmethod
    def _valid(batch: Batch) -> jax.Array:
        _, lengths, targets = decoder_io(batch)
        return length_mask(lengths, targets.shape[1]) & (batch["weight"][:, None] > 0)

    def loss(self, outputs: Outputs, batch: Batch) -> jax.Array:
        targets = decoder_io(batch)[2]
        smoothed = losses.token_losses(outputs["logits"], targets,
                                       self.decoder_cfg.label_smoothing)
        return weighted_mean(smoothed, self._valid(batch).astype(jnp.float32))

    def eval_outputs(self, outputs: Outputs, batch: Batch) -> dict[str, jax.Array]:
        targets = decoder_io(batch)[2]
        correct = jnp.argmax(outputs["logits"], -1) == targets
        return _token_eval_outputs(correct, self._valid(batch),
                                   losses.token_losses(outputs["logits"], targets))

    def summarize(self, collected: Mapping[str, np.ndarray]) -> dict[str, float]:
        summary = _token_summary(collected)
        summary["perplexity"] = float(np.exp(summary["loss"]))
        return summary

    def test_outputs(self, model: nn.Module, params: dict, batch: Batch) -> dict[str, jax.Array]:
        cfg = self.decoder_cfg
        return {"hypothesis": translate(model, params, batch, max_length=cfg.max_decode_length,
                                        beam_size=cfg.beam_size,
                                        length_penalty=cfg.length_penalty)}

    def test_metrics(self, collected: Mapping[str, np.ndarray],
                     examples: Sequence[Example]) -> tuple[dict[str, float], list[str]]:
        hypotheses = [self.target_vocab.decode(decoding.strip_special(row))
                      for row in collected["hypothesis"]]
        references = [target_sentence(examples[index], self.kind).tokens
                      for index in collected["index"]]
        score, signature = decoding.corpus_bleu(hypotheses, references)
        cfg = self.decoder_cfg
        search = (f"beam {cfg.beam_size}, length penalty {cfg.length_penalty}"
                  if cfg.beam_size > 1 else "greedy")
        return {"bleu": score.score}, [f"sacrebleu ({search}, {len(hypotheses)} test "
                                       f"sentences): {score} {signature}"]


# ----------------------------------------------------------------------------- factory


def build_task(kind: str, task_cfg: ml_collections.ConfigDict, *, num_classes: int | None = None,
               min_score: float = 1.0, num_tags: int | None = None,
               target_vocab_size: int | None = None,
               target_vocab: Vocabulary | None = None) -> Task:
    """The task for a dataset of `kind` (DatasetInfo.kind); head options from `task_cfg.head`.

    num_classes: classes (classification) or score classes K (relatedness, from min_score on).
    target_vocab: seq2seq only; given, the test split is also decoded and scored with BLEU.
    """
    head = task_cfg.head
    if kind in ("single", "pair"):
        return ClassificationTask(kind, num_classes, head)
    if kind == "relatedness":
        if num_classes is None:
            raise ConfigError(f"dataset {task_cfg.dataset!r} has no fixed score classes for the "
                              "relatedness head (fix: train on sick_r or stsb)")
        return RelatednessTask(num_classes, min_score, head)
    if kind == "tagging":
        return TaggingTask(num_tags, head)
    if kind in ("translation", "unlabelled"):
        return Seq2SeqTask(kind, target_vocab_size, head, target_vocab)
    raise ConfigError(f"dataset {task_cfg.dataset!r} has kind {kind!r}, which no task handles "
                      "(fix: use a dataset of another kind)")
