"""Repository entry point of the transfer evaluation: `python -m eval.transfer --help`.

The library code lives in `jaxenc.evaluation` (installed users: the `jaxenc-eval` command).
"""
