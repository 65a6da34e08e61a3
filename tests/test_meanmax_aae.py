"""Mean-Max AAE: encoder and decoder against numpy loops of eq. 1-21 (no residual around the first
attention, no output projection, ReLU flag), masked pooling, causality, the ablations, learned
positions under frozen word tables, memorising and greedily reconstructing a tiny corpus, the
corpus dataset (streamed, OOV sentences dropped and reported, one-line errors), a run through
the training loop, and vocabulary expansion when a run is used as an encoder."""

import contextlib
import dataclasses
import functools
import importlib
import inspect
import io
import re

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from jaxenc.data import corpus, registry
from jaxenc.data.batching import Batcher
from jaxenc.data.expansion import ExpandedVocabulary
from jaxenc.data.featurize import Featurizer
from jaxenc.data.vocab import BOS, EOS, NUM_SPECIAL, Vocabulary
from jaxenc.errors import ConfigError, DataError
from jaxenc.evaluation.encoders import CheckpointEncoder
from jaxenc.models import meanmax_aae
from jaxenc.models.registry import build_encoder
from jaxenc.records import Example, Sentence
from jaxenc.tasks.factory import build_task
from jaxenc.tasks.seq2seq import GreedySamples, translate
from jaxenc.training import checkpointing, experiment, input_pipeline, loop, preparation, run_report
from jaxenc.training.optim import build_optimizer
from jaxenc.training.sharding import make_mesh, replicated, shard_batch
from jaxenc.training.state import create_train_state, init_params, with_pretrained_embeddings
from jaxenc.training.steps import make_eval_step, make_test_step, make_train_step
from train.configs import base

TINY = dict(embed_dim=8, model_dim=16, ff_dim=24, num_heads=2)
VOCAB = 30


def model_cfg(**overrides) -> ml_collections.ConfigDict:
    return base.model_config("meanmax_aae", **{**TINY, **overrides})


def task_cfg() -> ml_collections.ConfigDict:
    return base.get_config("meanmax_aae,corpus").task


def seq2seq_batch(sentences: list[list[int]], length: int) -> dict[str, np.ndarray]:
    """A batch of autoencoding rows (source = the words, target = BOS words EOS), padded to
    `length` source tokens and `length` + 2 target tokens; an empty list is a filler row."""
    rows = len(sentences)
    batch = {"source/tokens": np.zeros((rows, length), np.int32),
             "target/tokens": np.zeros((rows, length + 2), np.int32),
             "source/lengths": np.array([len(s) for s in sentences], np.int32),
             "target/lengths": np.array([len(s) + 2 if s else 0 for s in sentences], np.int32),
             "weight": np.array([1.0 if s else 0.0 for s in sentences], np.float32)}
    for row, words in enumerate(sentences):
        batch["source/tokens"][row, :len(words)] = words
        if words:
            batch["target/tokens"][row, :len(words) + 2] = [BOS, *words, EOS]
    return batch


def source(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"tokens": batch["source/tokens"], "lengths": batch["source/lengths"]}


def seq2seq_model(**overrides):
    encoder = build_encoder(model_cfg(**overrides), VOCAB)
    return build_task("unlabelled", task_cfg(), target_vocab_size=VOCAB).build_model(encoder)


# ----------------------------------------------------------------------------- numpy reference


def np_sinusoid(length: int, dim: int) -> np.ndarray:
    table = np.zeros((length, dim))
    for p in range(length):
        for i in range(0, dim, 2):
            table[p, i] = np.sin(p / 10000 ** (i / dim))
            if i + 1 < dim:
                table[p, i + 1] = np.cos(p / 10000 ** (i / dim))
    return table


def np_layer_norm(x: np.ndarray, p: dict) -> np.ndarray:
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-6) * np.asarray(p["scale"]) + np.asarray(p["bias"])


def np_attention(queries: np.ndarray, memory: np.ndarray, mask: np.ndarray, p: dict,
                 relu: bool) -> np.ndarray:
    """eq. 3-7 with loops: heads concatenated, no output projection. mask bool[Lq, Lk]."""

    def project(name: str, x: np.ndarray) -> np.ndarray:  # [L, H, d_k]
        y = np.einsum("ld,dhk->lhk", x, np.asarray(p[name]["kernel"])) + np.asarray(
            p[name]["bias"])
        return np.maximum(y, 0.0) if relu else y

    q, k, v = project("query", queries), project("key", memory), project("value", memory)
    heads, dim = q.shape[1], q.shape[2]
    out = np.zeros((len(queries), heads * dim))
    for h in range(heads):
        for i in range(len(queries)):
            keys = [j for j in range(len(memory)) if mask[i, j]]
            scores = np.array([q[i, h] @ k[j, h] / np.sqrt(dim) for j in keys])
            weights = np.exp(scores - scores.max())
            weights /= weights.sum()
            out[i, h * dim:(h + 1) * dim] = sum(
                w * v[j, h] for w, j in zip(weights, keys, strict=True))
    return out


