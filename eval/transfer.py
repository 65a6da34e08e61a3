"""`python -m eval.transfer`: jaxenc.evaluation.transfer's command from a checkout (installed:
`jaxenc-eval`)."""

from jaxenc.evaluation.transfer import command

if __name__ == "__main__":
    command()
