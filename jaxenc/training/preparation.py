"""A training run ready to train: the config checked (`validate`), then its examples featurized,
batched and its model, optimiser and initial state built (`prepare`); the run's files
(config.json, vocabularies) written in its workdir."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import ml_collections
import optax
from jax.sharding import Mesh

from jaxenc.data import corpus, labelled_files, registry
from jaxenc.data.batching import Batcher
from jaxenc.data.embeddings import load_vectors
from jaxenc.data.featurize import RELATIONS_FILE, Featurizer, relation_vocabulary, tag_index
from jaxenc.errors import ConfigError
from jaxenc.files import writing
from jaxenc.models import registry as models
from jaxenc.records import Example
from jaxenc.tasks.base import Task
from jaxenc.tasks.factory import build_task
from jaxenc.tasks.seq2seq import GreedySamples, Seq2SeqTask
from jaxenc.training import run_files
from jaxenc.training.input_pipeline import PHRASE_DATASETS, build_vocabularies, make_batchers
from jaxenc.training.optim import EMBEDDING_LEAF, OPTIMIZERS, build_optimizer
from jaxenc.training.sections import Sections
from jaxenc.training.sharding import check_batch_sizes, check_loop_settings, replicated
from jaxenc.training.state import (
    TrainState,
    create_train_state,
    init_params,
    with_pretrained_embeddings,
)
from jaxenc.training.steps import EvalStep, make_eval_step
from jaxenc.training.validation import check_config

log = logging.getLogger(__name__)

NONFINITE_POLICIES = ("stop", "skip")  # train.nonfinite


def validate(config: ml_collections.ConfigDict) -> None:
    """Fails fast, before any data is read, on names and values the config gets wrong."""
    check_config(config)
    for key, names, what in (("model.name", models.ENCODERS, "model"),
                             ("optim.name", OPTIMIZERS, "optimizer"),
                             ("task.dataset", registry.DATASETS, "dataset"),
                             ("train.nonfinite", NONFINITE_POLICIES, "nonfinite policy")):
        section, field = key.split(".")
        if config[section][field] not in names:
            raise ConfigError(f"unknown {what} {config[section][field]!r} (fix: set "
                              f"--config.{key} to one of {', '.join(names)})")
    if config.task.dataset == labelled_files.NAME:
        labelled_files.check_files(config.data)
    repeats, dataset = (config.data.get("phrase_repeats", 1),
                        registry.DATASETS[config.task.dataset].name)
    if repeats > 1 and dataset not in PHRASE_DATASETS:
        raise ConfigError(f"data.phrase_repeats={repeats} applies to {', '.join(PHRASE_DATASETS)} "
                          f"only, not {dataset!r} (fix: leave --config.data.phrase_repeats at 1)")



def count_params(params: dict) -> tuple[int, int]:
    """(all parameters, parameters outside embedding tables)."""
    leaves = jax.tree_util.tree_leaves_with_path(params)
    total = sum(leaf.size for _, leaf in leaves)
    tables = sum(leaf.size for path, leaf in leaves
                 if getattr(path[-1], "key", None) == EMBEDDING_LEAF)
    return total, total - tables


@dataclasses.dataclass
class Setup:
    """A run ready to train: batches, the task model, the optimiser, the initial state, the
    jitted evaluation step (one for the run: each bucket compiles once, however often dev and
    test are evaluated) and the featurizer of its examples."""

    config: ml_collections.ConfigDict  # as config.json records it
    sections: Sections  # its typed sections
    workdir: Path
    info: registry.DatasetInfo
    batchers: dict[str, Batcher]
    task: Task
    model: nn.Module
    tx: optax.GradientTransformation
    mesh: Mesh
    state: TrainState
    eval_step: EvalStep
    summary: str  # one line: what is trained on what
    samples: GreedySamples | None = None  # seq2seq: printed at each evaluation
    featurizer: Featurizer | None = None  # what turned the examples into features


def prepare(config: ml_collections.ConfigDict, workdir: Path, mesh: Mesh,
            splits: dict[str, list[Example]],
            identity: Mapping[str, Mapping[str, Any]] | None = None) -> Setup:
    """Featurizes `splits` (`input_pipeline.load_splits`), builds the model, initialises the
    state (step 0) and writes config.json (with the splits' data identity: `identity` when the
    caller computed it, `run_files.data_identity`) and the vocabularies into `workdir` unless a
    previous run did. The config is checked first (`check_config`), which resolves its "auto"
    model options in place: what is built and recorded is the same whether or not the caller
    checked it."""
    check_config(config)
    sections = Sections.of(config)
    data, seed = sections.data, sections.train.seed
    check_batch_sizes(data, mesh)
    info = registry.dataset_info(sections.task.dataset, data)
    vocabularies = build_vocabularies(workdir, info.kind, splits["train"], data,
                                      filtered=info.name == corpus.NAME)
    vocab, target_vocab = vocabularies["vocab"], vocabularies.get("target_vocab")
    encoder = models.build_encoder(config.model, len(vocab))
    check_loop_settings(encoder.config, mesh)
    pretrained = found = None
    if data.embeddings:
        vectors = load_vectors(data.embeddings, vocab, oov=data.oov, seed=seed,
                               lowercase_fallback=data.lowercase_fallback,
                               expected_dim=config.model.embed_dim)
        log.info("word vectors: %s", vectors.coverage)
        pretrained, found = vectors.matrix, vectors.found if data.oov == "drop" else None
    tags = tag_index(splits["train"]) if info.kind == "tagging" else None
    needs, parse_cache = models.structure_spec(config.model), workdir / "parse_cache"
    relation_vocab = relation_vocabulary(workdir, config.model, needs.fields,
                                         splits["train"], cache_dir=parse_cache)
    featurizer = Featurizer(
        kind=info.kind, vocab=vocab, model_cfg=config.model, structure_fields=needs.fields,
        prefix=needs.prefix_tokens, found=found, target_vocab=target_vocab, tags=tags,
        lowercase_fallback=data.lowercase_fallback, relation_vocab=relation_vocab,
        parse_cache_dir=parse_cache)
    task = build_task(info.kind, sections.task, num_classes=info.num_classes,
                      min_score=info.score_range[0] if info.score_range else 1.0,
                      num_tags=len(tags) if tags is not None else None,
                      target_vocab_size=len(target_vocab) if target_vocab is not None else None,
                      target_vocab=target_vocab)
    batchers = make_batchers({name: featurizer.many(examples) for name, examples in splits.items()},
                             data, seed, packing=needs.packing, groups=mesh.size,
                             train=sections.train, decode=task.generates)
    model = task.build_model(encoder)

    params = init_params(model, next(batchers["train"].epoch(0)), seed)
    if pretrained is not None:
        params = with_pretrained_embeddings(params, pretrained)
    tx = build_optimizer(sections.optim, params, data.freeze_embeddings)
    state = create_train_state(params, tx, seed, replicated(mesh))
    if jax.process_index() == 0 and not (workdir / run_files.CONFIG_FILE).is_file():
        run_files.save_run_files(
            workdir, config, vocabularies,
            identity if identity is not None else run_files.data_identity(splits),
            dataset=dict(name=info.name, kind=info.kind, num_classes=info.num_classes,
                         label_names=info.label_names, score_range=info.score_range))
        with writing(workdir):
            if tags is not None:
                (workdir / "tags.txt").write_text("".join(f"{tag}\n" for tag in tags))
            if relation_vocab is not None:
                relation_vocab.save(workdir / RELATIONS_FILE)
    total, outside = count_params(params)
    summary = (f"{config.model.name} on {info.name} ({info.kind}): "
               f"{'/'.join(str(len(splits[s])) for s in ('train', 'dev', 'test'))} "
               f"train/dev/test examples, vocabulary {len(vocab)}, {total:,} parameters "
               f"({outside:,} outside embeddings), {mesh.size} device(s), batch "
               f"{data.batch_size}, {batchers['train'].num_batches} steps per epoch")
    samples = None
    if isinstance(task, Seq2SeqTask) and sections.train.samples > 0:
        samples = GreedySamples(model, next(batchers["dev"].epoch(0)), target_vocab,
                                sections.train.samples,
                                sections.task.head.decoder.max_decode_length)
    return Setup(config, sections, workdir, info, batchers, task, model, tx, mesh, state,
                 make_eval_step(model, task, mesh), summary, samples, featurizer)
