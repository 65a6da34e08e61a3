"""Child-Sum (dependency) Tree-LSTM on SICK-E entailment (Ma et al. 2022's Table 1 baseline:
Tree-LSTM_DT 82.00% test accuracy), trained as tree_lstm_sick_r.py (Tai et al.'s SICK setting:
AdaGrad lr 0.05, batch 25, L2 1e-4, memory 150, fixed word vectors, spaCy trees).

The Tai et al. head with classes for scores: pair features [|u - v|, u * v] -> sigmoid(Dense 50)
-> Dense 3, cross-entropy; dev = SICK_trial.txt. The paper setting (GloVe 840B 300-d vectors) is
this config plus ONE override:
  --config.data.embeddings=PATH/glove.840B.300d.txt
"""

from __future__ import annotations

from train.configs import tree_lstm_sick_r


def get_config():
    config = tree_lstm_sick_r.get_config("sick_e")
    config.task.head.update(dict(hidden_dims=(50,), activation="sigmoid",
                                 pair_features="|u-v|,u*v"))
    return config
