"""Transformer POS tagger on UD English-EWT XPOS (PTB tags), PhraseTransformer's baseline setup:
d 300, 6 heads of 50, 2 layers (paper, PTB: 96.36% accuracy for the plain Transformer)."""

from __future__ import annotations

from train.configs import base


def get_config():
    config = base.get_config("transformer,ud_ewt")
    config.model.update(dict(num_layers=2, num_heads=6, ff_dim=600, dropout_rate=0.1))
    config.task.head.hidden_dims = ()
    config.data.update(dict(batch_size=32, max_length=64))
    config.optim.update(dict(name="adam", learning_rate=5e-4, b2=0.98, weight_decay=0.0,
                             clip_norm=5.0))
    config.train.update(dict(epochs=10, patience=3))
    return config
