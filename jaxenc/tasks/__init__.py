"""Tasks: an encoder composed with a head (heads.py), its loss (losses.py) and metrics
(metrics.py); `tasks.build_task` picks one by dataset kind."""
