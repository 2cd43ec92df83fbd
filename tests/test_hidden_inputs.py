"""Per-student hidden inputs: drawn from a course secret and the student's id, recorded in the gradebook so that a
regrade reproduces them, references computed from the reference solution, and no global state shared by threads."""
from __future__ import annotations

import sqlite3
import stat
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
import torch.nn.functional as F

from autograder.assignments.attention import cases
from autograder.assignments.attention.checks import SEED42_WEIGHTS
from autograder.classroom.grade_class import GRADEBOOK, ClassRun
from autograder.classroom.gradebook import Gradebook
from autograder.engine import hidden_inputs
from autograder.engine.hidden_inputs import course_secret, student_seed
from conftest import SOLUTION, TEST_LIMITS

ID = "attention"
SECRET = "0123456789abcdef" * 4
INPUTS = (".Q", ".K", ".V", ".x", ".weight")  # reference names ending so are inputs; the rest are expected outputs


@pytest.fixture(scope="module")
def solution(suite):
    return hidden_inputs.reference_solution(ID, suite.directory)


def refs_of(solution, secret: str, student: str) -> dict[str, torch.Tensor]:
    return cases.build_references(solution, student_seed(secret, ID, student))


SHARED = ("seed42.Q", "seed42.K", "seed42.V", "seed42.output", "seed42.weights", "seed42.W_")  # the chapter's example


def per_student(refs: dict) -> dict:
    return {k: v for k, v in refs.items() if not k.startswith(SHARED)}


def identical(a: dict, b: dict) -> bool:
    """Same names, dtypes, shapes and bytes."""
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
                                        and a[k].numpy().tobytes() == b[k].numpy().tobytes() for k in a)


def test_two_students_get_different_inputs_and_references_under_one_secret(solution):
    alice, bob = refs_of(solution, SECRET, "alice"), refs_of(solution, SECRET, "bob")
    assert alice.keys() == bob.keys()
    for name in per_student(alice):
        assert alice[name].shape == bob[name].shape and alice[name].dtype == bob[name].dtype == torch.float32, name
        assert not torch.equal(alice[name], bob[name]), name  # inputs and expected outputs alike
    assert alice["batched.Q"].shape == (2, 3, 6, 4) and alice["batched.V"].shape == (2, 3, 6, 5)  # the titles' shapes
    assert alice["scaling.Q"].shape == (6, 16) and alice["split_batched.x"].shape == (2, 5, 12)
    assert alice["mha.x"].shape == (2, 5, 12) and alice["mha.W_q.weight"].shape == (12, 12)
    assert identical({k: v for k, v in alice.items() if k.startswith(SHARED)},
                     {k: v for k, v in bob.items() if k.startswith(SHARED)})  # the chapter's example is shared
    assert "seed42.x" in per_student(alice)  # mha_seed42: the chapter's weights, but each student's own input


def test_same_student_and_secret_give_bit_identical_inputs(solution):
    assert student_seed(SECRET, ID, "alice") == student_seed(SECRET, ID, "alice")
    assert identical(refs_of(solution, SECRET, "alice"), refs_of(solution, SECRET, "alice"))


def test_another_secret_gives_other_inputs(solution):
    ours, theirs = refs_of(solution, SECRET, "alice"), refs_of(solution, "another course secret", "alice")
    assert all(not torch.equal(ours[k], theirs[k]) for k in per_student(ours) if k.endswith(INPUTS))


def test_seeds_depend_on_assignment_and_student_and_fit_in_63_bits():
    seeds = {student_seed(SECRET, a, s) for a in ("attention", "next") for s in ("alice", "bob", "alice\0", "")}
    assert len(seeds) == 8 and all(0 <= s < 2**63 for s in seeds)


def test_course_secret_is_created_private_once_and_the_variable_wins(tmp_path, monkeypatch):
    monkeypatch.delenv(hidden_inputs.ENV, raising=False)
    first = course_secret(tmp_path / "out")
    assert len(bytes.fromhex(first)) == 32 and course_secret(tmp_path / "out") == first
    assert stat.S_IMODE((tmp_path / "out" / "course_secret").stat().st_mode) == 0o600
    monkeypatch.setenv(hidden_inputs.ENV, "from the environment")
    assert course_secret(tmp_path / "elsewhere") == "from the environment"
    assert not (tmp_path / "elsewhere").exists()


def test_regrade_reuses_the_recorded_seed_after_the_secret_is_lost(tmp_path, suite, sandbox, monkeypatch):
    monkeypatch.delenv(hidden_inputs.ENV, raising=False)
    source, out = tmp_path / "class", tmp_path / "out"
    for student in ("alice", "bob"):
        (source / student).mkdir(parents=True)
        (source / student / "attention.py").write_text(SOLUTION.read_text())

    def run(mode: str) -> dict[str, int]:
        results, _ = ClassRun(source, out, suite, TEST_LIMITS, jobs=2, mode=mode, show_progress=False,
                              sandbox=sandbox).grade()
        assert [r.score for r in results] == [20, 20]
        with sqlite3.connect(out / GRADEBOOK) as db:
            return dict(db.execute("SELECT student, seed FROM results"))

    first = run("new")
    secret = (out / "course_secret").read_text().strip()
    assert first == {s: student_seed(secret, ID, s) for s in ("alice", "bob")}
    (out / "course_secret").unlink()
    assert run("force") == first
    assert run("resume") == first
    assert student_seed(course_secret(out), ID, "alice") != first["alice"]  # a new secret would have drawn others


