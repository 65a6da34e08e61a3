"""The main job: train/configs/compare.py on the embedded synthetic dataset (no data folder, no
download): every encoder of the package, and the bag-of-words baseline, trained on it; the table
of dev and test accuracy, train time and encode rate; then the best one is exported and used.

The synthetic labels depend on which predicate a negation scopes over (jaxenc/data/synthetic.py):
half of the sentences come in minimal pairs with the same words and opposite labels. The bag
baseline, which sees only which words occur, stays near chance (50%); the encoders that read
word order or the trees learn the rule to different degrees within this budget
(docs/results.md#the-main-job). After training, the model with the best dev accuracy is exported
to workdir/export and encodes two minimal pairs: the table of cosine similarities shows which
encoders tell the members of a pair apart (the bag cannot: cosine 1).

Unlike compare.py's family recipes (chosen on TREC and SICK-R with 50-d GloVe vectors and each
model's own sizes), every model here has one small shared setting, so that the whole job takes
minutes on two CPU cores: 64-d random embeddings (the synthetic words have no GloVe vectors),
width 64, Adam 3e-3 with clipping and a 100-step warm-up, no L2, batch 64 in buckets of 16 and 32
tokens, a dev evaluation every epoch and a fixed budget of 10 epochs (the best dev checkpoint is
tested). Each model's own
settings: DiSAN d_h 64, dropout keep 0.9; PSAN d 64, dense phrase attention (compiles in
seconds; the packed default pays off on long sentences, not here); the Transformer family
(Transformer, Dependency-Transformer, PhraseTransformer) 2 layers, 4 heads, FFN 128, no dropout,
sqrt(d) embedding scale (results/dependency_transformer: without it the words are drowned by the
positions); Mean-Max AAE's encoder (its mean+max pooled code, trained with the classifier, not as
an autoencoder here) d 64, FFN 128, 4 heads; Tree-LSTM memory 64. PSAN, the
Dependency-Transformer and the Tree-LSTM read the gold trees. More seeds:
--config.train.seeds=3 (mean ± std per model).
"""

from __future__ import annotations

import ml_collections

from train.configs import base, compare

EMBED_DIM = 64
WIDTH = 64
TRANSFORMER = dict(embed_dim=EMBED_DIM, model_dim=WIDTH, num_layers=2, num_heads=4, ff_dim=128,
                   dropout_rate=0.0, scale_embeddings=True)
# Pairs of sentences encoded by the best model after training (and by every other model).
MINIMAL_PAIRS = (
    "the film that was not good is good .", "the film that was good is not good .",
    "the critic says that the plot is not bad .", "the critic does not say that the plot is bad .",
)


def get_config():
    config = compare.get_config("synthetic")
    config.recipes = ml_collections.ConfigDict()  # one shared setting (module docstring)
    config.data.embeddings = ""
    config.model.update(dict(embed_dim=EMBED_DIM, hidden=WIDTH, keep_prob=0.9))
    config.task.head.hidden_dims = (WIDTH,)
    # two buckets (16 and 32 tokens): half the programs to compile of bucket_step 8, which
    # costs a fresh run more time than the padding saves
    config.data.update(dict(batch_size=64, eval_batch_size=128, max_length=32, bucket_step=16))
    config.optim.update(dict(name="adam", learning_rate=3e-3, warmup_steps=100, weight_decay=0.0,
                             clip_norm=5.0))
    # a fixed budget: models sit at chance for several epochs before they learn the rule, so
    # early stopping (compare.py's patience) would end some of them there
    config.train.update(dict(epochs=10, patience=0, log_every=20))
    config.checkpoint.every = 300  # steps; evaluation (and the best checkpoint) every epoch
    baselines = dict(
        psan=base.model_config("psan", embed_dim=EMBED_DIM, model_dim=WIDTH, keep_prob=0.9,
                               parser="gold", psa_impl="dense"),
        dependency_transformer=base.model_config("dependency_transformer", relation_dim=16,
                                                 parser="gold", **TRANSFORMER),
        phrase_transformer=base.model_config("phrase_transformer", **TRANSFORMER),
        meanmax_aae=base.model_config("meanmax_aae", embed_dim=EMBED_DIM, model_dim=WIDTH,
                                      ff_dim=128, num_heads=4, dropout_rate=0.0,
                                      freeze_embeddings=False),
        tree_lstm=base.model_config("tree_lstm", embed_dim=EMBED_DIM, memory_dim=WIDTH,
                                    parser="gold"),
        transformer=base.model_config("transformer", **TRANSFORMER),
        bag=base.model_config("bag", embed_dim=EMBED_DIM),
    )
    for name, model in baselines.items():
        config.baselines[name] = model
    config.showcase.update(dict(export_best=True, sentences=MINIMAL_PAIRS))
    return config
