"""The Dependency-Transformer's training setting, shared by its per-task configs.

dependency_transformer.md: AdaGrad lr 1e-3, batch 32, GloVe 300-d initial embeddings fine-tuned
(one override: --config.data.embeddings=PATH/glove.840B.300d.txt), spaCy parses (gold UD trees
where the data has them). SICK-R, SICK-E and MRPC use the Tai et al. (2015) head on the two
[root] vectors: h_s = sigmoid(W [u * v; |u - v|] + b) with 50 units, then a softmax (relatedness:
over the scores 1..5 with the KL loss; classification: over the classes, cross-entropy);
SST-2 a softmax classifier (Dense 300 + ELU -> Dense 2).
AdaGrad with the constants of the paper's PyTorch implementation (torch.optim.Adagrad's defaults:
initial accumulator 0, eps 1e-10); optax adds eps inside the square root, PyTorch outside it:
the two steps agree to a relative 5e-5 once a parameter's summed squared gradient exceeds 1e-6.
"""

from __future__ import annotations

import ml_collections

from train.configs import base

TAI_HEAD = dict(hidden_dims=(50,), activation="sigmoid", pair_features="u*v,|u-v|")


def paper_config(model: str, dataset: str) -> ml_collections.ConfigDict:
    """`model` ("dependency_transformer" or a baseline with the same schedule) on `dataset`."""
    config = base.get_config(f"{model},{dataset}")
    if dataset in ("sick_e", "mrpc"):
        config.task.head.update(TAI_HEAD)
    config.data.batch_size = 32
    config.optim.update(dict(name="adagrad", learning_rate=1e-3, weight_decay=0.0,
                             initial_accumulator=0.0, eps=1e-10))
    config.train.update(dict(epochs=20, patience=5))
    return config