def np_feed_forward_norm(x: np.ndarray, p: dict) -> np.ndarray:
    hidden = np.maximum(x @ np.asarray(p["ffn"]["hidden"]["kernel"])
                        + np.asarray(p["ffn"]["hidden"]["bias"]), 0.0)
    out = hidden @ np.asarray(p["ffn"]["output"]["kernel"]) + np.asarray(p["ffn"]["output"]["bias"])
    return np_layer_norm(out + x, p["ffn_norm"])


def np_encoder(words: list[int], p: dict, relu: bool,
               end_token: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(h [n (+ 1), d_m], z = [max; mean] [2, d_m]) of one unpadded sentence, eq. 1-14; with
    `end_token` the encoder reads words + [EOS] and pools over all n + 1 positions."""
    read = [*words, EOS] if end_token else list(words)
    x = np.asarray(p["embed"]["embedding"])[read] + np_sinusoid(len(read), TINY["embed_dim"])
    a = np_attention(x, x, np.ones((len(read),) * 2, bool), p["self_attention"], relu)  # eq. 8
    h = np_feed_forward_norm(np_layer_norm(a, p["attention_norm"]), p)  # eq. 9-11
    z = np.zeros((2, h.shape[1]))
    for d in range(h.shape[1]):  # eq. 12-14, a loop over the read positions
        z[0, d] = max(h[t, d] for t in range(len(read)))
        z[1, d] = sum(h[t, d] for t in range(len(read))) / len(read)
    return h, z


def np_decoder(inputs: list[int], z: np.ndarray, table: np.ndarray, p: dict,
               relu: bool) -> np.ndarray:
    """logits [T, V] of one unpadded decoder input row, eq. 15-21."""
    y = table[inputs] + np_sinusoid(len(inputs), TINY["embed_dim"])
    causal = np.tril(np.ones((len(inputs),) * 2, bool))
    a = np_layer_norm(np_attention(y, y, causal, p["self_attention"], relu),
                      p["self_attention_norm"])  # eq. 15-16
    a = np_layer_norm(np_attention(a, z, np.ones((len(inputs), len(z)), bool),
                                   p["memory_attention"], relu) + a,
                      p["memory_attention_norm"])  # eq. 17-18
    h = np_feed_forward_norm(a, p)  # eq. 19-20
    return h @ np.asarray(p["logits"]["kernel"]) + np.asarray(p["logits"]["bias"])


SENTENCES = [[7, 8, 9], [10, 11, 12, 13, 14, 15], [16], [], [17, 18, 19, 20]]


@pytest.mark.parametrize("relu,end_token", [(True, True), (False, True), (True, False)])
def test_encoder_and_decoder_equal_numpy_loops(relu, end_token, noisy_params):
    model = seq2seq_model(relu_projections=relu, dropout_rate=0.3,  # train=False ignores it
                          end_token=end_token)
    batch = seq2seq_batch(SENTENCES, 8)
    params = noisy_params(model, batch, seed=3)
    encoded = model.apply({"params": params}, batch, train=False,
                          method=type(model).encode)
    logits = model.apply({"params": params}, batch, train=False)["logits"]
    chex.assert_shape(encoded["tokens"], (5, 8, 16))
    chex.assert_shape([encoded["memory"]], (5, 2, 16))
    chex.assert_shape(encoded["sentence"], (5, 32))
    chex.assert_type([encoded["tokens"], encoded["memory"], encoded["sentence"], logits],
                     jnp.float32)
    table = np.asarray(params["encoder"]["embed"]["embedding"])
    assert "embed" not in params["decoder"]  # the decoder reads the encoder's table
    for row, words in enumerate(SENTENCES):
        if not words:
            np.testing.assert_array_equal(encoded["memory"][row], 0.0)
            np.testing.assert_array_equal(encoded["sentence"][row], 0.0)
            assert not np.asarray(encoded["memory_mask"][row]).any()
            continue
        h, z = np_encoder(words, params["encoder"], relu, end_token)
        np.testing.assert_allclose(encoded["tokens"][row, :len(words)], h[:len(words)],
                                   rtol=2e-4, atol=2e-4)
        np.testing.assert_array_equal(encoded["tokens"][row, len(words):], 0.0)
        np.testing.assert_allclose(encoded["memory"][row], z, rtol=2e-4, atol=2e-4)
        assert np.asarray(encoded["memory_mask"][row]).all()
        normalised = z / np.linalg.norm(z, axis=1, keepdims=True)
        np.testing.assert_allclose(encoded["sentence"][row], normalised.reshape(-1), rtol=2e-4,
                                   atol=2e-5)
        expected = np_decoder([BOS, *words], z, table, params["decoder"], relu)
        np.testing.assert_allclose(logits[row, :len(words) + 1], expected, rtol=2e-4, atol=2e-4)


def np_with_end_token(tokens: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A loop: each non-empty row's words, then EOS, then PAD, one column wider."""
    out = np.zeros((tokens.shape[0], tokens.shape[1] + 1), np.int32)
    new_lengths = lengths.copy()
    for row, length in enumerate(lengths):
        out[row, :length] = tokens[row, :length]
        if length:
            out[row, length] = EOS
            new_lengths[row] = length + 1
    return out, new_lengths


@pytest.mark.parametrize("end_token", [True, False])
def test_end_token_is_read_and_pooled_in_a_training_batch(end_token, tmp_path, noisy_params):
    """A batch made by the featurizer and batcher from corpus sentences: with the flag the
    encoder reads EOS after the last word (the embedding stage looks up the EOS row there) and
    pools over words + EOS; without it, over the words only. The pooled slots equal a numpy
    max / mean over exactly those positions."""
    words = ["the", "dog", "runs", "on", "grass", "a", "cat", "sleeps"]
    vocab = Vocabulary.build([words])
    examples = [Example(sentences=(Sentence(tokens=tuple(t)),), uid=str(i)) for i, t in
                enumerate([words[:3], words[:8], words[5:], words[1:6]])]
    featurizer = Featurizer(kind="unlabelled", vocab=vocab, model_cfg=model_cfg(),
                            target_vocab=vocab)
    batch = next(Batcher(featurizer.many(examples), batch_size=5, buckets=(10,),
                         shuffle=False).epoch(0))  # 4 sentences and a filler row
    tokens, lengths = batch["source/tokens"], batch["source/lengths"]
    assert tokens.shape == (5, 10) and lengths.tolist() == [3, 8, 3, 5, 0]
    for width in (8, 10):  # 8: a row of as many words as columns gets the extra column
        np.testing.assert_array_equal(
            np.asarray(meanmax_aae.with_end_token(tokens[:, :width], lengths)[0]),
            np_with_end_token(tokens[:, :width], lengths)[0])
    model = build_task("unlabelled", task_cfg(), target_vocab_size=len(vocab)).build_model(
        build_encoder(model_cfg(end_token=end_token), len(vocab)))
    params = noisy_params(model, batch, seed=6)
    encoded, state = model.apply({"params": params}, batch, train=False,
                                 method=type(model).encode, capture_intermediates=True)
    captured = state["intermediates"]["encoder"]
    embedded = np.asarray(captured["embed"]["__call__"][0])  # table[ids], the ids read
    h = np.asarray(captured["ffn_norm"]["__call__"][0])  # eq. 10-11 before the padding mask
    table = np.asarray(params["encoder"]["embed"]["embedding"])
    read, read_lengths = (np_with_end_token(tokens, lengths) if end_token
                          else (tokens, lengths))
    assert embedded.shape[1] == 10 + end_token
    for row, length in enumerate(lengths):
        count = int(read_lengths[row])
        np.testing.assert_allclose(embedded[row, :count], table[read[row, :count]], rtol=1e-6)
        if end_token and length:
            assert read[row, length] == EOS and read_lengths[row] == length + 1
        else:
            assert EOS not in read[row].tolist()
        if not count:
            np.testing.assert_array_equal(encoded["memory"][row], 0.0)
            continue
        expected_max = np.array([max(h[row, t, d] for t in range(count))
                                 for d in range(h.shape[2])])
        expected_mean = np.array([sum(h[row, t, d] for t in range(count)) / count
                                  for d in range(h.shape[2])])
        np.testing.assert_allclose(encoded["memory"][row], [expected_max, expected_mean],
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(encoded["tokens"][row, length:], 0.0)  # words only


def test_relu_flag_changes_the_encoder(noisy_params):
    batch = seq2seq_batch(SENTENCES, 8)
    params = noisy_params(seq2seq_model(), batch, seed=3)["encoder"]
    outputs = [build_encoder(model_cfg(relu_projections=relu), VOCAB).apply(
        {"params": params}, source(batch), train=False)["sentence"] for relu in (True, False)]
    assert not np.allclose(*outputs, atol=1e-3)


@pytest.mark.parametrize("end_token", [True, False])
def test_masked_pooling_ignores_padding(end_token, noisy_params):
    encoder = build_encoder(model_cfg(positions="learned", end_token=end_token), VOCAB)
    short, long = seq2seq_batch(SENTENCES, 8), seq2seq_batch(SENTENCES, 32)
    params = noisy_params(encoder, source(short), seed=1)
    apply = jax.jit(functools.partial(encoder.apply, train=False))
    out8, out32 = apply({"params": params}, source(short)), apply({"params": params}, source(long))
    for key in ("tokens", "sentence", "memory", "memory_mask"):
        np.testing.assert_allclose(out8[key], out32[key][:, :out8[key].shape[1]], rtol=1e-5,
                                   atol=1e-6)
    # padding states that would win the max or shift the mean are never pooled
    _, state = encoder.apply({"params": params}, source(long), train=False,
                             capture_intermediates=True)
    h = np.asarray(state["intermediates"]["ffn_norm"]["__call__"][0]).copy()  # [B, 32 (+ 1), D]
    lengths = np.asarray(long["source/lengths"])
    read = lengths + (end_token & (lengths > 0))
    real = np.arange(h.shape[1]) < read[:, None]
    h[~real] = 1e6
    np.testing.assert_allclose(meanmax_aae.pool(jnp.asarray(h), jnp.asarray(real), "meanmax"),
                               out8["memory"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pooling,slots", [("mean", (1,)), ("max", (0,))])
def test_mean_and_max_ablations_have_one_slot(pooling, slots, noisy_params):
    batch = source(seq2seq_batch(SENTENCES, 8))
    both = build_encoder(model_cfg(), VOCAB)
    params = noisy_params(both, batch, seed=4)
    reference = both.apply({"params": params}, batch, train=False)["memory"]
    out = build_encoder(model_cfg(pooling=pooling), VOCAB).apply({"params": params}, batch,
                                                                  train=False)
    chex.assert_shape([out["memory"]], (5, 1, 16))
    chex.assert_shape(out["sentence"], (5, 16))
    np.testing.assert_allclose(out["memory"], reference[:, slots], rtol=1e-6)
    norms = np.linalg.norm(out["sentence"], axis=-1)
    np.testing.assert_allclose(norms[np.asarray(batch["lengths"]) > 0], 1.0, rtol=1e-5)


def test_decoder_cannot_see_the_future(noisy_params):
    model = seq2seq_model(positions="learned")
    batch = seq2seq_batch([[7, 8, 9, 10, 11, 12]], 6)
    params = noisy_params(model, batch, seed=5)
    apply = jax.jit(functools.partial(model.apply, train=False))
    logits = apply({"params": params}, batch)["logits"][0]
    for t in range(1, 6):  # decoder input t + 1 = target token t + 1
        changed = {**batch, "target/tokens": batch["target/tokens"].copy()}
        changed["target/tokens"][0, t + 1] = 25
        other = apply({"params": params}, changed)["logits"][0]
        np.testing.assert_allclose(other[:t + 1], logits[:t + 1], rtol=1e-6, atol=1e-6)
        assert not np.allclose(other[t + 1], logits[t + 1], atol=1e-4)  # it is an input there


def test_learned_positions_train_while_the_word_table_is_frozen():
    model = seq2seq_model(positions="learned", freeze_embeddings=True)
    batch = seq2seq_batch(SENTENCES, 8)
    params = init_params(model, batch, seed=0)
    optim = base.get_config().optim
    optim.update(dict(name="sgd", learning_rate=0.5, weight_decay=0.0))
    tx = build_optimizer(optim, params, freeze_embeddings=True)
    task = build_task("unlabelled", task_cfg(), target_vocab_size=VOCAB)
    grads = jax.jit(jax.grad(lambda p: task.loss(model.apply({"params": p}, batch, train=False),
                                                 batch)))(params)
    updates, _ = tx.update(grads, tx.init(params), params)
    np.testing.assert_array_equal(updates["encoder"]["embed"]["embedding"], 0.0)
    for part in ("encoder", "decoder"):
        assert np.abs(np.asarray(updates[part]["positions"]["embedding"])).max() > 0


def test_config_errors_are_one_line():
    for field, value, fix in [("pooling", "sum", "--config.model.pooling=meanmax"),
                              ("positions", "rotary", "--config.model.positions=sinusoidal"),
                              ("model_dim", 15, "--config.model.model_dim=14")]:
        with pytest.raises(ConfigError, match=re.escape(fix)) as error:
            build_encoder(model_cfg(**{field: value}), VOCAB)
        assert "\n" not in str(error.value)
    translation = task_cfg()
    with pytest.raises(ConfigError, match="decoder.name=transformer"):
        build_task("translation", translation, target_vocab_size=VOCAB)
    translation.head.decoder.name = "lstm"
    with pytest.raises(ConfigError, match="is not one of transformer, model"):
        build_task("unlabelled", translation, target_vocab_size=VOCAB)
    own = build_task("unlabelled", task_cfg(), target_vocab_size=VOCAB)
    with pytest.raises(ConfigError, match="TransformerEncoder has no decoder of its own"):
        own.build_model(build_encoder(base.model_config("transformer", embed_dim=8, model_dim=8,
                                                        num_heads=2), VOCAB))


# ----------------------------------------------------------------------------- memorising


class _Batches(list):
    """Fixed batches standing in for a Batcher in `loop.evaluate`."""

    def epoch(self, epoch: int):
        return iter(self)


def test_loss_decreases_and_greedy_reconstruction_of_a_memorised_sentence_is_exact():
    rng = np.random.default_rng(0)
    sentences = [list(rng.integers(6, VOCAB, size=n)) for n in (4, 5, 6, 7, 4, 5, 6, 8)]
    model = seq2seq_model(model_dim=32, ff_dim=64, dropout_rate=0.0, freeze_embeddings=True)
    task = build_task("unlabelled", task_cfg(), target_vocab_size=VOCAB)
    batch = seq2seq_batch(sentences, 8)
    mesh = make_mesh(jax.devices()[:1])
    params = with_pretrained_embeddings(init_params(model, batch, seed=0),
                                        rng.normal(size=(VOCAB, 8)).astype(np.float32))
    optim = base.get_config().optim
    optim.update(dict(name="adam", learning_rate=1e-2, weight_decay=0.0, clip_norm=5.0))
    tx = build_optimizer(optim, params, freeze_embeddings=True)
    state = create_train_state(params, tx, seed=0, sharding=replicated(mesh))
    train_step, eval_step = make_train_step(model, task, tx, mesh), make_eval_step(model, task,
                                                                                    mesh)
    batches = _Batches([batch])
    before = loop.evaluate(eval_step, state.params, batches, task, mesh)
    for _ in range(150):
        state, _ = train_step(state, shard_batch(batch, mesh))
    after = loop.evaluate(eval_step, state.params, batches, task, mesh)
    assert after["loss"] < before["loss"] / 4 and after["perplexity"] < before["perplexity"]
    assert after["accuracy"] == 1.0, after
    decoded = np.asarray(translate(model, state.params, batch, max_length=12))
    chex.assert_shape(decoded, (8, 12))
    for words, row in zip(sentences, decoded, strict=True):
        np.testing.assert_array_equal(row[:len(words) + 1], [*words, EOS])
    vocab = Vocabulary(("<pad>", "<unk>", "[root]", "[cls]", "<s>", "</s>")
                       + tuple(f"w{i}" for i in range(6, VOCAB)))
    samples = GreedySamples(model, batch, vocab, count=2, max_length=12)
    lines = samples(state.params)
    assert lines[0] == "  target: " + " ".join(vocab.decode(sentences[0]))
    assert lines[1] == "  greedy: " + " ".join(vocab.decode(sentences[0]))
    samples(state.params)
    assert samples._decode._cache_size() == 1  # nothing recompiles after the first evaluation


# ----------------------------------------------------------------------------- corpus


WORDS = ["the", "a", "dog", "cat", "runs", "sleeps", "on", "grass", "mat", "big", "small",
         "red", "sees", "and"]


def write_vectors(path, words, dim=8, seed=0):
    rng = np.random.default_rng(seed)
    lines = [f"{w} " + " ".join(f"{v:.5f}" for v in rng.normal(size=dim)) for w in words]
    path.write_text("\n".join(lines) + "\n")
    return path


def corpus_lines(count: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(4, 9))) for _ in range(count)]


def options(tmp_path, files, **overrides) -> corpus.CorpusOptions:
    vectors = write_vectors(tmp_path / "vectors.txt", WORDS + ["unseen", "other"])
    return corpus.CorpusOptions(files=tuple(files), vectors=str(vectors), **{
        "dev_fraction": 0.15, "test_fraction": 0.15, **overrides})


def test_corpus_is_streamed_line_by_line(tmp_path, monkeypatch):
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"\xef\xbb\xbfthe dog runs on grass\r\n\n  \na cat sleeps\n\xff broken\n")
    monkeypatch.setattr(type(path), "read_bytes", lambda self: pytest.fail("read whole"))
    monkeypatch.setattr(type(path), "read_text", lambda self, **kw: pytest.fail("read whole"))
    lines = corpus.read_corpus([path])
    assert inspect.isgenerator(lines)
    first, second = next(lines), next(lines)  # yielded before the bad line 5 is even read
    assert (first.text, first.number, second.text, second.number) == (
        "the dog runs on grass", 1, "a cat sleeps", 4)
    with pytest.raises(DataError) as error:
        next(lines)
    assert str(error.value).startswith(f"{path}:5: byte 0xff is not valid UTF-8 (fix: ")
    assert "\n" not in str(error.value)


def test_corpus_drops_and_reports_oov_sentences(tmp_path):
    lines = corpus_lines(200)
    lines[3] = "the dog sees a zebra"  # zebra: no vector
    lines[4] = "a cat sees the zebra on the mat"
    lines[5] = "dog"  # too short
    lines[6] = " ".join(["dog"] * 33)  # too long
    lines[7] = "a cat sees the okapi"  # okapi: once in the corpus, has a vector: min_count 2
    lines[8] = "a dog and zebra run"
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n")
    opts = options(tmp_path, [path], min_count=2)
    write_vectors(tmp_path / "vectors.txt", WORDS + ["okapi", "run"])
    splits, report_ = corpus.load_corpus(opts)
    assert report_.lines == 200 and report_.too_short == 1 and report_.too_long == 1
    kept_words = {t for examples in splits.values() for e in examples
                  for t in e.sentences[0].tokens}
    assert kept_words <= set(WORDS) and "okapi" not in kept_words
    where = {split: {e.uid for e in examples} for split, examples in splits.items()}
    dropped = {f"corpus.txt:{n}" for n in (4, 5, 8, 9)}
    expected = {split: sum(corpus.split_of(0, int(uid.split(":")[1]), 0, 0.15, 0.15) == split
                           for uid in dropped) for split in corpus.SPLITS}
    assert report_.dropped_oov == expected
    assert sum(report_.kept.values()) == 200 - 2 - 4
    assert all(not uids & dropped for uids in where.values())
    assert report_.vocabulary == len({t for e in splits["train"] for t in e.sentences[0].tokens})
    assert "dropped" in str(report_) and "\n" not in str(report_)
    again, _ = corpus.load_corpus(opts)  # the same splits every time (seeded hash of the place)
    assert {s: [e.uid for e in x] for s, x in again.items()} == {
        s: [e.uid for e in x] for s, x in splits.items()}
    held_out = {t for split in ("dev", "test") for e in splits[split]
                for t in e.sentences[0].tokens}
    assert held_out <= {t for e in splits["train"] for t in e.sentences[0].tokens}


@pytest.mark.parametrize("content,problem", [
    (b"", "corpus.txt: the corpus file has no sentence"),
    (b"\n  \n", "corpus.txt: the corpus file has no sentence"),
    (b"the dog runs on grass\nthe cat\xe9 sleeps\n", "corpus.txt:2: byte 0xe9 is not valid UTF-8"),
])
def test_bad_corpus_files_are_one_line_errors(tmp_path, content, problem):
    path = tmp_path / "corpus.txt"
    path.write_bytes(content)
    with pytest.raises(DataError) as error:
        corpus.load_corpus(options(tmp_path, [path]))
    assert problem in str(error.value) and "(fix: " in str(error.value)
    assert "\n" not in str(error.value)


def test_corpus_configuration_errors_are_one_line(tmp_path):
    config = base.get_config("meanmax_aae,corpus")
    with pytest.raises(ConfigError, match="--config.data.corpus_files=A.txt"):
        input_pipeline.load_splits(config)
    config.data.corpus_files = str(tmp_path / "missing.txt")
    with pytest.raises(DataError, match=r"missing.txt: corpus file not found \(fix: "):
        input_pipeline.load_splits(config)
    (tmp_path / "corpus.txt").write_text("the dog runs on grass\n")
    config.data.corpus_files = str(tmp_path / "corpus.txt")
    config.data.embeddings = ""
    with pytest.raises(ConfigError, match="--config.data.embeddings="):
        input_pipeline.load_splits(config)
    with pytest.raises(DataError, match="data.corpus_files"):
        registry.load("corpus", "train")


def test_dataset_sentences_build_a_corpus_file(tmp_path):
    examples = [Example(sentences=(Sentence(tokens=("ein", "Hund")),),
                        target=Sentence(tokens=("a", "dog", "runs"))),
                Example(sentences=(Sentence(tokens=("a", "-LRB-", "cat", "-RRB-")),
                                   Sentence(tokens=("a", "dog", "runs"))))]
    out = tmp_path / "corpus.txt"
    assert corpus.write_corpus(corpus.dataset_sentences(examples), out) == 2
    assert out.read_text() == "a dog runs\na ( cat )\n"


# ----------------------------------------------------------------------------- a run


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory):
    """A tiny Mean-Max AAE trained by the loop on a corpus file (one bucket: one compilation)."""
    root = tmp_path_factory.mktemp("meanmax")
    (root / "corpus.txt").write_text("\n".join(corpus_lines(240, seed=1)) + "\n")
    vectors = write_vectors(root / "vectors.txt", WORDS + ["unseen"], seed=2)
    config = base.get_config("meanmax_aae,corpus")
    config.model.update(dict(TINY, dropout_rate=0.1))
    config.task.update(dict(dev_fraction=0.1, test_fraction=0.1))
    config.task.head.decoder.update(dict(beam_size=1, max_decode_length=12))  # test BLEU
    config.data.update(dict(corpus_files=str(root / "corpus.txt"), embeddings=str(vectors),
                            oov="drop", freeze_embeddings=True, expand_vocabulary=True,
                            batch_size=16, eval_batch_size=32, max_length=16, bucket_step=16))
    config.optim.update(dict(name="adam", learning_rate=3e-3, weight_decay=0.0, clip_norm=5.0))
    config.train.update(dict(num_steps=24, eval_every=12, log_every=12, progress_bar=False,
                             samples=2))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):  # tqdm.write: the dev lines and greedy samples
        rows = experiment.run(config, root / "run")
    return config, root / "run", rows, printed.getvalue()


