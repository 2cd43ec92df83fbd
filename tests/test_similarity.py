"""Similarity across a class (copydetect's winnowing, the released stub as boilerplate): a renamed copy stands out
against the class, independent work does not, the scores are the same in every process, and nothing changes a
score."""
from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

from autograder.assignments import get
from autograder.classroom.similarity import graded_source, similar_pairs
from autograder.engine.resolve import resolve

DEMO = ROOT / "examples" / "attention_class"
SPEC = get("attention")
STUB = graded_source(ROOT / "student_template" / "attention" / "attention.py", SPEC.functions)


def class_sources(folder: Path) -> dict[str, str]:
    out = {}
    for student in sorted(p for p in folder.iterdir() if p.is_dir()):
        found = resolve(student, SPEC.submission_files, "attention")
        if found.path is not None:
            out[student.name] = graded_source(found.path, SPEC.functions)
    return out


def renamed_copy(text: str) -> str:
    """What a copier does to hide it: other names, other comments, other spacing."""
    for old, new in (("weights", "attn_probs"), ("scores", "logits"), ("d_head", "head_dim"), ("mask", "future")):
        text = re.sub(rf"\b{old}\b", new, text)
    return re.sub(r"#.*", "# my own work", text).replace(" = ", "  =  ")


def test_a_renamed_copy_stands_out_and_independent_work_does_not(tmp_path):
    assert similar_pairs(class_sources(DEMO), STUB)["pairs"] == []
    cls = tmp_path / "cls"
    shutil.copytree(DEMO, cls)
    source = (cls / "s05_maria_garcia" / "attention.py").read_text(encoding="utf-8")
    (cls / "s99_copier").mkdir()
    (cls / "s99_copier" / "attention.py").write_text(renamed_copy(source), encoding="utf-8")
    found = similar_pairs(class_sources(cls), STUB)
    assert [(p.a, p.b) for p in found["pairs"]] == [("s05_maria_garcia", "s99_copier")]
    assert found["pairs"][0].score > 0.9


def test_two_untouched_stubs_are_not_a_copy():
    stub = (ROOT / "student_template" / "attention" / "attention.py")
    sources = {**class_sources(DEMO), "x1": graded_source(stub, SPEC.functions), "x2": graded_source(stub, SPEC.functions)}
    assert not [p for p in similar_pairs(sources, STUB)["pairs"] if {p.a, p.b} == {"x1", "x2"}]


def test_scores_are_the_same_in_every_process():
    code = ("import json, sys\nsys.path.insert(0, 'tests')\nfrom test_similarity import DEMO, STUB, class_sources\n"
            "from autograder.classroom.similarity import similar_pairs\n"
            "r = similar_pairs(class_sources(DEMO), STUB)\nprint(json.dumps([r['median'], r['mad']]))")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                           env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"}).stdout for seed in ("1", "2")}
    assert len(runs) == 1 and json.loads(runs.pop())[0] > 0


def test_the_report_shows_the_pair_and_the_copy_keeps_its_score(tmp_path):
    cls = tmp_path / "cls"
    for name in ("s05_maria_garcia", "s06_chen_jie", "s07_priya_natarajan", "s10_kenji_tanaka"):
        shutil.copytree(DEMO / name, cls / name)
    (cls / "s99_copier").mkdir()
    (cls / "s99_copier" / "attention.py").write_text(
        renamed_copy((cls / "s05_maria_garcia" / "attention.py").read_text(encoding="utf-8")), encoding="utf-8")
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "autograder", "grade", str(cls), "--out", str(out), "-q"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    report = (out / "report.html").read_text(encoding="utf-8")
    section = report[report.index("相似的代码 / Similar code"):]
    assert "s05_maria_garcia<br>s99_copier" in section and "attn_probs" in section
    scores = {r["student"]: r["score"] for r in csv.DictReader(io.StringIO((out / "grades.csv").read_text()))}
    assert scores["s99_copier"] == scores["s05_maria_garcia"]
    assert json.loads((out / "run.json").read_text())["similarity"]["pairs"][0]["b"] == "s99_copier"
