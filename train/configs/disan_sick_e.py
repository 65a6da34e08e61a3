"""DiSAN on SICK-E entailment (not in the DiSAN paper; PSAN's Table 3 reports a DiSAN encoder at
85.1% test accuracy, eval/paper_results.py).

Tied encoder, pair features [|u - v|, u * v] (SentEval's) -> Dense 300 + ELU -> Dense 3;
dev = SICK_trial.txt. Trained like DiSAN's SNLI model (disan.md): Adadelta lr 0.5, batch 64,
L2 5e-5, keep 0.75, d_h 300. The paper setting (GloVe 300-d initial embeddings, fine-tuned) is
this config plus ONE override:
  --config.data.embeddings=PATH/glove.840B.300d.txt
"""

from __future__ import annotations

from train.configs import base


def get_config():
    config = base.get_config("disan,sick_e")
    config.model.keep_prob = 0.75
    config.optim.update(dict(name="adadelta", learning_rate=0.5, weight_decay=5e-5))
    config.train.update(dict(epochs=20, patience=5))
    return config
