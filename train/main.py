"""`python -m train.main`: jaxenc.training.main's command from a checkout (installed:
`jaxenc-train`); the configs are in train/configs/."""

from jaxenc.training.main import command

if __name__ == "__main__":
    command()
