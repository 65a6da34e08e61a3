"""Mean-Max AAE with the paper's settings (Zhang et al., EMNLP 2018, section 4.2; the authors'
conf.json where the paper is silent), trained on any text file:

  python -m train.main --config=train/configs/meanmax_aae_paper.py --workdir=DIR \\
      --config.data.corpus_files=books.txt --config.data.embeddings=glove.840B.300d.txt
  python -m eval.transfer --encoder DIR --tasks MR,CR,SUBJ,MPQA,SST2,TREC,MRPC,SICKE,SICKR,STS14

The model section is MeanMaxAAEConfig's defaults (jaxenc/models/meanmax_aae.py): d_m 2048, d_f
4096, 8 heads, dropout 0.5, fixed 300-d GloVe, mean-max pooling, </s> appended to every encoder
input (model.end_token, in training and when encoding, as the paper and the authors' code); the
decoder is the model's own (task.head.decoder.name="model"), label smoothing 0.1. Data as the
authors': sentences of 4..32 tokens, vocabulary = the words seen 1000 times (their word_freq:
21,583 words on the 70M Toronto Books sentences) that have a GloVe vector, sentences with another
word dropped (data.corpus_oov="drop_sentences", their data.py; "drop_words" keeps such a sentence
without those words, "unk" writes <unk> for them: jaxenc/data/corpus.py); the held-out
fractions give ~14k dev and test sentences of 70M. Adam 2e-4 (beta2 0.98, eps 1e-8), global-norm
clip 5, batch 64, 100,000 steps (their `finish`; 6.4M sentences, 9% of an epoch), dev every 500
steps (`validFreq`), checkpoints every 1000. The paper stops "when the reconstruction accuracy on
the development data stops improving": patience 10 evaluations.
"""

from __future__ import annotations

from train.configs import base


def get_config():
    config = base.get_config("meanmax_aae,corpus")
    config.task.update(dict(dev_fraction=0.0002, test_fraction=0.0002))
    config.data.update(dict(
        embeddings="", corpus_files="", oov="drop", corpus_oov="drop_sentences",
        freeze_embeddings=True, lowercase=False,
        min_count=1000, max_vocab=0, batch_size=64, eval_batch_size=128, max_length=34,
        bucket_step=8, expand_vocabulary=True))
    config.optim.update(dict(name="adam", learning_rate=2e-4, b1=0.9, b2=0.98, eps=1e-8,
                             weight_decay=0.0, clip_norm=5.0))
    config.train.update(dict(num_steps=100_000, eval_every=500, log_every=100, patience=10))
    config.checkpoint.every = 1000
    return config
