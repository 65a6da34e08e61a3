"""`python -m train.compare`: jaxenc.training.compare's command from a checkout (installed:
`jaxenc-compare`)."""

from jaxenc.training.compare import command

if __name__ == "__main__":
    command()
