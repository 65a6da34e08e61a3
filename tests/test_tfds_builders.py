"""TFDS builders: array_record files that read back as the readers' records; fail-fast downloads."""

import functools
import http.server
import shutil
import threading
import time
import zipfile

import numpy as np
import pytest
import tensorflow_datasets as tfds

from jaxenc.data import registry, synthetic
from jaxenc.data import tfds_builders as jtfds
from jaxenc.errors import DataError
from jaxenc.records import Example, Sentence


def read_back(name: str, data_dir) -> dict[str, list[dict]]:
    """Every record of every split, through the public TFDS entry point."""
    sources = tfds.data_source(name, data_dir=str(data_dir), download=False)
    return {split: [source[i] for i in range(len(source))] for split, source in sources.items()}


def depths_and_arcs(example: Example) -> dict[str, np.ndarray]:
    """A structure_fn: depth of each token in its dependency tree, and (token, head) pairs."""
    heads = example.sentences[0].heads
    depths = []
    for token in range(1, len(heads) + 1):
        depth, node = 0, token
        while node != 0:
            node, depth = heads[node - 1], depth + 1
        depths.append(depth)
    arcs = [(token, head) for token, head in enumerate(heads, start=1)]
    return {"sentence/depths": np.array(depths, np.int32),
            "sentence/arcs": np.array(arcs, np.int32).reshape(-1, 2)}


DEPTHS_AND_ARCS_SPEC = {"sentence/depths": (np.int32, 1), "sentence/arcs": (np.int32, 2)}


@pytest.fixture
def no_env_data_dir(monkeypatch):
    monkeypatch.delenv("JAXENC_DATA_DIR", raising=False)


@pytest.fixture
def file_server(tmp_path):
    """An HTTP server on 127.0.0.1 serving tmp_path/"served"; yields its base URL."""
    served = tmp_path / "served"
    served.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield served, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_every_registry_dataset_has_a_registered_builder():
    # but "files", whose splits are a training config's own files
    assert set(jtfds.BUILDERS) == set(registry.DATASETS) - {"files"}
    for name, builder_class in jtfds.BUILDERS.items():
        assert builder_class.name == f"jaxenc_{name}"
        assert tfds.builder_cls(f"jaxenc_{name}") is builder_class


@pytest.mark.parametrize("dataset, example", [
    ("sick_e", Example(sentences=(Sentence(("A", "dog"), "A dog"), Sentence(("It",), "It")),
                       label=2, uid="SICK_train.txt:2")),
    ("sick_r", Example(sentences=(Sentence(("a",), "a"), Sentence(("b",), "b")), score=3.6,
                       uid="x:1")),
    ("multi30k", Example(sentences=(Sentence(("ein", "Hund"), "ein Hund"),),
                         target=Sentence(("a", "dog"), "a dog"), uid="train.de:7")),
    ("ud_ewt", Example(sentences=(Sentence(("I", "ran"), "I ran", tree="(S (NP I) (VP ran))",
                                           heads=(2, 0), deprels=("nsubj", "root"),
                                           tags=("PRP", "VBD")),), uid="en.conllu#3")),
    ("trec", Example(sentences=(Sentence(("Où", "?"), "Où ?", binary_tree="( Où ?)"),),
                       label=0, fine_label=4, uid="TREC.test:9")),
])
def test_record_encoding_round_trips_through_the_tfds_features(dataset, example, tmp_path):
    features = jtfds.BUILDERS[dataset](data_dir=str(tmp_path)).info.features
    record = jtfds.encode_example(example, registry.DATASETS[dataset].kind)
    assert jtfds.to_example(features.deserialize_example_np(features.serialize_example(record))) \
        == example


def test_record_encoding_rejects_wrong_roles():
    example = Example(sentences=(Sentence(("a",), "a"),), label=1, uid="f.txt:3")
    with pytest.raises(DataError, match=r"f.txt:3: 1 sentences where a pair dataset has 2"):
        jtfds.encode_example(example, "pair")


def test_trec_from_manual_dir_reads_back_as_the_reader_records(data_root, tmp_path,
                                                               no_env_data_dir):
    jtfds.prepare("trec", tmp_path / "tfds", manual_dir=data_root)
    records = read_back("jaxenc_trec", tmp_path / "tfds")
    assert sorted(records) == ["test", "train"]
    for split in ("train", "test"):
        expected = registry.load("trec", split, data_root)
        assert len(records[split]) == len(expected) == {"train": 5452, "test": 500}[split]
        assert [jtfds.to_example(record) for record in records[split]] == expected


