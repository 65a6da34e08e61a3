"""Exports are data, safe to load: both readers (`jaxenc.load`, `jaxenc.standalone.load`) and
`python -m jaxenc verify` refuse links, paths that leave the export folder, files the manifest
does not vouch for, a manifest whose digest is not the pinned one, malformed format.json fields
and array headers whose sizes do not fit, each in one line, before allocating what they declare.
Writing an export replaces the one there whole, also when killed or refused by the disk.

One tiny bag-of-words export (one bucket, CPU only) is made per module; each test changes a copy.
"""

import errno
import hashlib
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from test_export import BATCH, make_run

import jaxenc
from jaxenc import export_checks, exporting, standalone
from jaxenc.errors import ConfigError, DataError
from jaxenc.export_format import MANIFEST_FILE, ExportError
from jaxenc.training import integrity

MANIFEST = MANIFEST_FILE


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


READERS = {"jaxenc.load": jaxenc.load, "standalone": jax_only, "verify": export_checks.verify}


def verify_command(folder: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jaxenc", "verify", str(folder), *options],
                          capture_output=True, text=True, timeout=120)


def test_an_export_holds_no_code_and_loads_with_its_digest_pinned(export, tmp_path):
    assert not [path for path in export.rglob("*") if path.suffix in (".py", ".pyc", ".so")]
    digest = hashlib.sha256((export / MANIFEST).read_bytes()).hexdigest()
    assert export_checks.verify(export).sha256 == digest
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


# ----------------------------------------------------------------------------- untrusted sizes


def resealed(export: Path, folder: Path, change) -> Path:
    """A copy of `export` changed by `change(folder)`, with a manifest that vouches for it: what
    is refused is then the content itself, not a checksum."""
    copy_of(export, folder)
    change(folder)
    integrity.seal(folder)
    return folder


def npy_bytes(array: np.ndarray, **header) -> bytes:
    """The .npy file of `array`, its header fields (shape, descr) replaced by `header`."""
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    if not header:
        return buffer.getvalue()
    fields = {"descr": np.lib.format.dtype_to_descr(array.dtype), "fortran_order": False,
              "shape": array.shape, **header}
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, fields)
    return out.getvalue() + array.tobytes()


def with_member(key: str, data: bytes, compression: int = zipfile.ZIP_STORED):
    """A change that makes params.npz's array `key` the .npy bytes `data`."""
    def change(folder: Path) -> None:
        path = folder / "params.npz"
        with zipfile.ZipFile(path) as archive:
            members = {info.filename: archive.read(info) for info in archive.infolist()}
        members[f"{key}.npy"] = data
        with zipfile.ZipFile(path, "w") as archive:
            for name, content in members.items():
                archive.writestr(name, content, compress_type=compression
                                 if name == f"{key}.npy" else zipfile.ZIP_STORED)
    return change


def description_change(change):
    return lambda folder: edit_json(folder / "format.json", change)


def refused_by_all(folder: Path, match: str, named: Path, readers=READERS) -> None:
    """Each of `readers` refuses `folder` in one ExportError line matching `match`."""
    for name, load in readers.items():
        with pytest.raises(ExportError, match=match) as error:
            load(folder)
        message = str(error.value)
        assert len(message.splitlines()) == 1 and str(named) in message, (name, message)


ALL_READERS = {**READERS, "jaxenc.load + encode": lambda folder: jaxenc.load(folder).encode(
    ["what is this ?"])}


def test_array_sizes_are_checked_against_the_headers_before_anything_is_read(export, tmp_path):
    table = np.load(export / "params.npz")["embed/embedding"]
    cases = {  # name -> (change, what the refusal says)
        "zip_bomb": (with_member("embed/embedding", npy_bytes(np.zeros((1 << 24,), np.float32)),
                                 zipfile.ZIP_DEFLATED), "is compressed or encrypted"),
        "huge_header": (with_member("embed/embedding", npy_bytes(
            table, shape=(50_000_000_000,))), r"declares float32\[50000000000\], 200000000000 "
            "bytes, but holds"),
        "small_table": (with_member("embed/embedding", npy_bytes(table[:10])),
                        r"is float32\[10, 8\], not the word table float\[192, d\]"),
        "pickle": (with_member("embed/embedding", npy_bytes(np.array([{"a": 1}], object))),
                   "has dtype object, not numbers"),
        "nan": (with_member("embed/embedding", npy_bytes(np.full_like(table, np.nan))),
                "holds nan or inf"),
    }
    for name, (change, match) in cases.items():
        folder = resealed(export, tmp_path / name, change)
        assert (folder / "params.npz").stat().st_size < 2 << 20  # the bomb: 64 MB expanded
        readers = ALL_READERS if name != "nan" else {  # verify reads headers, not data
            key: load for key, load in ALL_READERS.items() if key != "verify"}
        refused_by_all(folder, match, folder / "params.npz", readers)


