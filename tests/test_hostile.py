"""The hostile catalog (tests/fixtures/attention/hostile/): each attack gets its honest score (the `expect:` line: exactly, or
at most with `bound=upper` for attacks that may also hurt themselves), while a correct submission graded AT THE SAME
TIME in the same sandbox gets full marks; and a correct submission graded right after it still gets full marks."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import SOLUTION
from fixtures.compose import FIXTURES, base_solution_source, parse_expect, submission_bytes

HOSTILE = sorted(p for p in (FIXTURES / "attention" / "hostile").iterdir() if p.suffix == ".py" or p.is_dir())
# Graded one after the other: what the first leaves behind (keyrings, files, sockets, daemons) must not help the second.
CHANNEL_PAIRS = [("keyring_writer", "keyring_reader")]


def submitted_path(fixture: Path, tmp_path: Path) -> Path:
    """Where the grader reads this attack from: folders (and the symlink) as they are, others composed."""
    if fixture.is_dir():
        return fixture / "attention.py"
    path = tmp_path / fixture.stem / "attention.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(submission_bytes(fixture, base_solution_source()))
    return path


def assert_honest(result, expected: dict) -> None:
    details = [(c.name, c.status, c.detail_en[:200]) for c in result.checks]
    if expected.get("bound") == "upper":
        assert result.score <= expected["score"], details
    else:
        assert result.score == expected["score"], details
    assert not any("internal grader error" in c.detail_en for c in result.checks), details


@pytest.mark.parametrize("fixture", HOSTILE, ids=[p.stem for p in HOSTILE])
def test_attack_scores_its_honest_control_beside_a_correct_student(fixture, grade, tmp_path):
    with ThreadPoolExecutor(2) as pool:
        attack = pool.submit(grade, submitted_path(fixture, tmp_path))
        neighbour = pool.submit(grade, SOLUTION)
        result, beside = attack.result(), neighbour.result()
    assert_honest(result, parse_expect(fixture))
    assert beside.score == beside.max_score == 20, [(c.name, c.detail_en) for c in beside.checks if c.score == 0]
    after = grade(SOLUTION)
    assert after.score == after.max_score == 20, [(c.name, c.detail_en) for c in after.checks if c.score == 0]


@pytest.mark.parametrize("writer,reader", CHANNEL_PAIRS)
def test_no_channel_from_one_worker_to_the_next(writer, reader, grade, tmp_path):
    first = FIXTURES / "attention" / "hostile" / f"{writer}.py"
    second = FIXTURES / "attention" / "hostile" / f"{reader}.py"
    if not (first.exists() and second.exists()):
        pytest.fail(f"missing channel fixtures {first.name} / {second.name}")
    assert_honest(grade(submitted_path(first, tmp_path)), parse_expect(first))
    assert_honest(grade(submitted_path(second, tmp_path)), parse_expect(second))


def test_a_cpu_hog_does_not_starve_its_neighbour(grade, sandbox, tmp_path):
    """12 spinning setsid processes in one worker, and beside it a correct submission that needs ~3 s of CPU to load
    (within the tests' 8 s load limit only if it gets about a core): the per-slot CPU cap keeps that core for it.
    A tier without cgroups has no CPU cap (it says so): there the neighbour gets its marks when graded again alone,
    which is what a class run does with a timeout (`ClassRun`: regraded alone)."""
    hog, heavy = (FIXTURES / "attention" / "hostile" / f"{n}.py" for n in ("cpu_spinners", "heavy_correct_neighbour"))
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(grade, submitted_path(hog, tmp_path))
        second = pool.submit(grade, submitted_path(heavy, tmp_path))
        assert_honest(first.result(), parse_expect(hog))
        neighbour = second.result()
    if not sandbox.tier.cpu_cap:
        assert "CPU cap per worker, so no submission starves its neighbour (cgroup)" in sandbox.tier.lacks
        neighbour = grade(submitted_path(heavy, tmp_path))
    assert neighbour.score == 20, [(c.name, c.status, c.detail_en) for c in neighbour.checks if c.score == 0]


def test_no_attack_left_a_file_on_the_host():
    places = [Path(p) for p in ("/", "/etc", "/tmp", "/var/tmp", "/dev/shm")] + [Path.home()]
    leftovers = [hit for p in places for hit in p.glob("PWNED*")] + list(SOLUTION.parents[2].rglob("PWNED*"))
    assert leftovers == []
