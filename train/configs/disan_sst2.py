"""DiSAN on SST-2 binary sentiment, sentence level (dataset "sst2"; the DiSAN paper reports
SST-5 only, PSAN's Table 3 has a DiSAN encoder at 82.9% as a SentEval transfer result).

Classifier Dense 300 + ReLU -> Dense 2; Adadelta lr 0.5, batch 64, L2 1e-4 on weight matrices,
dropout keep 0.7, d_h 300 (disan.md's SST setting). The paper setting (GloVe 300-d initial
embeddings, fine-tuned) is this config plus ONE override:
  --config.data.embeddings=PATH/glove.840B.300d.txt
"""

from __future__ import annotations

from train.configs import base


def get_config():
    config = base.get_config("disan,sst2")
    config.model.keep_prob = 0.7
    config.task.head.activation = "relu"
    config.optim.update(dict(name="adadelta", learning_rate=0.5, weight_decay=1e-4))
    config.train.update(dict(epochs=20, patience=5))
    return config