def test_a_run_reports_reconstruction_accuracy_perplexity_and_greedy_samples(corpus_run):
    _, workdir, rows, printed = corpus_run
    assert rows[0]["model"] == "meanmax_aae" and rows[0]["compiled shapes"] == 1
    assert 0.0 <= rows[0]["test bleu"] <= 100.0  # the test split reconstructed (greedy here)
    dev = [r for r in run_report.read_metrics(workdir / run_report.METRICS_FILE)
           if r["split"] == "dev"]
    assert [r["step"] for r in dev] == [12, 24]
    assert all(0.0 <= r["accuracy"] <= 1.0 and r["perplexity"] > 1.0 for r in dev)
    assert dev[-1]["perplexity"] < dev[0]["perplexity"]
    vocab = Vocabulary.load(workdir / "vocab.txt")
    assert set(vocab.tokens[6:]) <= set(WORDS)
    params = checkpointing.load_trained_encoder(workdir)[1]
    assert params["embed"]["embedding"].shape == (len(vocab), 8)
    for step in (12, 24):  # two greedy samples after each evaluation's line
        after = printed.split(f"step {step}: dev ")[1].splitlines()[1:5]
        assert [line.split(":")[0] for line in after] == ["  target", "  greedy"] * 2, printed
        assert all(set(line.split(": ")[1].split()) <= set(vocab.tokens) for line in after)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_test_split_decoding_batches_give_the_per_bucket_hypotheses_and_bleu(
        beam_size, tmp_path, noisy_params):
    """The test split as the loop decodes it (input_pipeline.DECODE: one shape, the fewest rows)
    gives the
    hypotheses, so the BLEU and results line, of decoding its dev/test batches (one per bucket,
    each filled up with filler rows), on a tiny model whose rows end at different steps."""
    (tmp_path / "corpus.txt").write_text("\n".join(corpus_lines(400, seed=3)) + "\n")
    config = base.get_config("meanmax_aae,corpus")
    config.model.update(dict(TINY, dropout_rate=0.0))
    config.task.update(dict(dev_fraction=0.1, test_fraction=0.15))
    config.task.head.decoder.update(dict(beam_size=beam_size, max_decode_length=10))
    config.data.update(dict(corpus_files=str(tmp_path / "corpus.txt"), oov="drop",
                            embeddings=str(write_vectors(tmp_path / "vectors.txt", WORDS)),
                            freeze_embeddings=True, batch_size=16, eval_batch_size=32,
                            max_length=12, bucket_step=4))
    splits, mesh = input_pipeline.load_splits(config), make_mesh()
    setup = preparation.prepare(config, tmp_path / "run", mesh, splits)
    per_bucket, decoding = setup.batchers["test"], setup.batchers[input_pipeline.DECODE]
    shapes = lambda batcher: {b["source/tokens"].shape for b in batcher.epoch(0)}
    assert len(shapes(per_bucket)) > 1 and len(shapes(decoding)) == 1
    rows = input_pipeline.decode_batch_size(len(splits["test"]), 32, mesh.size)
    assert shapes(decoding) == {(rows, 12)} and rows % mesh.size == 0
    assert decoding.num_batches * rows < per_bucket.num_batches * 32  # fewer filler rows
    params = noisy_params(setup.model, next(setup.batchers["train"].epoch(0)), seed=1)
    out = params["decoder"]["logits"]  # some rows end at once, others run to the end
    out["kernel"] = out["kernel"].at[:, EOS].multiply(10.0)
    step, results = make_test_step(setup.model, setup.task, mesh), []
    for batcher in (per_bucket, decoding):
        collected = loop.collect(step, params, batcher, mesh)
        order = np.argsort(collected["index"])
        collected = {key: value[order] for key, value in collected.items()}
        results.append((collected, setup.task.test_metrics(collected, splits["test"])))
    (old, old_metrics), (new, new_metrics) = results
    np.testing.assert_array_equal(new["index"], np.arange(len(splits["test"])))
    np.testing.assert_array_equal(new["hypothesis"], old["hypothesis"])
    assert new_metrics == old_metrics
    ends = {list(row).index(EOS) if EOS in row else 10 for row in new["hypothesis"]}
    assert len(ends) > 1 and 10 in ends, ends


