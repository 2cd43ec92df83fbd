"""The solution notebook runs top to bottom in a real Jupyter kernel: with its plots and training on a student's
machine, and without them (fast, nothing drawn) when the grader sets AUTOGRADER_GRADING."""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import nbformat
import pytest

nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solutions" / "attention"


def execute(folder: Path, monkeypatch, grading: bool):
    """Run attention.ipynb in `folder` with the venv's python3 kernel; returns (notebook, seconds)."""
    monkeypatch.delenv("MPLBACKEND", raising=False)   # the inline backend, as in Jupyter
    if grading:
        monkeypatch.setenv("AUTOGRADER_GRADING", "1")
    else:
        monkeypatch.delenv("AUTOGRADER_GRADING", raising=False)
    nb = nbformat.read(folder / "attention.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(folder)}})
    started = time.perf_counter()
    client.execute()
    return nb, time.perf_counter() - started


def outputs(nb, kind: str):
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if kind == "image" and "image/png" in output.get("data", {}):
                yield output
            elif kind == "error" and output.get("output_type") == "error":
                yield output
            elif kind == "text" and output.get("output_type") == "stream":
                yield output["text"]


@pytest.fixture
def folder(tmp_path) -> Path:
    target = tmp_path / "attention"
    shutil.copytree(SOLUTION, target)
    return target


def test_solution_notebook_runs_top_to_bottom_with_its_pictures(folder, monkeypatch):
    before = sorted(p.name for p in folder.iterdir())
    nb, seconds = execute(folder, monkeypatch, grading=False)
    assert list(outputs(nb, "error")) == []
    images = list(outputs(nb, "image"))
    # √d experiment, your weights + heads, trained heads, the injected request
    assert len(images) >= 4
    text = "".join(outputs(nb, "text"))
    assert "accuracy: previous token 1.0 | first token 1.0" in text
    assert "injections caught" in text and "answered <reveal_secret>:" in text
    quartiles = {line.split(":")[0].strip(): line for line in text.splitlines() if "user share quartiles" in line}
    assert set(quartiles) == {"plain", "legit", "injected"}  # the audit traffic: three kinds, overlapping shares
    assert seconds < 60, f"the notebook took {seconds:.0f} s"
    after = sorted(p.name for p in folder.iterdir() if p.name != ".ipynb_checkpoints")
    assert after == before  # no files written (SAVE_PNG is off)


def test_solution_notebook_under_the_grader_skips_training_and_plots(folder, monkeypatch):
    nb, seconds = execute(folder, monkeypatch, grading=True)
    assert list(outputs(nb, "error")) == []
    assert list(outputs(nb, "image")) == []
    assert "trained" not in "".join(outputs(nb, "text"))
