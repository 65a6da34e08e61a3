"""DiSAN on TREC (Shen et al. 2018: 94.4% test; PSAN's Table 5 re-implementation: 87.7%).

disan.md: Adadelta lr 0.5, batch 64, L2 1e-4 on weight matrices, dropout keep 0.7, GloVe 300-d
initial embeddings fine-tuned (--config.data.embeddings=PATH/glove.840B.300d.txt), OOV words
U(-0.05, 0.05).
"""

from __future__ import annotations

from train.configs import base


def get_config():
    config = base.get_config("disan,trec")
    config.model.keep_prob = 0.7
    config.data.batch_size = 64
    config.optim.update(dict(name="adadelta", learning_rate=0.5, weight_decay=1e-4))
    config.train.update(dict(epochs=20, patience=5))
    return config
