"""Transfer evaluation of frozen sentence encoders (the SentEval protocol, in JAX).

`python -m eval.transfer --help`; `eval.transfer.run_transfer(encoder, tasks, data_dir, out_dir)`.
"""
