"""DiSAN on TREC coarse question types (Shen et al. 2018: 94.4% test; PSAN's Table 5
re-implementation: 87.7%).

disan.md: Adadelta lr 0.5, batch 64, L2 1e-4 on weight matrices, dropout keep 0.7, d_h 300,
classifier Dense 300 + ELU -> Dense 6. TREC ships no dev split: 10% of TREC.train is carved off
(task.dev_fraction, seeded). The paper setting (GloVe 300-d initial embeddings, fine-tuned, OOV
words U(-0.05, 0.05)) is this config plus ONE override:
  --config.data.embeddings=PATH/glove.840B.300d.txt
Without it the word table starts random and is trained.
"""

from __future__ import annotations

from train.configs import base


def get_config():
    config = base.get_config("disan,trec")
    config.model.keep_prob = 0.7
    config.optim.update(dict(name="adadelta", learning_rate=0.5, weight_decay=1e-4))
    config.train.update(dict(epochs=20, patience=5))
    return config
