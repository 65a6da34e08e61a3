"""Phrase packing: the host plan (jaxenc.data.packing) against numpy loops, its capacities on every
SST and TREC batch, the device gather / scatter (jaxenc.layers.packed_attention) against a loop over
phrases and against the dense same-phrase [L, L] mask, and the tiled phrase attention: its tile
layout, values and gradients against the dense mask, a trace that does not grow with the classes,
and no traffic between devices."""

import collections
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenc.data import registry
from jaxenc.data.batching import Batcher, bucket_lengths, sentence_fields
from jaxenc.data.packing import PackingConfig, level_prefix, pack, worst_capacities
from jaxenc.errors import ConfigError, ParserUnavailableError
from jaxenc.layers.masks import SegmentMask, masked_mean, masked_softmax
from jaxenc.layers.multidim_attention import multidim_token2token
from jaxenc.layers.packed_attention import (
    apply_packed,
    gather_phrases,
    level_plan,
    scatter_phrases,
    tile_schedule,
)
from jaxenc.layers.packed_attention import phrase_attention as tiled_attention
from jaxenc.structures import arrays, psan
from jaxenc.structures.formats import read_bracketed
from jaxenc.training.sharding import make_mesh, shard_batch

LEVELS = 3
BUCKETS = (8, 16, 24)
BATCH = 8
SCHEMES = ("exact", "multiple_of_4", "multiple_of_3", "pow2")
REAL_DATA_SCHEMES = ("exact", "multiple_of_4", "pow2")


# ----------------------------------------------------------------------------- data


def random_segments(rng: np.random.Generator, n: int) -> np.ndarray:
    """int32[LEVELS, n]: contiguous phrases numbered left to right, from one word to the whole
    sentence (each level cuts between words with its own probability)."""
    rows = []
    for _ in range(LEVELS):
        cuts = rng.random(n - 1) < rng.choice([0.05, 0.3, 0.8])
        rows.append(np.concatenate([[0], np.cumsum(cuts)]))
    return np.array(rows, np.int32)


