"""`python -m jaxenc --version`: print the library version (and the JAX backend with -v);
`python -m jaxenc export WORKDIR OUT`: export a trained encoder (jaxenc.exporting, see --help);
`python -m jaxenc verify OUT`: check an export's files and print the digest that pins it;
`python -m jaxenc predict WORKDIR --out FILE`: a trained run's per-example test outputs
(jaxenc.training.predict)."""

import argparse
import sys
from pathlib import Path

from jaxenc import __version__, cli


def verify(argv: list[str]) -> str:
    """`python -m jaxenc verify OUT`: see --help. Returns the manifest's digest."""
    from jaxenc.export_format import MANIFEST_FILE

    parser = argparse.ArgumentParser(
        prog="python -m jaxenc verify",
        description="Check an export folder as both readers do before reading it: no symbolic "
        "links, no manifest entry leaving the folder, every file listed in "
        f"{MANIFEST_FILE} and every listed file of its size and SHA-256, format.json's "
        "version, fields, caps and paths, and the headers of the arrays it names (shapes, "
        "dtypes, uncompressed members; the values are read by the readers). When all "
        "match, print the SHA-256 of the manifest file, as sha256sum prints it (digest, two "
        "spaces, the manifest's path), and exit 0; pass that digest to jaxenc.load(OUT, "
        "sha256=...) or jaxenc.standalone.load(OUT, sha256=...) to load exactly this export. "
        "Otherwise print one line naming the first bad file and exit 2.",
        epilog="Example: python -m jaxenc verify exports/disan_trec")
    parser.add_argument("out", help="an export folder (python -m jaxenc export WORKDIR OUT)")
    parser.add_argument("--sha256", default=None,
                        help="also require the manifest to have this digest")
    return _verify(parser.parse_args(argv))


@cli.reports_errors
def _verify(args: argparse.Namespace) -> str:
    from jaxenc import export_checks
    from jaxenc.export_format import MANIFEST_FILE

    digest = export_checks.verify(args.out, args.sha256).sha256
    print(f"{digest}  {Path(args.out) / MANIFEST_FILE}")
    return digest


def main(argv: list[str] | None = None) -> None:
    """Runs the `python -m jaxenc` command line `argv` (default: sys.argv[1:])."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["export"]:
        from jaxenc import exporting

        exporting.main(argv[1:])
        return
    if argv[:1] == ["verify"]:
        verify(argv[1:])
        return
    if argv[:1] == ["predict"]:
        from jaxenc.training import predict

        predict.main(argv[1:])
        return
    parser = argparse.ArgumentParser(
        prog="python -m jaxenc",
        description="jaxenc: syntax-aware sentence encoders in JAX/Flax. "
        "Training: python -m train.main --help; evaluation: python -m eval.transfer --help; "
        "export of a trained encoder: python -m jaxenc export --help; check of an export and "
        "the digest that pins it: python -m jaxenc verify --help; a trained run's per-example "
        "outputs: python -m jaxenc predict --help.",
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
