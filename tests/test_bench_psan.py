"""PSAN's memory benchmark (python -m bench.bench_psan): its reports' ratios against hand-computed
ones, the Table 5 report read back the way reports.performance reads it, and one tiny
compile-mode run; never its timings."""

import argparse

from bench import bench_psan
from reports.run_files import read_rows

ROWS = [  # label, temp / peak MiB, step seconds: every model of the Table 5 report
    dict(label="PSAN packed", temp_mib=30.0, peak_mib=150.0, step_s=0.02),
    dict(label="PSAN dense", temp_mib=90.0, peak_mib=250.0, step_s=0.01),
    dict(label="DiSAN dense", temp_mib=80.0, peak_mib=125.0, step_s=0.03),
    dict(label="Transformer", temp_mib=10.0, peak_mib=50.0, step_s=0.004),
]


def test_table5_report_gives_each_peak_over_disan_dense_and_the_transformer(tmp_path):
    args = argparse.Namespace(bucket=24, batch=64, repeats=3)
    out = tmp_path / "table5_memory_24.md"
    out.write_text(bench_psan.table5_report(ROWS, 0.25, args), encoding="utf-8")
    rows = {row["model"]: row for row in read_rows(out)}
    assert list(rows) == [row["label"] for row in ROWS]
    expected = {"PSAN packed": ("1.20x", "3.00x"), "PSAN dense": ("2.00x", "5.00x"),
                "DiSAN dense": ("1.00x", "2.50x"), "Transformer": ("0.40x", "1.00x")}
    for label, (over_disan, over_transformer) in expected.items():
        assert (rows[label]["/ DiSAN dense"], rows[label]["/ Transformer"]) == (
            over_disan, over_transformer), label
    assert rows["PSAN packed"]["peak MiB"] == "150.0" and rows["PSAN dense"]["step ms"] == "10.0"
    text = out.read_text(encoding="utf-8")
    assert "--bucket 24 --batch 64 --repeats 3" in text and "sum_p l_p^2 / 2 L^2): 0.250" in text


def test_compile_mode_reports_each_form_against_the_dense_one(tmp_path):
    out = tmp_path / "compile.md"
    bench_psan.main(["--mode", "compile", "--lengths", "8", "--batch", "2", "--rounds", "1",
                     "--variants", "dense", "packed", "--out", str(out)])
    lines = out.read_text(encoding="utf-8").splitlines()
    header, dense, packed = [line.strip("| ").split(" | ") for line in lines
                             if line.startswith("| ")]
    assert header == ["L", "form", "compile s", "/ dense", "peak MiB", "/ dense", "temp MiB",
                      "plan arrays"]
    assert (dense[0], dense[1], packed[1]) == ("8", "dense", "packed")
    assert (dense[3], dense[5], dense[7]) == ("1.00x", "1.00x", "-")
    assert int(packed[7]) > 0 and float(packed[3].rstrip("x")) > 0  # a packing plan; compiled
    peak, dense_peak = float(packed[4].replace(",", "")), float(dense[4].replace(",", ""))
    assert dense_peak > 0
    assert abs(float(packed[5].rstrip("x")) - peak / dense_peak) < 0.01 + 0.5 / dense_peak
