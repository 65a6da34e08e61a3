"""Sequence to sequence (translation, autoencoding): a decoder over the encoder's memory,
teacher-forced training, and greedy or beam-search decoding (`translate`) scored with BLEU."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxenc.data.batching import sentence_fields
from jaxenc.data.featurize import target_sentence
from jaxenc.data.vocab import BOS, Vocabulary
from jaxenc.errors import ConfigError
from jaxenc.layers.embed import EMBEDDING_PARAM
from jaxenc.layers.masks import length_mask
from jaxenc.layers.transformer import TransformerDecoder
from jaxenc.models.registry import own_decoder
from jaxenc.records import Example
from jaxenc.tasks import decoding, losses
from jaxenc.tasks.base import (
    Batch,
    Outputs,
    Task,
    token_eval_outputs,
    token_summary,
    weighted_mean,
)


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
        return token_eval_outputs(correct, self._valid(batch),
                                   losses.token_losses(outputs["logits"], targets))

    def summarize(self, collected: Mapping[str, np.ndarray]) -> dict[str, float]:
        summary = token_summary(collected)
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