def test_a_run_is_an_encoder_with_vocabulary_expansion(corpus_run):
    _, workdir, _, _ = corpus_run
    encoder = CheckpointEncoder(workdir, progress=False)
    vocab = Vocabulary.load(workdir / "vocab.txt")
    assert "unseen" not in vocab
    known = Sentence(tokens=("the", "dog", "sees", "a", "cat"))
    with_new = Sentence(tokens=("the", "dog", "sees", "a", "unseen", "cat"))
    without_vector = Sentence(tokens=("the", "dog", "sees", "a", "zebra", "cat"))
    only_oov = Sentence(tokens=("zebra",))
    vectors = encoder.encode([known, with_new, without_vector, only_oov])
    chex.assert_shape(vectors, (4, 32))
    assert not np.allclose(vectors[1], vectors[0], atol=1e-4)  # "unseen" counts ...
    np.testing.assert_allclose(vectors[2], vectors[0], rtol=1e-5)  # "zebra" has no vector
    np.testing.assert_array_equal(vectors[3], 0.0)  # nothing left: zeros, not an error
    np.testing.assert_array_equal(encoder.encode([only_oov]), 0.0)
    # ... with its GloVe vector, appended to the trained (fixed) table
    _, params, _, config = checkpointing.load_trained_encoder(workdir)
    unseen = np.array(next(line.split()[1:] for line in open(config.data.embeddings)
                           if line.startswith("unseen ")), np.float32)
    table = np.concatenate([params["embed"]["embedding"], unseen[None]])
    module = build_encoder(config.model, len(table))
    ids = np.array([[*vocab.encode(["the", "dog", "sees", "a"]), len(vocab),
                     *vocab.encode(["cat"])]], np.int32)
    expected = module.apply({"params": {**params, "embed": {"embedding": table}}},
                            {"tokens": ids, "lengths": np.array([6], np.int32)}, train=False)
    np.testing.assert_allclose(vectors[1], expected["sentence"][0], rtol=1e-5, atol=1e-6)


