"""`python -m jaxenc --version`: print the library version (and the JAX backend with -v)."""

import argparse

from jaxenc import __version__


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m jaxenc",
        description="jaxenc: syntax-aware sentence encoders in JAX/Flax. "
        "Training: python -m train.main --help; evaluation: python -m eval.transfer --help.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="also print JAX devices")
    args = parser.parse_args(argv)
    print(f"jaxenc {__version__}")
    if args.verbose:
        import jax

        print(f"jax {jax.__version__} on {jax.devices()}")


if __name__ == "__main__":
    main()