def test_gradebook_without_a_seed_column_is_migrated(tmp_path):
    path = tmp_path / GRADEBOOK
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE results (assignment TEXT NOT NULL, student TEXT NOT NULL, sha256 TEXT, suite TEXT "
                   "NOT NULL, score REAL NOT NULL, max_score REAL NOT NULL, result TEXT NOT NULL, graded_at TEXT "
                   "NOT NULL, PRIMARY KEY (assignment, student))")
        db.execute("INSERT INTO results VALUES ('attention', 'old', NULL, 'x', 0, 20, '{}', 'then')")
    book = Gradebook(path)
    try:
        assert book.seeds(ID) == {} and book.count(ID) == 1
        book.db.execute("UPDATE results SET seed = 7 WHERE student = 'old'")
        assert book.seeds(ID) == {"old": 7}
    finally:
        book.close()


def test_seed42_inputs_leave_the_global_rng_untouched_and_are_the_chapters(solution):
    torch.manual_seed(1234)
    before = torch.get_rng_state()
    Q, K, V = cases.seed42_inputs()
    weights42, x42 = cases.seed42_model()
    cases.build_references(solution, 5)
    assert torch.equal(torch.get_rng_state(), before)
    torch.manual_seed(42)  # run.py's order: Q, K, V, MultiHeadAttention(8, 2), x
    chapter = [torch.randn(4, 4) for _ in range(3)]
    mha = solution.MultiHeadAttention(8, 2)
    x = torch.randn(4, 8)
    assert all(torch.equal(a, b) for a, b in zip((Q, K, V), chapter))
    assert all(torch.equal(weights42[f"{n}.weight"], getattr(mha, n).weight) for n in cases.MHA_NAMES)
    assert torch.equal(x42, x)
    _, weights = solution.scaled_dot_product_attention(Q, K, V)
    assert torch.allclose(weights, SEED42_WEIGHTS, atol=1e-4, rtol=0)


def test_references_built_from_four_threads_equal_those_built_one_by_one(solution):
    seeds = [student_seed(SECRET, ID, f"student{i}") for i in range(50)]
    alone = [cases.build_references(solution, s) for s in seeds]
    rng = torch.get_rng_state()
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda s: cases.build_references(solution, s), seeds))
    assert all(identical(a, b) for a, b in zip(alone, together))
    assert torch.equal(torch.get_rng_state(), rng)


def test_references_for_a_random_seed_agree_with_torch_sdpa_in_float64(solution):
    seed = int(torch.randint(0, 2**62, (1,), generator=torch.Generator().manual_seed(99)))
    refs = cases.build_references(solution, seed)
    for case, causal in (("batched", True), ("scaling", True), ("noncausal", False), ("large", True), ("grads", True)):
        Q, K, V = (refs[f"{case}.{n}"].double() for n in "QKV")
        expected = F.scaled_dot_product_attention(Q, K, V, is_causal=causal)
        assert torch.allclose(refs[f"{case}.output"].double(), expected, atol=1e-6, rtol=1e-5), case


def test_large_logit_inputs_are_saturated_for_every_student():
    for i in range(200):
        Q, K, _, _ = cases.sdpa_cases(student_seed(SECRET, ID, f"s{i}"))["large"]
        assert cases.saturated(Q, K) and Q.abs().max() > 30  # scores of about +-1000, no near ties


def test_integrations_take_the_secret_from_the_variable_the_course_root_or_the_shipped_file(tmp_path, monkeypatch):
    from autograder.integrations import grading

    monkeypatch.delenv(hidden_inputs.ENV, raising=False)
    kept = grading.seed_for(ID, "alice", course=tmp_path / "course")  # nbgrader: kept in the course root
    assert kept == student_seed((tmp_path / "course" / "course_secret").read_text().strip(), ID, "alice")
    shipped = tmp_path / "source" / "course_secret"
    shipped.parent.mkdir()
    shipped.write_text("shipped secret\n")
    assert grading.seed_for(ID, "alice", shipped=shipped) == student_seed("shipped secret", ID, "alice")
    derived = grading.seed_for(ID, "alice", shipped=tmp_path / "missing")  # nowhere to keep one
    assert derived == grading.seed_for(ID, "alice") != grading.seed_for(ID, "bob")
    monkeypatch.setenv(hidden_inputs.ENV, "from the environment")
    assert grading.seed_for(ID, "alice", course=tmp_path / "other", shipped=shipped) == student_seed(
        "from the environment", ID, "alice")
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "submission_metadata.json").write_text('{"users": [{"id": 7}, {"id": 3}]}')
    assert grading.gradescope_submitter(tmp_path / "meta") == "gradescope:3,7"
    assert grading.gradescope_submitter(tmp_path / "source") is None
