"""Exports are data, safe to load: both readers (`jaxenc.load`, `jaxenc.standalone.load`) and
`python -m jaxenc verify` refuse links, paths that leave the export folder, files the manifest
does not vouch for and a manifest whose digest is not the pinned one, each in one line.

One tiny bag-of-words export (one bucket, CPU only) is made per module; each test changes a copy.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_export import BATCH, make_run

import jaxenc
from jaxenc import standalone
from jaxenc.errors import ConfigError, DataError
from jaxenc.training import integrity

MANIFEST = standalone.MANIFEST_FILE


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("safety")
    return jaxenc.export(make_run(root, "bag").workdir, root / "bag.export", batch_size=BATCH,
                         platforms=("cpu",))


def copy_of(export: Path, folder: Path) -> Path:
    shutil.copytree(export, folder)
    return folder


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def refused(load, folder: Path, match: str, named: Path) -> str:
    """The one-line DataError `load(folder)` raises, which matches `match` and names `named`."""
    with pytest.raises(DataError, match=match) as error:
        load(folder)
    message = str(error.value)
    assert len(message.splitlines()) == 1 and str(named) in message and "(fix: " in message
    return message


def jax_only(folder: Path, **kwargs) -> None:
    """What the jax-only reader reads to encode a batch: format.json, params.npz, a function."""
    encoder = standalone.load(folder, **kwargs)
    encoder.function(encoder.buckets[0])


READERS = {"jaxenc.load": jaxenc.load, "standalone": jax_only, "verify": standalone.verify}


def verify_command(folder: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jaxenc", "verify", str(folder), *options],
                          capture_output=True, text=True, timeout=120)


def test_an_export_holds_no_code_and_loads_with_its_digest_pinned(export, tmp_path):
    assert not [path for path in export.rglob("*") if path.suffix in (".py", ".pyc", ".so")]
    digest = hashlib.sha256((export / MANIFEST).read_bytes()).hexdigest()
    assert standalone.verify(export).sha256 == digest
    enc = jaxenc.load(export, sha256=digest)
    assert enc.name.endswith(digest[:12])
    encoder = standalone.load(export, sha256=digest.upper())
    fields = enc.featurize(["the film is good ."], BATCH)[0]
    np.testing.assert_allclose(encoder(fields), enc.apply(enc.params, fields), rtol=1e-5,
                               atol=1e-6)
    wrong = hashlib.sha256(b"another export").hexdigest()
    for name, load in READERS.items():
        message = refused(lambda folder, load=load: load(folder, sha256=wrong), export,
                          f"its SHA-256 is {digest}, not the pinned {wrong}", export / MANIFEST)
        assert "python -m jaxenc verify" in message, name
    with pytest.raises(ConfigError, match="is not a SHA-256 digest"):
        jaxenc.load(export, sha256=digest[:12])


def test_a_symbolic_link_inside_the_export_is_refused(export, tmp_path):
    outside = copy_of(export, tmp_path / "outside")
    linked_file = copy_of(export, tmp_path / "linked_file")
    (linked_file / "vocab.txt").unlink()
    (linked_file / "vocab.txt").symlink_to(outside / "vocab.txt")  # same bytes, same digest
    linked_folder = copy_of(export, tmp_path / "linked_folder")
    shutil.rmtree(linked_folder / "functions")
    (linked_folder / "functions").symlink_to(outside / "functions", target_is_directory=True)
    for folder, link in [(linked_file, "vocab.txt"), (linked_folder, "functions")]:
        for load in READERS.values():
            refused(load, folder, "a symbolic link inside an export", folder / link)
    linked_format = copy_of(export, tmp_path / "linked_format")
    (linked_format / "format.json").unlink()
    (linked_format / "format.json").symlink_to(outside / "format.json")
    for load in READERS.values():
        refused(load, linked_format, "symbolic link", linked_format / "format.json")


def test_a_format_json_path_that_leaves_the_folder_is_refused(export, tmp_path):
    shutil.copy(export / "vocab.txt", tmp_path / "vocab.txt")
    changes = {
        "vocabulary.file": lambda d: d["vocabulary"].update(file="../vocab.txt"),
        "params.npz": lambda d: d["params"].update(npz=str((export / "params.npz").absolute())),
        "functions.buckets.16.file": lambda d: d["functions"]["buckets"]["16"].update(
            file="functions/../../bag.export/functions/encode_l16.jaxexport"),
    }
    for index, (where, change) in enumerate(changes.items()):
        folder = copy_of(export, tmp_path / f"escape{index}")
        edit_json(folder / "format.json", change)
        integrity.seal(folder)  # a consistent manifest: the path itself is refused
        for load in (jaxenc.load, jax_only):
            refused(load, folder, f"{re.escape(where)} records the path .* leaves the export",
                    folder / "format.json")


def test_a_manifest_entry_that_leaves_the_folder_is_refused(export, tmp_path):
    secret = tmp_path / "x"
    secret.write_text("not part of the export\n")
    entry = [secret.stat().st_size, hashlib.sha256(secret.read_bytes()).hexdigest()]
    for index, name in enumerate(["../../x", "../x", str(secret), "functions/../../x"]):
        folder = copy_of(export, tmp_path / "deep" / f"escape{index}")
        edit_json(folder / MANIFEST, lambda d, name=name: d.update({name: entry}))
        for load in READERS.values():
            refused(load, folder, "an entry records the path .* leaves the export",
                    folder / MANIFEST)
        result = verify_command(folder)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1


def test_an_altered_file_is_refused(export, tmp_path):
    folder = copy_of(export, tmp_path / "altered")
    data = bytearray((folder / "params.npz").read_bytes())
    data[-100] ^= 1  # the same size, another checksum
    (folder / "params.npz").write_bytes(bytes(data))
    for load in READERS.values():
        refused(load, folder, "export file is damaged: its content changed",
                folder / "params.npz")


def test_a_file_read_but_not_in_the_manifest_is_refused(export, tmp_path):
    for name in ["vocab.txt", "params.npz", "format.json"]:
        folder = copy_of(export, tmp_path / f"unlisted_{name}")
        edit_json(folder / MANIFEST, lambda d, name=name: d.pop(name))
        readers = READERS if name != "vocab.txt" else {"jaxenc.load": jaxenc.load}
        for load in readers.values():  # the jax-only reader does not read vocab.txt
            refused(load, folder, "not in the export's jaxenc_manifest.json", folder / name)
    folder = copy_of(export, tmp_path / "extra")
    extra = folder / "params" / "extra_array"
    extra.write_bytes(b"\0" * 8)  # orbax would read what its folder holds
    refused(jaxenc.load, folder, "not in the export's jaxenc_manifest.json", extra)


def test_python_m_jaxenc_verify(export, tmp_path):
    digest = hashlib.sha256((export / MANIFEST).read_bytes()).hexdigest()
    result = verify_command(export)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{digest}  {export / MANIFEST}\n"
    assert verify_command(export, "--sha256", digest).returncode == 0
    wrong = verify_command(export, "--sha256", "0" * 64)
    assert wrong.returncode == 2 and "not the pinned" in wrong.stderr
    folder = copy_of(export, tmp_path / "damaged")
    (folder / "vocab.txt").write_text("the\n")
    result = verify_command(folder)
    assert result.returncode == 2 and result.stdout == ""
    assert re.fullmatch(rf"error: {re.escape(str(folder / 'vocab.txt'))}: export file is "
                        r"damaged: .* \(fix: .*\)\n", result.stderr)
    os.remove(folder / MANIFEST)
    result = verify_command(folder)
    assert result.returncode == 2 and "incomplete export" in result.stderr
    help_text = subprocess.run([sys.executable, "-m", "jaxenc", "verify", "--help"],
                               capture_output=True, text=True, timeout=60)
    assert help_text.returncode == 0 and "sha256sum" in help_text.stdout