def test_synthetic_with_structure_arrays(tmp_path):
    config = jtfds.StructureConfig(name="depths", structure_fn=depths_and_arcs,
                                   structure_spec=DEPTHS_AND_ARCS_SPEC)
    jtfds.prepare("synthetic", tmp_path, config=config)
    records = read_back("jaxenc_synthetic/depths", tmp_path)
    for split, size in synthetic.SPLIT_SIZES.items():
        expected = synthetic.generate_split(split)
        assert len(records[split]) == len(expected) == size
        for record, example in zip(records[split], expected, strict=True):
            assert jtfds.to_example(record) == example
            structures = jtfds.structures_of(record)
            assert structures.keys() == DEPTHS_AND_ARCS_SPEC.keys()
            for field, array in depths_and_arcs(example).items():
                np.testing.assert_array_equal(structures[field], array)
                assert structures[field].dtype == np.int32


def test_structure_fn_that_breaks_its_spec_is_reported(tmp_path):
    config = jtfds.StructureConfig(name="bad", structure_fn=depths_and_arcs,
                                   structure_spec={**DEPTHS_AND_ARCS_SPEC,
                                                   "sentence/arcs": (np.int64, 2)})
    with pytest.raises(DataError, match=r"synthetic:train:0: structure field 'sentence/arcs' is "
                                        r"int32.*declared int64"):
        jtfds.prepare("synthetic", tmp_path, config=config)


def test_download_fails_fast_offline_and_names_the_fix(tmp_path, monkeypatch, no_env_data_dir):
    unreachable = {name: jtfds.RemoteFile(f"http://127.0.0.1:9/{name}")
                   for name in ("TREC.train", "TREC.test")}
    monkeypatch.setitem(jtfds.DOWNLOADS, "trec", unreachable)
    start = time.monotonic()
    with pytest.raises(DataError, match=r"http://127.0.0.1:9/TREC\.\w+ is unreachable") as error:
        jtfds.prepare("trec", tmp_path)
    assert time.monotonic() - start < 15
    assert "manual_dir" in str(error.value) and "trec" in str(error.value)
    assert "\n" not in str(error.value)


def test_dataset_without_download_source_names_the_fix(tmp_path, no_env_data_dir):
    with pytest.raises(DataError, match=r"'sts12' has no download source.*manual_dir"):
        jtfds.prepare("sts12", tmp_path)


def test_download_of_plain_files_and_archive_members(data_root, tmp_path, monkeypatch, file_server,
                                                     no_env_data_dir):
    served, base_url = file_server
    shutil.copyfile(data_root / "trec" / "TREC.test", served / "TREC.test")
    with zipfile.ZipFile(served / "trec.zip", "w") as archive:
        archive.write(data_root / "trec" / "TREC.train", "inner/TREC.train")
    monkeypatch.setitem(jtfds.DOWNLOADS, "trec", {
        "TREC.test": jtfds.RemoteFile(f"{base_url}/TREC.test"),
        "TREC.train": jtfds.RemoteFile(f"{base_url}/trec.zip", member="inner/TREC.train"),
    })
    jtfds.prepare("trec", tmp_path / "tfds")
    records = read_back("jaxenc_trec", tmp_path / "tfds")
    for split in ("train", "test"):
        assert [jtfds.to_example(r) for r in records[split]] == registry.load("trec", split,
                                                                               data_root)


def test_failed_download_is_a_data_error_with_the_fix(tmp_path, monkeypatch, file_server,
                                                      no_env_data_dir):
    _, base_url = file_server
    monkeypatch.setitem(jtfds.DOWNLOADS, "trec", {
        "TREC.train": jtfds.RemoteFile(f"{base_url}/missing/TREC.train")})
    with pytest.raises(DataError, match=r"cannot download dataset 'trec': .*404.*manual_dir"):
        jtfds.prepare("trec", tmp_path / "tfds")


def test_training_reads_a_dataset_through_tfds(data_root, tmp_path):
    """config.data.tfds_dir: the harness's splits equal the ones read from the files directly."""
    from jaxenc.training.input_pipeline import load_splits
    from train.configs import base

    config = base.get_config("bag,trec")
    config.data.data_dir = str(data_root)
    direct = load_splits(config)
    config.data.tfds_dir = str(tmp_path / "tfds")
    through_tfds = load_splits(config)
    assert {name: len(split) for name, split in through_tfds.items()} == {
        name: len(split) for name, split in direct.items()}
    assert through_tfds == direct
    assert (tmp_path / "tfds" / jtfds.tfds_name("trec")).is_dir()