def test_the_model_config_and_format_json_sizes_must_fit_the_arrays(export, tmp_path):
    cases = {  # name -> (change of format.json, what the refusal says, readers that refuse;
        # the file named: params.npz where its array does not fit, else format.json)
        "embed_dim": (lambda d: d["model"].update(embed_dim=16), r"array 'embed/embedding' is "
                      r"float32\[192, 8\], format.json model needs float32\[192, 16\]",
                      ("jaxenc.load",)),
        "vocabulary": (lambda d: d["vocabulary"].update(size=200),
                       r"not the word table float\[200, d\]", tuple(READERS)),
        "huge_bucket": (lambda d: d.update(buckets=[4_000_000], functions={
            **d["functions"], "buckets": {"4000000": d["functions"]["buckets"]["16"]}}),
            r"field buckets\[0\] is 4000000, not a whole number from 1 to 4096", tuple(READERS)),
        "other_buckets": (lambda d: d.update(buckets=[8]),
                          "not one function per bucket", tuple(READERS)),
        "no_params": (lambda d: d.pop("params"), "field params is missing", tuple(READERS)),
        "dim": (lambda d: d.update(dim=0), "field dim is 0, not a whole number", tuple(READERS)),
        "layers": (lambda d: d["model"].update(num_layers=10_000),
                   "field model.num_layers is 10000, not a whole number from 0 to 256",
                   tuple(READERS)),
        "tokenizer": (lambda d: d.update(tokenizer="eval"), "field tokenizer is 'eval'",
                      ("jaxenc.load",)),
        "model": (lambda d: d["model"].update(name="unknown"), "model cannot be used",
                  ("jaxenc.load",)),
    }
    for name, (change, match, readers) in cases.items():
        folder = resealed(export, tmp_path / name, description_change(change))
        named = "params.npz" if name in ("embed_dim", "vocabulary") else "format.json"
        refused_by_all(folder, match, folder / named,
                       {reader: ALL_READERS[reader] for reader in readers})


def test_buckets_above_max_length_are_refused_with_the_fix(export, tmp_path):
    folder = resealed(export, tmp_path / "long", description_change(lambda d: d.update(
        buckets=[1024], functions={**d["functions"], "buckets": {
            "1024": d["functions"]["buckets"]["16"]}})))
    message = refused(jaxenc.load, folder, "field buckets holds 1024, above max_length 512",
                      folder / "format.json")
    assert "pass max_length=1024" in message
    assert jaxenc.load(folder, max_length=1024).buckets == (1024,)


def test_a_pickled_array_is_refused_and_runs_no_code(export, tmp_path):
    marker = tmp_path / "code_ran"

    class Payload:
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    pickled = npy_bytes(np.array([Payload()], object))
    folder = resealed(export, tmp_path / "pickled", lambda folder: (
        (folder / "found.npy").write_bytes(pickled), edit_json(
            folder / "format.json", lambda d: d["vocabulary"].update(found="found.npy"))))
    refused_by_all(folder, "has dtype object, not numbers", folder / "found.npy",
                   {"jaxenc.load": jaxenc.load, "verify": export_checks.verify})
    assert not marker.exists()


def test_the_orbax_folder_is_never_read_by_jaxenc_load(export, tmp_path):
    """Its zarr metadata could declare any size (a compressed [30000000, 32] table): `load`
    reads params.npz, whose headers are checked, and verify only hashes the orbax files."""
    def change(folder: Path) -> None:
        for path in (folder / "params").rglob("*"):
            if path.is_file():
                path.write_text(json.dumps({"shape": [30_000_000, 32], "dtype": "<f4",
                                            "compressor": {"id": "zstd"}, "chunks": [1, 32]}))
    folder = resealed(export, tmp_path / "orbax", change)
    sentences = ["what is this ?", "the film is good ."]
    np.testing.assert_allclose(jaxenc.load(folder).encode(sentences),
                               jaxenc.load(export).encode(sentences), rtol=1e-6)


def test_verify_checks_what_the_readers_check(export, tmp_path):
    changes = {
        "escape": (lambda d: d["vocabulary"].update(file="../../x"), "vocabulary.file records"),
        "absolute": (lambda d: d["params"].update(npz=str((export / "params.npz").absolute())),
                     "params.npz records the path"),
        "version": (lambda d: d.update(format_version=99), "version 99 needs a newer reader"),
        "no_params": (lambda d: d.pop("params"), "field params is missing"),
    }
    for name, (change, match) in changes.items():
        folder = resealed(export, tmp_path / name, description_change(change))
        result = verify_command(folder)
        assert result.returncode == 2 and result.stdout == "", name
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, name
        assert match in result.stderr, (name, result.stderr)
        for load in READERS.values():
            with pytest.raises(ExportError, match=re.escape(match)):
                load(folder)


