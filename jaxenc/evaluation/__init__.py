"""Transfer evaluation of frozen sentence encoders (the SentEval protocol, in JAX).

`jaxenc-eval --help` (from a checkout: `python -m eval.transfer --help`);
`jaxenc.evaluation.transfer.run_transfer(encoder, tasks, data_dir, out_dir)`.
"""