def test_expanded_vocabulary_grows_by_powers_of_two(tmp_path):
    words = [f"w{i}" for i in range(20)]
    vectors = write_vectors(tmp_path / "v.txt", words, dim=4)
    vocab = Vocabulary.build([words[:5]])
    table = np.arange(len(vocab) * 4, dtype=np.float32).reshape(len(vocab), 4)
    found = np.arange(len(vocab)) >= NUM_SPECIAL  # what load_vectors gives: specials have none
    expansion = ExpandedVocabulary(vocab, table, str(vectors), found, lowercase_fallback=True)
    assert expansion.capacity == 16 and expansion.table.shape == (16, 4)
    expansion.add(["w7", "W8", "nothing", "w0"])  # W8 through its lower-cased vector
    assert expansion.vocab.tokens[len(vocab):] == ("W8", "w7")
    assert expansion.found.tolist() == found.tolist() + [True, True]
    np.testing.assert_array_equal(expansion.table[:len(vocab)], table)
    expected = {line.split()[0]: np.array(line.split()[1:], np.float32)
                for line in vectors.read_text().splitlines()}
    np.testing.assert_allclose(expansion.table[len(vocab)], expected["w8"])
    np.testing.assert_array_equal(expansion.table[len(vocab) + 2:], 0.0)
    expansion.add(words[8:])
    assert len(expansion.vocab) == 25 and expansion.capacity == 32
    featurizer = Featurizer(kind="single", vocab=expansion.vocab,
                            model_cfg=ml_collections.ConfigDict({"name": "meanmax_aae"}),
                            found=expansion.found, keep_empty=True)
    features = featurizer(Example(sentences=(Sentence(tokens=("nothing",)),), label=0))
    assert features["sentence/tokens"].shape == (0,)
    batch = next(Batcher([features], batch_size=8, buckets=(8,), shuffle=False).epoch(0))
    assert batch["sentence/lengths"][0] == 0 and batch["weight"][0] == 1.0