def test_the_jax_only_reader_checks_every_file_of_the_folder(export, tmp_path):
    folder = copy_of(export, tmp_path / "unlisted")
    (folder / "notes.txt").write_text("not part of the export\n")
    refused(standalone.load, folder, "not in the export's jaxenc_manifest.json",
            folder / "notes.txt")
    folder = copy_of(export, tmp_path / "flipped")
    orbax_file = next(path for path in sorted((folder / "params").rglob("*")) if path.is_file())
    data = bytearray(orbax_file.read_bytes())
    data[len(data) // 2] ^= 1
    orbax_file.write_bytes(bytes(data))
    refused(standalone.load, folder, "export file is damaged", orbax_file)


# ----------------------------------------------------------------------------- writing


class Killed(BaseException):
    """What a process killed at this point would leave: nothing after it runs."""


def renamed_variant(export: Path, folder: Path) -> Path:
    """A whole export with another digest than `export`: another name in format.json."""
    return resealed(export, folder, description_change(
        lambda d: d["source"].update(name="another")))


@pytest.mark.parametrize("step", ["rename aside", "rename into place", "remove aside", "none"])
def test_an_overwrite_killed_at_any_step_leaves_a_whole_export(export, tmp_path, monkeypatch,
                                                              caplog, step):
    out = copy_of(export, tmp_path / "out")
    partial = renamed_variant(export, tmp_path / ".out.partial")
    old, new = export_checks.verify(out).sha256, export_checks.verify(partial).sha256
    renames, rename, rmtree = [], os.rename, shutil.rmtree

    def killed_rename(source, target):
        renames.append(source)
        if step == ["rename aside", "rename into place"][min(len(renames), 2) - 1]:
            raise Killed
        rename(source, target)

    def killed_rmtree(path, *args, **kwargs):
        if step == "remove aside":
            os.remove(Path(path) / "params.npz")
            os.remove(Path(path) / "vocab.txt")
            raise Killed
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr(os, "rename", killed_rename)
    monkeypatch.setattr(shutil, "rmtree", killed_rmtree)
    if step == "none":
        exporting._replace(partial, out)
    else:
        with pytest.raises(Killed):
            exporting._replace(partial, out)
    monkeypatch.undo()
    with caplog.at_level(logging.WARNING, logger="jaxenc.exporting"):
        encoder = jaxenc.load(out)
    assert np.isfinite(encoder.encode(["what is this ?"])).all()
    expected = {"rename aside": old, "rename into place": old}.get(step, new)
    assert export_checks.verify(out).sha256 == expected
    notes = [record.getMessage() for record in caplog.records]
    assert len(notes) == (step in ("rename into place", "remove aside"))
    assert all(len(note.splitlines()) == 1 for note in notes)
    if step == "rename into place":
        assert notes[0].startswith(f"restored the export {out} from ")
    if step == "remove aside":
        assert notes[0].startswith("removed ") and "its removal was stopped" in notes[0]
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        ["out"] + ([".out.partial"] if step in ("rename aside", "rename into place") else []))


def test_export_overwrite_replaces_the_export_whole(export, tmp_path, capsys):
    out = renamed_variant(export, tmp_path / "out")
    before = export_checks.verify(out).sha256
    jaxenc.export(export.parent / "bag", out, batch_size=BATCH, platforms=("cpu",),
                  overwrite=True)
    assert export_checks.verify(out).sha256 != before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]


def failed_export(export: Path, out: Path, capsys) -> str:
    """The one line `python -m jaxenc export` prints when it cannot write `out`."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        exporting.main([str(export.parent / "bag"), str(out), "--batch_size", str(BATCH),
                        "--platforms", "cpu", "--overwrite"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("error: cannot write ") and error.count("\n") == 1, error
    return error


def test_a_full_disk_is_one_line_and_keeps_the_export_there(export, tmp_path, monkeypatch,
                                                           capsys):
    out = copy_of(export, tmp_path / "out")
    digest = export_checks.verify(out).sha256

    def full(file, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(file))

    monkeypatch.setattr(exporting.np, "savez", full)
    error = failed_export(export, out, capsys)
    assert "No space left on device" in error and f"{out} holds a whole export" in error
    assert "free disk space there" in error
    assert export_checks.verify(out).sha256 == digest
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]  # no partial folder


def test_a_read_only_folder_is_one_line(export, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "read_only"
    folder.mkdir()
    if os.geteuid() != 0:  # root writes into a read-only folder: the refusal is simulated
        folder.chmod(0o555)
    else:
        mkdir = os.mkdir

        def refused_mkdir(path, *args, **kwargs):
            if Path(path).parent == folder:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
            mkdir(path, *args, **kwargs)

        monkeypatch.setattr(os, "mkdir", refused_mkdir)
    try:
        error = failed_export(export, folder / "out", capsys)
    finally:
        folder.chmod(0o755)
    assert "nothing written" in error and "writable" in error
    assert list(folder.iterdir()) == []


def test_a_bad_load_argument_stays_a_config_error_about_the_argument(export):
    with pytest.raises(ConfigError, match="long_sentences='bogus'") as error:
        jaxenc.load(export, long_sentences="bogus")
    assert not isinstance(error.value, ExportError)
