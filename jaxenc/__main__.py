"""`python -m jaxenc --version`: print the library version (and the JAX backend with -v);
`python -m jaxenc export WORKDIR OUT`: export a trained encoder (jaxenc.exporting, see --help)."""

import argparse
import sys

from jaxenc import __version__


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["export"]:
        from jaxenc import exporting

        exporting.main(argv[1:])
        return
    parser = argparse.ArgumentParser(
        prog="python -m jaxenc",
        description="jaxenc: syntax-aware sentence encoders in JAX/Flax. "
        "Training: python -m train.main --help; evaluation: python -m eval.transfer --help; "
        "export of a trained encoder: python -m jaxenc export --help.",
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