def test_paper_and_small_configs():
    paper = importlib_config("meanmax_aae_paper")
    assert paper.model.name == "meanmax_aae" and paper.task.dataset == "corpus"
    cfg = dataclasses.asdict(build_encoder(paper.model, 10).config)
    assert {k: cfg[k] for k in ("embed_dim", "model_dim", "ff_dim", "num_heads",
                                "dropout_rate", "freeze_embeddings")} == {
        "embed_dim": 300, "model_dim": 2048, "ff_dim": 4096, "num_heads": 8,
        "dropout_rate": 0.5, "freeze_embeddings": True}
    decoder = paper.task.head.decoder
    assert decoder.name == "model" and decoder.label_smoothing == 0.1
    assert (paper.optim.name, paper.optim.learning_rate, paper.optim.b2, paper.optim.eps,
            paper.optim.clip_norm, paper.data.batch_size) == ("adam", 2e-4, 0.98, 1e-8, 5.0, 64)
    assert paper.data.oov == "drop" and paper.data.expand_vocabulary
    assert paper.data.corpus_oov == "drop_sentences" and paper.model.end_token  # the authors'
    small = importlib_config("meanmax_aae_small")
    assert small.model.model_dim < paper.model.model_dim and small.data.oov == "drop"
    assert small.data.corpus_oov == "drop_words" and small.model.end_token
    assert small.data.embeddings == "glove-6b-50d"  # the full vocabulary, no machine path