def random_features(count: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    features = []
    for index in range(count):
        segments = random_segments(rng, int(rng.integers(1, BUCKETS[-1] + 1)))
        features.append({"sentence/tokens": np.ones(segments.shape[1], np.int32),
                         "sentence/segments": segments, "sentence/blocks": psan.blocks(segments),
                         "label": np.int32(index)})
    return features


def batcher(features, config: PackingConfig | None, batch_size: int = BATCH,
            buckets=BUCKETS) -> Batcher:
    return Batcher(features, batch_size=batch_size, buckets=buckets, shuffle=True, seed=0,
                   packing=config)


def plan_fields(batch: dict, level: int) -> dict[str, np.ndarray]:
    return {key: value for key, value in batch.items()
            if key.startswith(f"sentence/{level_prefix(level)}")}


def plan_shapes(batch: dict, role: str = "sentence") -> dict[str, tuple[int, ...]]:
    """Plan field (role prefix removed) -> shape, of one role of a batch."""
    return {key.split("/")[1]: value.shape for key, value in batch.items()
            if key.startswith(f"{role}/pack_t")}


# ----------------------------------------------------------------------------- host: loops


def loop_check(batch: dict, features: list[dict], config: PackingConfig) -> None:
    """Slot by slot: every phrase of every real row (from the examples' own blocks) is in exactly
    one slot of its level, as its tokens in order then -1, in a class at least as long; it sits in
    a longer class than its shortest fit only when every class in between is full."""
    length = batch["sentence/tokens"].shape[1]
    group_size = len(batch["index"]) // config.groups
    classes = list(config.class_lengths(length))
    for level in range(1, features[0]["sentence/blocks"].shape[0] + 1):
        expected = collections.Counter(
            (row, int(start), int(size)) for row, index in enumerate(batch["index"]) if index >= 0
            for start, size in features[index]["sentence/blocks"][level - 1] if size > 0)
        slots = []
        for key, plan in plan_fields(batch, level).items():
            chex.assert_type(plan, np.int32)
            groups, _, class_length = plan.shape
            assert groups == config.groups and key.endswith(f"_len{class_length}")
            assert class_length in classes
            for group, slot in np.ndindex(plan.shape[:2]):
                tokens = [int(i) for i in plan[group, slot] if i >= 0]
                assert list(plan[group, slot]) == tokens + [-1] * (class_length - len(tokens))
                slots.append((group, class_length, tokens))
        free = collections.Counter((group, size) for group, size, tokens in slots if not tokens)
        found = collections.Counter()
        for group, class_length, tokens in filter(lambda slot: slot[2], slots):
            first = tokens[0]
            assert tokens == list(range(first, first + len(tokens)))
            assert (first + len(tokens) - 1) // length == first // length  # within one row
            found[group * group_size + first // length, first % length, len(tokens)] += 1
            shortest = next(size for size in classes if size >= len(tokens))
            for between in classes[classes.index(shortest):classes.index(class_length)]:
                assert free[group, between] == 0, "overflow past a free slot"
        assert found == expected, "phrases missing, repeated or made up"


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("capacity", ["planned", "bound", "worst"])
@pytest.mark.parametrize("groups", [1, 2])
def test_plan_holds_every_phrase_once_in_order(scheme, capacity, groups):
    features = random_features(70, seed=groups)
    config = PackingConfig(scheme, capacity, groups=groups, epochs=2)
    source = batcher(features, config)
    for epoch in range(4):  # epochs 2 and 3 are past the planned ones
        for batch in source.epoch(epoch):
            loop_check(batch, features, config)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_worst_capacities_do_not_depend_on_the_data_and_fit_the_worst_batch(scheme):
    config = PackingConfig(scheme, "worst", groups=2)
    shapes = []
    for seed in (0, 1):
        by_bucket = collections.defaultdict(set)
        for batch in batcher(random_features(40, seed=seed), config).epoch(0):
            by_bucket[batch["sentence/tokens"].shape[1]].add(tuple(sorted(
                plan_shapes(batch).items())))
        assert all(len(found) == 1 for found in by_bucket.values())  # one shape per bucket
        shapes.append(by_bucket)
    assert shapes[0] == shapes[1]
    for length in BUCKETS:  # every row full, at every level phrases of one class's shortest
        lengths = config.class_lengths(length)
        capacities = worst_capacities(lengths, length, BATCH // 2, LEVELS)
        for shortest in np.concatenate([[0], lengths[:-1]]) + 1:
            count = length // shortest
            blocks = np.full((BATCH, LEVELS, length, 2), -1, np.int32)
            blocks[:, :, :count] = np.stack([np.arange(count) * shortest,
                                             np.full(count, shortest)], axis=-1)
            blocks[:, :, count - 1, 1] += length - count * shortest  # the rest: the last one's
            assert pack(blocks, lengths, capacities, groups=2) is not None


def test_hand_worked_plan_and_overflow():
    blocks = np.full((2, 1, 6, 2), -1, np.int32)
    blocks[0, 0, :3] = [[0, 2], [2, 3], [5, 1]]
    blocks[1, 0, :2] = [[0, 4], [4, 2]]
    lengths = np.array([2, 4, 6])
    plan = pack(blocks, lengths, np.array([[2, 1, 2]]), groups=1)
    # Three phrases need class 2 (two slots): row 1's (4, 2) spills to class 4, whose one slot it
    # takes first; the phrases of class 4 then spill to class 6. Positions are row * 6 + start.
    np.testing.assert_array_equal(plan["pack_t1_len2"], [[[0, 1], [5, -1]]])
    np.testing.assert_array_equal(plan["pack_t1_len4"], [[[10, 11, -1, -1]]])
    np.testing.assert_array_equal(plan["pack_t1_len6"], [[[2, 3, 4, -1, -1, -1],
                                                          [6, 7, 8, 9, -1, -1]]])
    assert pack(blocks, lengths, np.array([[1, 1, 1]]), groups=1) is None  # 5 phrases, 3 slots
    by_group = pack(blocks, lengths, np.array([[1, 1, 1]]), groups=2)  # rows 0 | 1
    np.testing.assert_array_equal(by_group["pack_t1_len2"], [[[0, 1]], [[4, 5]]])
    np.testing.assert_array_equal(by_group["pack_t1_len4"], [[[5, -1, -1, -1]], [[0, 1, 2, 3]]])
    np.testing.assert_array_equal(by_group["pack_t1_len6"], [[[2, 3, 4, -1, -1, -1]], [[-1] * 6]])
    # loop_check accepts this plan and rejects a dropped phrase and a needless overflow.
    features = [{"sentence/blocks": blocks[0]}, {"sentence/blocks": blocks[1]}]
    batch = {"sentence/tokens": np.ones((2, 6), np.int32), "index": np.array([0, 1]),
             **{f"sentence/{key}": value for key, value in plan.items()}}
    config = PackingConfig("multiple_of_2")
    loop_check(batch, features, config)
    dropped = {**batch, "sentence/pack_t1_len6": np.array([[[2, 3, 4, -1, -1, -1], [-1] * 6]],
                                                          np.int32)}
    with pytest.raises(AssertionError, match="phrases missing"):
        loop_check(dropped, features, config)
    needless = {**batch, "sentence/pack_t1_len2": np.array([[[0, 1], [5, -1], [-1, -1]]],
                                                           np.int32)}
    with pytest.raises(AssertionError, match="overflow past a free slot"):
        loop_check(needless, features, config)


def test_shapes_are_static_per_bucket_and_the_fallback_is_the_bound(caplog):
    """Within the planned epochs every batch of a bucket has the planned shapes; a later batch
    that does not fit gets exactly the bound ones (so at most two shapes per bucket), logged."""
    features = random_features(200, seed=5)
    config = PackingConfig("exact", "planned", epochs=1)
    source = batcher(features, config)
    bound = batcher(features, PackingConfig("exact", "bound")).packer
    planned_shapes, fallback_shapes, fallbacks = {}, {}, 0
    for (role, length), layout in source.packer.layouts.items():
        assert role == "sentence"
        planned_shapes[length] = layout.plan_shapes(1)
        fallback_shapes[length] = layout.plan_shapes(1, layout.fallback)
        np.testing.assert_array_equal(layout.fallback, bound.layouts[role, length].capacities)
        # the planned capacities cost less than the bound (else there is nothing to plan)
        assert layout.attention_elements().sum() < layout.attention_elements(layout.fallback).sum()
    for batch in source.epoch(0):
        assert plan_shapes(batch) == planned_shapes[batch["sentence/tokens"].shape[1]]
    for epoch in range(1, 6):
        for batch in source.epoch(epoch):
            length = batch["sentence/tokens"].shape[1]
            shapes = plan_shapes(batch)
            assert shapes in (planned_shapes[length], fallback_shapes[length])
            fallbacks += shapes != planned_shapes[length]
            loop_check(batch, features, config)
    assert fallbacks > 0
    assert "does not fit the planned sentence capacities" in caplog.text


def test_plan_for_every_role_with_blocks():
    rng = np.random.default_rng(2)
    features = []
    for index in range(30):
        first, second = (random_segments(rng, int(n)) for n in rng.integers(1, 17, 2))
        features.append({"first/tokens": np.ones(first.shape[1], np.int32),
                         "first/blocks": psan.blocks(first),
                         "second/tokens": np.ones(second.shape[1], np.int32),
                         "second/blocks": psan.blocks(second), "label": np.int32(index)})
    source = batcher(features, PackingConfig("pow2"), buckets=(16,))
    assert source.packer.roles == ("first", "second")
    for batch in source.epoch(0):
        for role in ("first", "second"):
            assert plan_shapes(batch, role) == source.packer.layouts[role, 16].plan_shapes(1)


def test_bad_packing_settings_are_one_line_config_errors():
    for settings, message in [
        ({"scheme": "multiple_of_0"}, "packing scheme 'multiple_of_0' is unknown"),
        ({"scheme": "log2"}, "packing scheme 'log2' is unknown"),
        ({"capacity": "quantile"}, "packing capacity 'quantile' is unknown"),
        ({"groups": 0}, "packing groups=0"),
        ({"epochs": 0}, "epochs=0"),
    ]:
        with pytest.raises(ConfigError, match=message) as error:
            PackingConfig(**settings)
        assert "\n" not in str(error.value) and "fix:" in str(error.value)
    features = random_features(10)
    with pytest.raises(ConfigError, match="batch size 8 does not split into 3 packing groups"):
        batcher(features, PackingConfig(groups=3))
    no_blocks = [{key: value for key, value in f.items() if key != "sentence/blocks"}
                 for f in features]
    with pytest.raises(ConfigError, match="needs the structure field 'blocks'"):
        batcher(no_blocks, PackingConfig())
    with pytest.raises(ConfigError, match="no packing plan for this level"):
        apply_packed(lambda phrases, valid: phrases, jnp.zeros((2, 4, 3)), [])


def test_class_lengths_of_the_schemes():
    assert PackingConfig("exact").class_lengths(5).tolist() == [1, 2, 3, 4, 5]
    assert PackingConfig("multiple_of_4").class_lengths(12).tolist() == [4, 8, 12]
    assert PackingConfig("multiple_of_5").class_lengths(12).tolist() == [5, 10, 12]
    assert PackingConfig("multiple_of_1").class_lengths(3).tolist() == [1, 2, 3]
    assert PackingConfig("pow2").class_lengths(12).tolist() == [1, 2, 4, 8, 12]
    assert PackingConfig("pow2").class_lengths(16).tolist() == [1, 2, 4, 8, 16]


# ----------------------------------------------------------------------------- host: real data


def assert_covers(batch: dict, role: str, groups: int) -> None:
    """Vectorised: at every level each token of a real row is in exactly one slot, padding and
    filler rows in none, and the slots' first tokens are exactly the phrases' starts (so, slots
    being runs of consecutive positions, every slot is one whole phrase)."""
    blocks, lengths = batch[f"{role}/blocks"], batch[f"{role}/lengths"]
    rows, levels, length, _ = blocks.shape
    group_offset = np.arange(groups)[:, None, None] * (rows // groups * length)
    real = (np.arange(length) < lengths[:, None]).ravel().astype(np.int64)
    for level in range(levels):
        slots = [value + np.where(value >= 0, group_offset, 0) for key, value in batch.items()
                 if key.startswith(f"{role}/{level_prefix(level + 1)}")]
        tokens = np.concatenate([slot[slot >= 0] for slot in slots])
        np.testing.assert_array_equal(np.bincount(tokens, minlength=rows * length), real)
        for slot in slots:  # tokens first, then -1; consecutive positions
            assert np.all((slot[..., 1:] >= 0) <= (slot[..., :-1] >= 0))
            assert np.all((np.diff(slot, axis=-1) == 1) | (slot[..., 1:] < 0))
        starts = np.sort(np.concatenate([slot[..., 0][slot[..., 0] >= 0] for slot in slots]))
        phrase_rows, phrase_positions = np.nonzero(blocks[:, level, :, 1] > 0)
        expected = phrase_rows * length + blocks[phrase_rows, level, phrase_positions, 0]
        np.testing.assert_array_equal(starts, np.sort(expected))


def check_all_batches(features: list[dict], batch_size: int, groups: int = 1) -> None:
    """For every scheme: the bound capacities and the planned ones (planned over epoch 0, also
    used for epoch 1, whose overflowing batches fall back) hold every phrase of every batch."""
    buckets = bucket_lengths(max(len(f["sentence/tokens"]) for f in features))
    for scheme in REAL_DATA_SCHEMES:
        for capacity, epochs in (("bound", 1), ("planned", 2)):
            config = PackingConfig(scheme, capacity, groups=groups)
            source = Batcher(features, batch_size=batch_size, buckets=buckets, shuffle=True,
                             seed=0, packing=config)
            for epoch in range(epochs):
                for batch in source.epoch(epoch):
                    assert_covers(batch, "sentence", groups)


def blocks_features(lengths: list[int], blocks: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
    return [{"sentence/tokens": np.ones(n, np.int32), "sentence/blocks": b}
            for n, b in zip(lengths, blocks, strict=True)]


def test_capacities_hold_on_all_sst_training_batches(data_root):
    trees = read_bracketed(data_root / "sst_ptb_trees" / "train.txt")
    check_all_batches(blocks_features([len(tree.leaves()) for tree in trees],
                                      [psan.blocks(psan.segments(tree)) for tree in trees]), 64)


def test_capacities_hold_on_all_trec_batches(data_root, request, tmp_path):
    sentences = [example.sentences[0] for split in ("train", "test")
                 for example in registry.load("trec", split, data_root)]
    cache = getattr(request.config, "cache", None)  # pytest's cache dir keeps parses across runs
    spec = arrays.StructureSpec(("blocks",), parser="spacy-constituency", cache_dir=str(
        tmp_path if cache is None else cache.mkdir("jaxenc_parses")))
    try:
        blocks = [computed["blocks"] for computed in spec(sentences)]
    except ParserUnavailableError as error:
        pytest.skip(f"spaCy parser unavailable: {error}")
    assert len(blocks) == 5952
    check_all_batches(blocks_features([len(s.tokens) for s in sentences], blocks), 64, groups=2)


# ----------------------------------------------------------------------------- device

FEATURES = 5


def device_batches(groups: int, batch_size: int = BATCH, epochs: int = 1,
                   buckets: tuple[int, ...] = (24,)) -> list[dict]:
    """Batches of the same random examples in the same order whatever `groups` is (one bucket
    by default: one compile per jitted function)."""
    source = batcher(random_features(60, seed=9),
                     PackingConfig("multiple_of_8", groups=groups, epochs=epochs), batch_size,
                     buckets)
    return [batch for epoch in range(epochs) for batch in source.epoch(epoch)]


def states(batch: dict, seed: int = 0) -> jax.Array:
    """Random float32[B, L, FEATURES] token states, nonzero at padding and filler rows too."""
    rows, length = batch["sentence/tokens"].shape
    return jax.random.normal(jax.random.key(seed), (rows, length, FEATURES))


def real_tokens(batch: dict) -> np.ndarray:
    length = batch["sentence/tokens"].shape[1]
    return np.arange(length) < batch["sentence/lengths"][:, None]


def phrase_mean(phrases: jax.Array, valid: jax.Array) -> jax.Array:
    """Every token of a phrase gets the phrase's mean."""
    return jnp.where(valid[..., None], masked_mean(phrases, valid)[:, None, :], 0.0)


def phrase_attention(phrases: jax.Array, valid: jax.Array) -> jax.Array:
    """Dot-product self-attention inside each phrase, diagonal disabled (psan.md eq. 1-2)."""
    scores = jnp.einsum("nid,njd->nij", phrases, phrases) / np.sqrt(FEATURES)
    mask = valid[:, :, None] & valid[:, None, :] & ~jnp.eye(valid.shape[1], dtype=bool)
    return jnp.einsum("nij,njd->nid", masked_softmax(scores, mask), phrases)


def packed_attention(x: jax.Array, fields: dict) -> jax.Array:
    """[LEVELS, B, L, d]: phrase_attention through the plan of every level."""
    return through_plan(phrase_attention, x, fields)


def dense_attention(x: jax.Array, fields: dict) -> jax.Array:
    """[LEVELS, B, L, d]: the same attention over [B, L, L] with each level's same-phrase mask
    from the segment ids."""
    scores = jnp.einsum("bid,bjd->bij", x, x) / np.sqrt(FEATURES)
    outputs = []
    for level in range(LEVELS):
        segments = fields["segments"][:, level]
        same = (segments[:, :, None] == segments[:, None, :]) & (segments >= 0)[:, :, None]
        mask = same & ~jnp.eye(x.shape[1], dtype=bool)
        outputs.append(jnp.einsum("bij,bjd->bid", masked_softmax(scores, mask), x))
    return jnp.stack(outputs)


@functools.partial(jax.jit, static_argnums=0)
def through_plan(function, x: jax.Array, fields: dict) -> jax.Array:
    """[LEVELS, B, L, d_out]: `function` applied to every phrase of every level (apply_packed)."""
    return jnp.stack([apply_packed(function, x, level_plan(fields, level))
                      for level in range(1, LEVELS + 1)])


@functools.partial(jax.jit, static_argnums=0)
def output_and_grad(function, x: jax.Array, weights: jax.Array,
                    fields: dict) -> tuple[jax.Array, jax.Array]:
    """function(x, fields) and the gradient of sum(function(x, fields) * weights) by x."""
    out, backward = jax.vjp(lambda x: function(x, fields), x)
    return out, backward(weights)[0]


@jax.jit
def gather_scatter(x: jax.Array, fields: dict) -> tuple[jax.Array, jax.Array]:
    """Each level's phrases gathered and scattered back into zeros, [LEVELS, B, L, d], and
    whether every gathered phrase is shaped [G, N, L_c, d], valid exactly at index >= 0 and
    zero elsewhere."""
    outputs, correct = [], jnp.array(True)
    for level in range(1, LEVELS + 1):
        out = jnp.zeros_like(x)
        for index in level_plan(fields, level):
            phrases, valid = gather_phrases(x, index)
            chex.assert_shape(phrases, (*index.shape, FEATURES))
            chex.assert_type([phrases, valid], [jnp.float32, jnp.bool_])
            correct &= jnp.all(valid == (index >= 0)) & jnp.all((phrases == 0) | valid[..., None])
            out = scatter_phrases(phrases, index, out)
        outputs.append(out)
    return jnp.stack(outputs), correct


@pytest.mark.parametrize("groups", [1, 2])
def test_gather_then_scatter_is_the_identity_on_real_tokens(groups):
    for batch in device_batches(groups):
        fields = sentence_fields(batch, "sentence")
        x = states(batch)
        expected = np.broadcast_to(np.where(real_tokens(batch)[..., None], x, 0.0),
                                   (LEVELS, *x.shape))
        out, correct = gather_scatter(x, fields)
        assert correct
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(through_plan(lambda p, v: p, x, fields), expected)


def test_phrase_mean_equals_a_loop_over_phrases():
    for batch in device_batches(2):
        x = states(batch, seed=1)
        packed = np.asarray(through_plan(phrase_mean, x, sentence_fields(batch, "sentence")))
        expected = np.zeros_like(packed)
        values = np.asarray(x)
        for row, level, phrase in np.ndindex(batch["sentence/blocks"].shape[:3]):
            start, size = batch["sentence/blocks"][row, level, phrase]
            if size > 0:
                expected[level, row, start:start + size] = values[row, start:start + size].mean(0)
        np.testing.assert_allclose(packed, expected, rtol=1e-5, atol=1e-6)


def test_phrase_attention_equals_the_dense_same_phrase_mask():
    batches = device_batches(1)
    single = sum(int(np.sum(batch["sentence/blocks"][..., 1] == 1)) for batch in batches)
    assert single > 0  # one-word phrases (no valid key) occur
    for batch in batches:
        fields = sentence_fields(batch, "sentence")
        x = states(batch, seed=2)
        weights = jax.random.normal(jax.random.key(3), (LEVELS, *x.shape))
        out, grad = output_and_grad(packed_attention, x, weights, fields)
        dense_out, dense_grad = output_and_grad(dense_attention, x, weights, fields)
        assert np.all(np.isfinite(out)) and np.all(np.isfinite(grad))
        np.testing.assert_allclose(out, dense_out, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grad, dense_grad, rtol=1e-5, atol=1e-6)


def test_one_compile_per_bucket():
    traces = collections.Counter()

    @jax.jit
    def step(x, fields):
        traces[x.shape[1]] += 1  # runs when tracing only
        return packed_attention(x, fields)

    batches = device_batches(1, epochs=3, buckets=BUCKETS)
    for batch in batches:
        step(states(batch), sentence_fields(batch, "sentence"))
    lengths = {batch["sentence/tokens"].shape[1] for batch in batches}
    assert len(batches) > 2 * len(lengths) and traces == {length: 1 for length in lengths}


def test_groups_and_devices_give_the_same_result():
    """G = 2 groups, and G = one group per device with the batch and plan sharded over "data",
    give what G = 1 gives."""
    devices = len(jax.devices())
    mesh = make_mesh()
    for one, two, sharded in zip(device_batches(1, 2 * devices), device_batches(2, 2 * devices),
                                 device_batches(devices, 2 * devices), strict=True):
        x = states(one)
        expected = packed_attention(x, sentence_fields(one, "sentence"))
        np.testing.assert_allclose(packed_attention(x, sentence_fields(two, "sentence")),
                                   expected, rtol=1e-6, atol=1e-6)
        placed = shard_batch({**sharded, "x": np.asarray(x)}, mesh)
        result = packed_attention(placed.pop("x"), sentence_fields(placed, "sentence"))
        np.testing.assert_allclose(result, expected, rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- device: tiles

TILE_SHAPES = ((3, 1), (5, 2), (2, 3), (4, 4), (2, 5), (3, 9), (1, 12))  # (N_c, L_c)


def test_tile_schedule_places_every_slot_once():
    """Every position of a slot longer than one lies in exactly one tile position, in order; a
    short slot stays within one tile, a long one fills whole tiles of its own; `same` pairs the
    positions of one slot (not a position with itself); the other pairs are exactly the ordered
    pairs of distinct tiles of one slot."""
    tile = 4
    schedule = tile_schedule(TILE_SHAPES, tile)
    slots = np.repeat(np.arange(sum(count for count, _ in TILE_SHAPES)),
                      np.repeat([length for _, length in TILE_SHAPES],
                                [count for count, _ in TILE_SHAPES]))
    lengths = np.repeat([length for _, length in TILE_SHAPES],
                        [count * length for count, length in TILE_SHAPES])  # per plan column
    positions = schedule.positions
    assert positions.shape == (schedule.num_tiles, tile) and np.all(positions[-1] == -1)
    placed = positions[positions >= 0]
    np.testing.assert_array_equal(np.sort(placed), np.flatnonzero(lengths > 1))
    tiles_of_slot = collections.defaultdict(set)
    for number, row in enumerate(positions):
        real = row[row >= 0]
        assert np.all(row[len(real):] == -1)  # a tile's positions first, then -1
        for position in real:
            tiles_of_slot[slots[position]].add(number)
        for slot in set(slots[real]):
            columns = real[slots[real] == slot]
            assert np.all(np.diff(columns) == 1)  # a slot's positions in order
            if lengths[columns[0]] > tile:
                assert set(slots[real]) == {slot}  # a long slot's tiles hold it alone
        ids = np.where(row >= 0, slots[np.maximum(row, 0)], -1)
        expected = (ids[:, None] == ids[None, :]) & (ids[:, None] >= 0) & ~np.eye(tile, dtype=bool)
        np.testing.assert_array_equal(schedule.same[number], expected)
    expected_pairs = sorted((a, b) for tiles in tiles_of_slot.values() for a in tiles for b in tiles
                            if a != b)
    pairs = list(zip(schedule.query_tiles.tolist(), schedule.key_tiles.tolist(), strict=True))
    assert pairs == expected_pairs  # sorted by query tile
    for slot, tiles in tiles_of_slot.items():
        size = int(np.sum(slots == slot))
        assert len(tiles) == (1 if size <= tile else -(-size // tile))


def segment_attention(queries, keys, values, segments):
    """[B, L, d]: ELU-scored multi-dimensional attention with the dense same-phrase mask."""
    return multidim_token2token(queries, keys, values, SegmentMask(segments, include_self=False),
                                score_fn=jax.nn.elu, score_bound=None)


@functools.partial(jax.jit, static_argnums=(0, 1))
def tiled_and_dense(tile: int, chunk: int, inputs: tuple, weights: jax.Array, fields: dict):
    """Per level: (phrase_attention, its gradients by queries, keys and values of
    sum(out * weights)) and the same of the dense same-phrase mask."""
    results = []
    for level in range(1, LEVELS + 1):
        def tiled(*inputs, level=level):
            return tiled_attention(*inputs, level_plan(fields, level), score_fn=jax.nn.elu,
                                    tile=tile, chunk=chunk)

        def dense(*inputs, level=level):
            return segment_attention(*inputs, fields["segments"][:, level - 1])

        for function in (tiled, dense):
            out, backward = jax.vjp(function, *inputs)
            results.append((out, backward(weights)))
    return results


@pytest.mark.parametrize(("tile", "chunk", "groups"), [(4, 0, 1), (4, 1, 1), (1, 0, 1), (8, 2, 1),
                                                     (4, 1, 2), (3, 0, 2)])
def test_tiled_attention_equals_the_dense_same_phrase_mask(tile, chunk, groups):
    """Values and gradients of the tiled attention equal the dense [L, L] form's, in one step
    (chunk 0) and in several (chunk 1 at tile 4: 36 pairs a step)."""
    batches = device_batches(groups)[:2]
    steps = []
    for batch in batches:
        fields = sentence_fields(batch, "sentence")
        x = states(batch, seed=4)
        inputs = (x, states(batch, seed=5), states(batch, seed=6))
        weights = jax.random.normal(jax.random.key(7), x.shape)
        results = tiled_and_dense(tile, chunk, inputs, weights, fields)
        for (out, grads), (dense_out, dense_grads) in zip(results[::2], results[1::2],
                                                         strict=True):
            chex.assert_shape(out, x.shape)
            np.testing.assert_allclose(out, dense_out, rtol=1e-5, atol=1e-6)
            for grad, dense_grad in zip(grads, dense_grads, strict=True):
                np.testing.assert_allclose(grad, dense_grad, rtol=1e-5, atol=1e-5)
        for level in range(1, LEVELS + 1):
            shapes = tuple(index.shape[1:] for index in level_plan(fields, level))
            schedule = tile_schedule(shapes, tile)
            pairs = schedule.num_tiles + len(schedule.query_tiles)
            steps.append(-(-pairs // -(-chunk * x.shape[1] ** 2 // tile ** 2)) if chunk else 1)
    if (tile, chunk) == (4, 1):
        assert max(steps) > 1


def test_tiled_attention_in_bfloat16_stays_close():
    batch = device_batches(1)[0]
    fields = sentence_fields(batch, "sentence")
    inputs = [states(batch, seed) for seed in (1, 2, 3)]
    attend = jax.jit(lambda *inputs: tiled_attention(*inputs, level_plan(fields, 1),
                                                      score_fn=jax.nn.elu, tile=4, chunk=1))
    full = attend(*inputs)
    half = attend(*(x.astype(jnp.bfloat16) for x in inputs))
    assert half.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(half, np.float32), full, rtol=0.05, atol=0.05)


def equation_count(jaxpr, skip: tuple[str, ...] = ("reshape",)) -> int:
    """Equations of a jaxpr and of the jaxprs inside its equations, `skip` primitives left out."""
    count = 0
    for eqn in jaxpr.eqns:
        count += eqn.primitive.name not in skip
        for value in eqn.params.values():
            for item in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(item, "jaxpr", item)
                if hasattr(inner, "eqns"):
                    count += equation_count(inner, skip)
    return count


def test_tiled_attention_trace_does_not_grow_with_the_classes():
    """The traced train computation of one level has as many equations with about twice as many
    classes ("exact" against "multiple_of_8" classes), apart from one reshape per class."""
    counts, classes = [], []
    for scheme in ("exact", "multiple_of_8"):
        batch = next(iter(batcher(random_features(60, seed=9), PackingConfig(scheme), BATCH,
                                  (24,)).epoch(0)))
        fields = sentence_fields(batch, "sentence")
        plan = level_plan(fields, 1)
        x = states(batch)

        def loss(x, plan=plan):
            return jnp.sum(tiled_attention(x, x, x, plan, score_fn=jax.nn.elu, tile=4, chunk=0))

        counts.append(equation_count(jax.make_jaxpr(jax.grad(loss))(x).jaxpr))
        classes.append(len(plan))
    assert classes[0] > classes[1] and counts[0] == counts[1]


def test_tiled_attention_over_devices_needs_no_collective():
    """G = one group per device with the batch and plan sharded over "data": the result equals
    G = 1's, and the compiled gradient (the pair loop included) moves nothing between devices."""
    devices = len(jax.devices())
    mesh = make_mesh()
    one, sharded = device_batches(1, 2 * devices)[0], device_batches(devices, 2 * devices)[0]

    def attend(x, fields):
        return jnp.stack([tiled_attention(x, 0.5 * x, x, level_plan(fields, level),
                                           score_fn=jax.nn.elu, tile=4, chunk=1)
                          for level in range(1, LEVELS + 1)])

    x = states(one)
    expected = jax.jit(attend)(x, sentence_fields(one, "sentence"))
    placed = shard_batch({**sharded, "x": np.asarray(x)}, mesh)
    x_placed, fields = placed.pop("x"), sentence_fields(placed, "sentence")
    np.testing.assert_allclose(jax.jit(attend)(x_placed, fields), expected, rtol=1e-6, atol=1e-6)
    gradient = jax.jit(jax.grad(lambda x, fields: jnp.sum(attend(x, fields))))
    text = gradient.lower(x_placed, fields).compile().as_text()
    assert not any(op in text for op in ("all-gather", "all-reduce", "all-to-all",
                                         "collective-permute", "reduce-scatter"))
