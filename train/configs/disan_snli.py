"""DiSAN on SNLI (Shen et al. 2018: 85.57% test, 2.35M parameters without embeddings).

disan.md: tied encoder, NLI classifier [s_p, s_h, s_p - s_h, s_p * s_h] -> ELU(Dense 300) ->
Dense 3 (2,345,403 parameters with the encoder, embeddings excluded); Adadelta lr 0.5, batch 64,
L2 5e-5 on weight matrices, dropout keep 0.75, d_h 300. The paper setting (GloVe 300-d initial
embeddings, fine-tuned, OOV words U(-0.05, 0.05)) is this config plus ONE override:
  --config.data.embeddings=PATH/glove.840B.300d.txt
Needs snli_1.0_{train,dev,test}.jsonl from SNLI 1.0 in $JAXENC_DATA_DIR/snli.
"""

from __future__ import annotations

from train.configs import base


def get_config():
    config = base.get_config("disan,snli")
    config.model.keep_prob = 0.75
    config.optim.update(dict(name="adadelta", learning_rate=0.5, weight_decay=5e-5))
    config.train.update(dict(epochs=10, eval_every=5000, patience=5))
    return config