def importlib_config(name: str) -> ml_collections.ConfigDict:
    return importlib.import_module(f"train.configs.{name}").get_config()


def test_paper_size_has_the_parameters_of_the_authors_conf():
    """d_word 300, d_model 2048, 8 heads, d_inner 4096, one layer each side, vocabulary 21,583
    (the authors' conf.json): ~94.1M parameters outside the fixed word table, most of them the
    2048 x 21,583 output layer; the paper's text says ~39M. Counted by hand from the equations
    (module docstring) against the built model's shapes (no memory allocated)."""
    vocab, d_word, d_model, d_inner = 21_583, 300, 2048, 4096
    encoder = build_encoder(base.model_config("meanmax_aae"), vocab)
    model = build_task("unlabelled", task_cfg(), target_vocab_size=vocab).build_model(encoder)
    batch = seq2seq_batch([[7, 8, 9]], 4)
    shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), batch, train=False))
    counts = {jax.tree_util.keystr(path): leaf.size for path, leaf
              in jax.tree_util.tree_leaves_with_path(shapes["params"])}
    table = sum(size for path, size in counts.items() if "embed" in path)
    dense = lambda fan_in, fan_out: fan_in * fan_out + fan_out
    norm = 2 * d_model
    ffn = dense(d_model, d_inner) + dense(d_inner, d_model)
    encoder_layer = 3 * dense(d_word, d_model) + norm + ffn + norm          # eq. 8-11
    decoder_layer = (3 * dense(d_word, d_model) + norm                      # eq. 15-16
                     + 3 * dense(d_model, d_model) + norm                   # eq. 17-18
                     + ffn + norm                                           # eq. 19-20
                     + dense(d_model, vocab))                               # eq. 21
    assert table == vocab * d_word
    assert sum(counts.values()) - table == encoder_layer + decoder_layer == 94_098_511
    # The authors' learned positions ("position": "emb", 34 rows of d_word on each side) add
    # 2 x 34 x 300 = 20,400: still 94.1M.
    learned = base.model_config("meanmax_aae")
    learned.positions = "learned"
    model = build_task("unlabelled", task_cfg(), target_vocab_size=vocab).build_model(
        build_encoder(learned, vocab))
    shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), batch, train=False))
    total = sum(leaf.size for leaf in jax.tree_util.tree_leaves(shapes["params"]))
    assert learned.max_positions == 34
    assert total - vocab * d_word == 94_098_511 + 2 * 34 * d_word
