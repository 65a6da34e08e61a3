"""Child-Sum (dependency) Tree-LSTM on SICK-R relatedness, Tai et al. (2015)'s setting: Pearson
0.8676, Spearman 0.8083, MSE 0.2532 in their Table 3 (Ma et al. 2022's Table 1 lists this MSE
under Tree-LSTM_CT and .2734, Tai et al.'s constituency figure, under Tree-LSTM_DT).

Tied encoder (memory 150, spaCy dependency trees: SICK ships none), sentence vector = h of the
root word; head h_x = u * v, h_+ = |u - v| -> sigmoid(Dense 50) -> softmax over the scores 1..5;
loss KL(sparse target || p); the checkpoint kept is the best dev Pearson (dev = SICK_trial.txt).
Tai et al.: AdaGrad lr 0.05, batch 25, L2 1e-4, word vectors held fixed. The paper setting (GloVe
840B 300-d vectors) is this config plus ONE override:
  --config.data.embeddings=PATH/glove.840B.300d.txt
(partial 50-d GloVe: also --config.model.embed_dim=50; with no vectors at all, fixed random
vectors carry little: add --config.data.freeze_embeddings=False).
"""

from __future__ import annotations

from train.configs import base


def get_config(dataset: str = "sick_r"):
    """Tai et al.'s relatedness training; `dataset` lets tree_lstm_sick_e.py reuse it."""
    config = base.get_config(f"tree_lstm,{dataset}")
    config.data.update(dict(batch_size=25, freeze_embeddings=True))
    config.optim.update(dict(name="adagrad", learning_rate=0.05, weight_decay=1e-4))
    config.task.head.relatedness_hidden_dim = 50
    config.train.update(dict(epochs=10))
    return config
