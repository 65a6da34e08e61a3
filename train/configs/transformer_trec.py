"""The plain multi-head Transformer of PSAN's Table 5 on TREC (300-d sentence vectors).

PSAN (Wu et al. 2018, Sec. 4.4) re-implements Vaswani et al.'s encoder with 300-d sentence
vectors and trains it like PSAN: GloVe 840B 300-d fixed (OOV words hashed into 128 random
vectors), batch 16, Adadelta lr 0.75, L2 5e-5. Paper: 87.1% test accuracy (PSAN 89.1, DiSAN 87.7).
With the real vectors:
  --config.data.embeddings=PATH/glove.840B.300d.txt --config.data.freeze_embeddings=True
  --config.data.oov=hashed
"""

from __future__ import annotations

from train.configs import base


def get_config():
    config = base.get_config("transformer,trec")
    config.data.batch_size = 16
    config.optim.update(dict(name="adadelta", learning_rate=0.75, weight_decay=5e-5))
    config.train.update(dict(epochs=20, patience=5))
    return config
