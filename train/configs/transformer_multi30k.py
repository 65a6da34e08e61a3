"""Transformer encoder-decoder on Multi30k German -> English (lower-cased tokenised files).

PhraseTransformer's baseline is d 512, 8 heads, 6 layers (paper BLEU 20.90); this config keeps
that width with fewer layers so it trains on one machine. The metric is teacher-forced token
accuracy (and perplexity); there is no beam search or BLEU here.
"""

from __future__ import annotations

from train.configs import base


def get_config():
    config = base.get_config("transformer,multi30k")
    config.model.update(dict(embed_dim=512, model_dim=512, num_layers=3, num_heads=8,
                             ff_dim=2048, dropout_rate=0.1))
    config.task.head.decoder.update(dict(model_dim=512, num_layers=3, num_heads=8, ff_dim=2048,
                                         dropout_rate=0.1, label_smoothing=0.1))
    config.data.update(dict(batch_size=64, max_length=48, min_count=2, lowercase=True))
    config.optim.update(dict(name="adam", learning_rate=2e-4, b2=0.98, eps=1e-9,
                             weight_decay=0.0, clip_norm=5.0))
    config.train.update(dict(epochs=20, patience=3))
    return config
