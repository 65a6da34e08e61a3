"""DiSAN on SST-5 fine-grained sentiment (Shen et al. 2018: 51.72% test accuracy).

Trained on every labelled phrase of the SST train trees (dataset "sst5_phrases", 318k phrases),
non-neutral phrases and whole sentences 3x as in the authors' code (data.phrase_repeats = 3:
519k examples an epoch), evaluated on whole dev / test sentences. Classifier Dense 300 + ReLU ->
Dense 5 (disan.md); Adadelta lr 0.5, batch 64, L2 1e-4 on weight matrices, dropout keep 0.7,
d_h 300; evaluation every 1000 steps. The paper setting (GloVe 300-d initial embeddings,
fine-tuned) is this config plus ONE override:
  --config.data.embeddings=PATH/glove.840B.300d.txt
"""

from __future__ import annotations

from train.configs import base


def get_config():
    config = base.get_config("disan,sst5_phrases")
    config.model.keep_prob = 0.7
    config.task.head.activation = "relu"
    config.data.phrase_repeats = 3
    config.optim.update(dict(name="adadelta", learning_rate=0.5, weight_decay=1e-4))
    config.train.update(dict(epochs=5, eval_every=1000, patience=5))
    return config
