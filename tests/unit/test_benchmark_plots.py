"""benchmarks/plots.py draws PNGs from the suites' JSON; what it cannot draw it says."""

from __future__ import annotations

import json
import struct

import pytest

from benchmarks import plots

pytestmark = pytest.mark.unit
PNG = b"\x89PNG\r\n\x1a\n"


def _mode(ndcg: float, p50: float) -> dict[str, float]:
    return {"nDCG@10": ndcg, "recall@10": ndcg + 0.1, "p50_ms": p50, "p95_ms": p50 * 2, "vector_calls_mean": 1.0}


QUALITY = {
    "suite": "quality",
    "cranfield": {"queries": 225, "bm25": {"nDCG@10": 0.35}, "quick_dense": _mode(0.36, 3.0),
                  "thinking_hybrid": _mode(0.41, 40.0), "noise": {"floor": 0.3}, "best_mode": "thinking_hybrid"},
    "scifact": {"queries": 300, "bm25": {"nDCG@10": 0.66}, "quick_hybrid": _mode(0.73, 5.0)},
    "wall_seconds": 12.0,
}


def test_quality_is_drawn_as_one_png_per_run_with_a_panel_per_collection(tmp_path):
    assert set(plots.quality_modes(QUALITY["cranfield"])) == {"quick_dense", "thinking_hybrid"}
    (tmp_path / "quality.json").write_text(json.dumps(QUALITY))
    plots.main(["quality", "--results", str(tmp_path), "--out", str(tmp_path / "png")])
    png = (tmp_path / "png" / "quality.png").read_bytes()
    assert png.startswith(PNG)
    width, height = struct.unpack(">II", png[16:24])
    assert width > 1.8 * height  # two collections: two panels side by side


def test_a_result_without_modes_is_refused_with_what_to_run(tmp_path):
    with pytest.raises(ValueError, match="run the quality suite first"):
        plots.quality_figure({"suite": "quality", "wall_seconds": 1}, tmp_path / "q.png")
    with pytest.raises(SystemExit, match="run `python -m benchmarks.run scale` first"):
        plots.main(["scale", "--results", str(tmp_path)])


def test_curves_skip_non_finite_points_and_write_a_png(tmp_path):
    out = plots.curves({"local": [(1e3, 1.0), (1e4, 2.0), (1e5, float("nan"))], "opensearch": [(1e3, 5.0)]},
                       tmp_path / "scale.png", title="latency by size", xlabel="records", ylabel="p50 ms", logx=True)
    assert out.read_bytes().startswith(PNG)


def _drawn(tmp_path, name: str, values: list[float]) -> None:
    plots.curves({"1 worker": [(c, v) for c, v in zip((1, 4, 16, 64), values)]}, tmp_path / name,
                 title="throughput", xlabel="clients", ylabel="queries/s")


def test_every_picture_records_what_it_drew(tmp_path):
    _drawn(tmp_path, "qps.png", [40.7, 100.1, 95.0, 95.7])
    record = json.loads((tmp_path / "qps.json").read_text())
    assert record["png"] == "qps.png" and record["series"]["1 worker"] == [[1, 40.7], [4, 100.1], [16, 95.0], [64, 95.7]]


def test_check_refuses_a_picture_under_the_table_of_another_run(tmp_path):
    _drawn(tmp_path, "idle.png", [40.7, 100.1, 95.0, 95.7])
    _drawn(tmp_path, "loaded.png", [3.6, 9.0, 10.6, 10.9])
    idle = "| configuration | 1 | 4 | 16 | 64 |\n|---|---|---|---|---|\n| 1 worker | 40.7 (21.6 / 105) | 100.1 | 95.0 | 95.7 |\n"
    loaded = "| configuration | 1 | 4 | 16 | 64 |\n|---|---|---|---|---|\n| 1 worker | 3.6 (194 / 1,033) | 9.0 | 10.6 | 10.9 |\n"
    readme = tmp_path / "README.md"
    readme.write_text(f"# Loaded\n\n{loaded}\n![qps](plots/idle.png)\n\n# Idle\n\n{idle}\n![qps](plots/idle.png)\n")
    problems = plots.check(readme, tmp_path)
    assert len(problems) == 1 and problems[0].startswith("README.md:7: plots/idle.png drew 4 of 4 values")
    assert "a picture of another run" in problems[0]
    readme.write_text(f"# Loaded\n\n{loaded}\n![qps](plots/loaded.png)\n\n# Idle\n\n{idle}\n![qps](plots/idle.png)\n"
                      "\n![never recorded](plots/old.png)\n")
    problems = plots.check(readme, tmp_path)
    assert problems == ["README.md:17: plots/old.png has no old.json: it was drawn before plots recorded their values; "
                        "draw it again from the run of the table above it"]
    with pytest.raises(SystemExit, match="1 picture"):
        plots.main(["--check", str(readme), "--out", str(tmp_path)])


def test_check_tells_the_quality_picture_of_a_loaded_run_by_its_latencies(tmp_path):
    """nDCG@10 hardly moves between an idle and a loaded run; the latencies do, so they are checked too."""
    one = {"suite": "quality", "cranfield": {"queries": 225, "bm25": {"nDCG@10": 0.325},
                                             "quick_dense": _mode(0.353, 7.9), "thinking_hybrid": _mode(0.397, 51.7)}}
    (tmp_path / "quality.json").write_text(json.dumps(one))
    plots.main(["quality", "--results", str(tmp_path), "--out", str(tmp_path)])
    table = ("| mode | nDCG@10 | p50 ms | p95 ms |\n|---|---|---|---|\n| quick dense | 0.353 | 7.9 | 15.8 |\n"
             "| thinking hybrid | 0.397 | {p50} | 103.4 |\n\nBM25: 0.325\n")
    readme = tmp_path / "README.md"
    readme.write_text("# Quality\n\n" + table.format(p50="51.7") + "\n![quality](plots/quality.png)\n")
    assert plots.check(readme, tmp_path) == []
    readme.write_text("# Quality\n\n" + table.format(p50="201") + "\n![quality](plots/quality.png)\n")
    (problem,) = plots.check(readme, tmp_path)
    assert "drew 1 of" in problem and "thinking_hybrid 51.7" in problem
