"""DiSAN on SICK-R relatedness with the Tai et al. (2015) head (Shen et al. 2018: Pearson
0.8704, Spearman 0.8164, MSE 0.2861).

Tied encoder; head h_x = u * v, h_+ = |u - v| -> sigmoid(Dense 50) -> softmax over the scores
1..5; loss KL(sparse target || p); the checkpoint kept is the best dev Pearson (dev =
SICK_trial.txt). disan.md: Adadelta lr 0.5, batch 64, L2 5e-5, keep 0.75, d_h 300. The paper
setting (GloVe 300-d initial embeddings, fine-tuned) is this config plus ONE override:
  --config.data.embeddings=PATH/glove.840B.300d.txt
"""

from __future__ import annotations

from train.configs import base


def get_config():
    config = base.get_config("disan,sick_r")
    config.model.keep_prob = 0.75
    config.optim.update(dict(name="adadelta", learning_rate=0.5, weight_decay=5e-5))
    config.train.update(dict(epochs=20, patience=5))
    return config
