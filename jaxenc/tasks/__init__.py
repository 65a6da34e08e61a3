"""Tasks: an encoder composed with a head (heads.py), its loss (losses.py) and metrics
(metrics.py); the interface in base.py, the kinds in classification.py, tagging.py and
seq2seq.py, and `factory.build_task` picks one by dataset kind."""
