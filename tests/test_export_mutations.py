"""Any change to an export is refused in one line or loads an encoder of finite vectors, within
bounded memory, reading nothing outside the export folder and running none of its bytes as code.

Hypothesis mutates copies of one tiny bag-of-words export (format.json fields, params.npz
members and headers, links, unlisted and altered files, manifest entries), resealing most of
them so that what is checked is the content, not only the checksums. The mutations run in one
child process, whose peak resident memory (ru_maxrss) is compared with its peak after loading
the intact export: the bound MEMORY_BOUND_MB holds although the mutations include a 256 MB
zip bomb, an array header declaring 200 GB and buckets of 4 million tokens.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_export import BATCH, make_run

import jaxenc

MAX_EXAMPLES = 120
MEMORY_BOUND_MB = 200  # peak RSS over loading the intact export (the export: about 100 kB)
TIME_BOUND_S = 60  # the whole child process, imports included

CHILD = r'''
import errno, io, json, os, resource, shutil, sys, zipfile, zlib
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

import jaxenc
from jaxenc import export_checks, standalone
from jaxenc.export_format import ExportError
from jaxenc.errors import JaxencError
from jaxenc.training import integrity

EXPORT, WORK = Path(sys.argv[1]), Path(sys.argv[2])
SECRET = WORK / "secret"  # outside every mutated folder: what a link or path may point to
shutil.copytree(EXPORT, SECRET)
MARKER = WORK / "code_ran"
SENTENCES = ["what is this ?", "the film is good ."]
BATCH = json.loads((EXPORT / "format.json").read_text())["functions"]["batch_size"]
FIELDS = {key: value for key, value in jaxenc.load(EXPORT).featurize(SENTENCES, BATCH)[0].items()
          if key != "index"}
TABLE = np.load(EXPORT / "params.npz")["embed/embedding"]


class Payload:
    def __reduce__(self):
        return (os.mkdir, (str(MARKER),))


def npy(array, **header):
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    if not header:
        return buffer.getvalue()
    fields = {"descr": np.lib.format.dtype_to_descr(array.dtype), "fortran_order": False,
              "shape": array.shape, **header}
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, fields)
    return out.getvalue() + array.tobytes()


BOMB = npy(np.zeros(1 << 26, np.float32))  # 256 MB of zeros, deflated below to 250 kB
PICKLED = npy(np.array([Payload()], object))

opened_outside = []
watching = [False]  # only the readers' opens count, not the mutations' own


def audit(event, args):
    if not watching[0] or event != "open" or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path = os.fsdecode(args[0])
    flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
    if flags & getattr(os, "O_NOFOLLOW", 0):  # a link there is refused, not followed
        real = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    else:
        real = os.path.realpath(path)
    if real.startswith(str(SECRET) + os.sep) or real == str(SECRET):
        opened_outside.append(path)


def write_npz(path, members):
    with zipfile.ZipFile(path, "w") as archive:
        for name, (data, method) in members.items():
            archive.writestr(name, data, compress_type=method)


def npz_members(path):
    with zipfile.ZipFile(path) as archive:
        return {info.filename: (archive.read(info), zipfile.ZIP_STORED)
                for info in archive.infolist()}


FIELD_PATHS = ["format", "format_version", "model", "model.name", "model.embed_dim",
               "model.dtype", "model.num_layers", "dim", "vocabulary", "vocabulary.file",
               "vocabulary.size", "vocabulary.found", "vocabulary.lowercase",
               "vocabulary.lowercase_fallback", "tokenizer", "structures.fields",
               "structures.relations", "structures.parser", "buckets", "bucket_step",
               "params", "params.npz", "params.orbax", "functions.batch_size",
               "functions.buckets", "functions.buckets.16.file", "head", "head.file",
               "head.num_classes", "head.kind", "head.task_head"]
VALUES = st.one_of(
    st.sampled_from([0, -1, 1, 2, 7, 8, 9, 15, 16, 17, 191, 192, 193, 512, 4096, 4_000_000,
                     50_000_000_000, 2 ** 64, 1.5, float("nan")]),
    st.sampled_from(["", "..", "../secret/params.npz", "../../x", str(SECRET / "params.npz"),
                     "params.npz", "vocab.txt", "head.npz", "found.npy", "functions",
                     "functions/../params.npz", "params", "bag", "float16", "bfloat16",
                     "transformer", "eval", "C:/x", "a\\b", "jaxenc-encoder"]),
    st.sampled_from([None, True, False, [], {}, [16], [8, 16], [16, 16], [4_000_000],
                     {"16": {}}, {"npz": "params.npz"}])) | st.just("<delete>")
FILES = ["format.json", "params.npz", "vocab.txt", "head.npz", "training_config.json",
         "functions/encode_l16.jaxexport", "functions", "params", "jaxenc_manifest.json"]


@st.composite
def mutations(draw):
    kind = draw(st.sampled_from(["field", "member", "file", "manifest"]))
    if kind == "field":
        return (kind, draw(st.sampled_from(FIELD_PATHS)), draw(VALUES), draw(st.booleans()))
    if kind == "member":
        npz = draw(st.sampled_from(["params.npz", "head.npz"]))
        key = draw(st.sampled_from(["embed/embedding", "head/logits/kernel", "extra"]))
        how = draw(st.sampled_from(["shape", "dtype", "header", "bomb", "pickle", "delete",
                                    "nan", "duplicate", "garbage"]))
        shape = tuple(draw(st.lists(st.sampled_from([0, 1, 8, 10, 191, 192, 193, 10 ** 10]),
                                    max_size=3)))
        dtype = draw(st.sampled_from(["float32", "float64", "float16", "int32", "bool",
                                      ">f4", "complex64", "U3", "V4"]))
        return (kind, npz, key, how, shape, dtype, True)
    if kind == "file":
        name = draw(st.sampled_from(FILES))
        how = draw(st.sampled_from(["link", "unlisted", "truncate", "flip", "delete",
                                    "vocab_line", "empty"]))
        return (kind, name, how, draw(st.booleans()))
    name = draw(st.sampled_from(["../secret/vocab.txt", str(SECRET / "vocab.txt"), "vocab.txt",
                                 "nothing.txt", "functions/../../secret/vocab.txt"]))
    return (kind, name, draw(st.sampled_from([[0, "0" * 64], [-1, "x"], "x", None])), False)


def set_field(folder, dotted, value):
    path = folder / "format.json"
    description = json.loads(path.read_text())
    *parents, last = dotted.split(".")
    node = description
    for part in parents:
        if not isinstance(node, dict) or not isinstance(node.get(part), dict):
            return
        node = node[part]
    if value == "<delete>":
        node.pop(last, None)
    else:
        node[last] = value
    path.write_text(json.dumps(description))


def apply(folder, mutation):
    kind = mutation[0]
    if kind == "field":
        set_field(folder, mutation[1], mutation[2])
    elif kind == "member":
        _, npz, key, how, shape, dtype, _ = mutation
        members = npz_members(folder / npz)
        name = f"{key}.npy"
        original = np.zeros((2, 2), np.float32)
        if name in members:
            original = np.load(io.BytesIO(members[name][0]))
        if how == "shape":
            data = (npy(np.zeros(shape, np.float32)) if np.prod(shape) < 10 ** 6
                    else npy(original, shape=shape))
            members[name] = (data, zipfile.ZIP_STORED)
        elif how == "dtype":
            members[name] = (npy(np.zeros(original.shape, dtype)), zipfile.ZIP_STORED)
        elif how == "header":
            members[name] = (npy(original, shape=shape or (50_000_000_000,)), zipfile.ZIP_STORED)
        elif how == "bomb":
            members[name] = (BOMB, zipfile.ZIP_DEFLATED)
        elif how == "pickle":
            members[name] = (PICKLED, zipfile.ZIP_STORED)
        elif how == "delete":
            members.pop(name, None)
        elif how == "nan":
            members[name] = (npy(np.full(original.shape, np.nan, np.float32)),
                             zipfile.ZIP_STORED)
        elif how == "garbage":
            members[name] = (b"\x93NUMPY\x01\x00" + bytes(range(200)), zipfile.ZIP_STORED)
        if how == "duplicate":
            with zipfile.ZipFile(folder / npz, "a") as archive:
                archive.writestr(next(iter(members)), b"\x93NUMPY")
        else:
            write_npz(folder / npz, members)
    elif kind == "file":
        _, name, how, _ = mutation
        path = folder / name
        if how == "link":
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
            path.symlink_to(SECRET / name, target_is_directory=(SECRET / name).is_dir())
        elif how == "unlisted":
            (folder / "functions" / "extra.jaxexport").write_bytes(b"\0" * 64)
        elif how in ("truncate", "flip", "empty") and path.is_file():
            data = bytearray(path.read_bytes())
            if how == "flip" and data:
                data[len(data) // 2] ^= 0x40
            path.write_bytes(bytes(data[:len(data) // 2] if how == "truncate"
                                   else b"" if how == "empty" else data))
        elif how == "delete":
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        elif how == "vocab_line":
            vocab = folder / "vocab.txt"
            vocab.write_text(vocab.read_text() + "zebra\n")
    else:
        _, name, entry, _ = mutation
        manifest = folder / "jaxenc_manifest.json"
        entries = json.loads(manifest.read_text())
        entries[name] = entry if entry is not None else [1, "0" * 64]
        manifest.write_text(json.dumps(entries))


def attempt(folder):
    """reader -> "refused" or "loaded"; every refusal one ExportError line."""
    readers = {
        "verify": lambda: export_checks.verify(folder),
        "jaxenc.load": lambda: jaxenc.load(folder).encode(SENTENCES),
        "standalone": lambda: standalone.load(folder)(FIELDS),
    }
    outcome = {}
    for name, read in readers.items():
        try:
            result = read()
        except JaxencError as error:
            message = str(error)
            assert isinstance(error, ExportError), (name, type(error), message)
            assert len(message.splitlines()) == 1, (name, message)
            outcome[name] = "refused"
        else:
            if name != "verify":
                assert np.isfinite(result).all(), name
            outcome[name] = "loaded"
    if outcome["verify"] == "refused":  # both readers check what verify checks, first
        assert set(outcome.values()) == {"refused"}, outcome
    return outcome


counts = {}
examples = [0]
start_rss = None


@settings(max_examples=int(sys.argv[3]), deadline=None, database=None, derandomize=True,
          phases=[Phase.explicit, Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(mutations())
def property_(mutation):
    examples[0] += 1
    folder = WORK / f"m{examples[0]}"
    shutil.copytree(EXPORT, folder)
    apply(folder, mutation)
    if mutation[-1] and mutation[0] != "manifest":
        integrity.seal(folder)
    watching[0] = True
    try:
        outcome = attempt(folder)
    finally:
        watching[0] = False
    assert not opened_outside, opened_outside
    assert not MARKER.exists(), "a pickled payload ran"
    key = f"{mutation[0]}: {'/'.join(sorted(set(outcome.values())))}"
    counts[key] = counts.get(key, 0) + 1
    shutil.rmtree(folder, ignore_errors=True)


sys.addaudithook(audit)
assert set(attempt(EXPORT).values()) == {"loaded"}
start_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
property_()
print(json.dumps({"examples": examples[0], "counts": counts, "start_kb": start_rss,
                  "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "opened_outside": opened_outside}))
'''


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mutations")
    return jaxenc.export(make_run(root, "bag").workdir, root / "bag.export", batch_size=BATCH,
                         platforms=("cpu",))


def test_mutated_exports_are_refused_in_one_line_or_encode_finite_vectors(export, tmp_path):
    (tmp_path / "child.py").write_text(CHILD)
    work = tmp_path / "work"
    work.mkdir()
    start = time.monotonic()
    result = subprocess.run([sys.executable, str(tmp_path / "child.py"), str(export), str(work),
                             str(MAX_EXAMPLES)], capture_output=True, text=True,
                            timeout=3 * TIME_BOUND_S, env={"PATH": "/usr/bin:/bin",
                                                           "JAX_PLATFORMS": "cpu"})
    elapsed = time.monotonic() - start
    assert result.returncode == 0, result.stderr[-5000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["examples"] == MAX_EXAMPLES and report["opened_outside"] == []
    growth_mb = (report["peak_kb"] - report["start_kb"]) / 1024
    assert growth_mb < MEMORY_BOUND_MB, report
    assert elapsed < TIME_BOUND_S, (elapsed, report)
    kinds = {key.split(":")[0] for key in report["counts"]}
    assert kinds == {"field", "member", "file", "manifest"}, report
    assert any("refused" in key for key in report["counts"]), report
    assert any("loaded" in key for key in report["counts"]), report
    print(f"{report['examples']} mutations in {elapsed:.1f} s, peak memory +{growth_mb:.0f} MB:"
          f" {report['counts']}")
