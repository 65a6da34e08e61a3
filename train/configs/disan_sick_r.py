"""DiSAN on SICK-R relatedness with the Tai et al. (2015) head (Shen et al. 2018: Pearson
0.8704, Spearman 0.8164, MSE 0.2861).

Loss KL(sparse target || p) over the 5 score classes; the checkpoint kept is the best dev Pearson.
disan.md: Adadelta lr 0.5, batch 64, L2 5e-5, keep 0.75, GloVe 300-d fine-tuned
(--config.data.embeddings=PATH/glove.840B.300d.txt).
"""

from __future__ import annotations

from train.configs import base


def get_config():
    config = base.get_config("disan,sick_r")
    config.data.batch_size = 64
    config.optim.update(dict(name="adadelta", learning_rate=0.5, weight_decay=5e-5))
    config.train.update(dict(epochs=20, patience=5))
    return config
