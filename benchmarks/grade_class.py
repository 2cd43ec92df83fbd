"""Class-grading speed, side by side: `autograder grade` (isolation fully on) versus stock `nbgrader autograde`,
on N identical correct notebook submissions, in the same run on the same machine.

    .venv/bin/python benchmarks/grade_class.py [--n 200] [--nbgrader-n 10] [--jobs 2]

Prints per-submission times, the ratio, the budget (a class of N in at most 10x one `python -c "import torch"`)
and, for a small and the full class, the grader's peak RSS and the largest worker's own memory (from its cgroup,
as recorded in OUT/run.json): neither may grow with the class size.
nbgrader grades serially at seconds per notebook, so it is timed on a smaller sample and compared per submission.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
NOTEBOOK = ROOT / "solutions" / "attention" / "attention.ipynb"
SOURCE_NOTEBOOK = ROOT / "assignments" / "attention" / "attention.ipynb"


def timed(cmd: list[str], **kwargs) -> tuple[float, int]:
    """Wall seconds and the peak RSS (KiB) of the command's largest process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kwargs)
    seconds = time.perf_counter() - started
    return seconds, max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


def make_class(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True)
    for i in range(n):
        shutil.copy(NOTEBOOK, folder / f"s{i:04d}.ipynb")
    return folder


def ours(work: Path, n: int, jobs: int, prefix: tuple[str, ...] = (), python: str = sys.executable,
         name: str = "") -> tuple[float, int, int]:
    """Wall seconds, the grader's peak RSS (KiB) and the largest worker's own memory (bytes). `prefix` runs the
    grader as someone else (setpriv), `python` with another interpreter."""
    cls, out = make_class(work / f"class{n}{name}", n), work / f"out{n}{name}"
    seconds, rss = timed([*prefix, python, "-m", "autograder", "grade", str(cls), "--out", str(out), "-q",
                          "-j", str(jobs)], cwd=ROOT)
    return seconds, rss, json.loads((out / "run.json").read_text()).get("worker_peak_bytes") or 0


def tiers(work: Path, n: int, jobs: int) -> list[tuple[str, float]]:
    """The same class in each isolation tier this machine can emulate: (label, wall seconds)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_tiers import AS_NOBODY, DOCKER_LIKE, DROP_SYS_ADMIN, _traversable, make_user_python

    rows = [("full (root)", ours(work, n, jobs, name="full")[0])]
    rows.append(("userns (root without CAP_SYS_ADMIN)", ours(work, n, jobs, tuple(DROP_SYS_ADMIN), name="b")[0]))
    shared = work / "user"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    opened = _traversable([Path(sys.prefix), work])
    try:
        python, home = make_user_python(shared / "py")
        rows.append(("userns (ordinary user)",
                     ours(shared, n, jobs, (*AS_NOBODY, "env", f"HOME={home}"), python, name="c")[0]))
        rows.append(("landlock (root, Docker-like container)", ours(shared, n, jobs, tuple(DOCKER_LIKE), python,
                                                                    name="d")[0]))
    finally:
        for path, mode in opened:
            path.chmod(mode)
    return rows


def nbgrader(work: Path, n: int) -> float:
    course = work / "course"
    (course / "source" / "attention").mkdir(parents=True)
    shutil.copy(SOURCE_NOTEBOOK, course / "source" / "attention" / "attention.ipynb")
    (course / "nbgrader_config.py").write_text('c = get_config()\nc.CourseDirectory.course_id = "bench"\n')
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    run = lambda *args: subprocess.run([str(BIN / "nbgrader"), *args], cwd=course, env=env, check=True,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("generate_assignment", "attention", "--force")
    for i in range(n):
        target = course / "submitted" / f"s{i:04d}" / "attention"
        target.mkdir(parents=True)
        shutil.copy(NOTEBOOK, target / "attention.ipynb")
        run("db", "student", "add", f"s{i:04d}")
    seconds, _ = timed([str(BIN / "nbgrader"), "autograde", "attention"], cwd=course, env=env)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--nbgrader-n", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="autograder-bench-") as tmp:
        work = Path(tmp)
        torch_s = min(timed([sys.executable, "-c", "import torch"])[0] for _ in range(3))
        _, small_rss, small_worker = ours(work, 20, args.jobs)
        ours_s, ours_rss, ours_worker = ours(work, args.n, args.jobs)
        nb_s = nbgrader(work, args.nbgrader_n)
        by_tier = tiers(work, args.n, args.jobs) if os.geteuid() == 0 else []
    ours_per, nb_per = ours_s / args.n, nb_s / args.nbgrader_n
    budget = 10 * torch_s
    print(f"machine: {os.cpu_count()} cores; python -c 'import torch': {torch_s:.2f} s (best of 3)")
    print(f"{'tool':<28}{'submissions':>12}{'total s':>10}{'per submission ms':>20}")
    print(f"{'autograder grade -j ' + str(args.jobs):<28}{args.n:>12}{ours_s:>10.1f}{1000 * ours_per:>20.0f}")
    print(f"{'nbgrader autograde':<28}{args.nbgrader_n:>12}{nb_s:>10.1f}{1000 * nb_per:>20.0f}")
    print(f"ratio per submission: nbgrader / autograder = {nb_per / ours_per:.1f}x")
    print(f"budget: {args.n} submissions in <= 10 x import torch = {budget:.1f} s -> "
          f"{'MET' if ours_s <= budget else 'MISSED'} ({ours_s:.1f} s, incl. start-up)")
    print(f"peak RSS of the largest grader process: {small_rss // 1024} MiB for 20 submissions, "
          f"{ours_rss // 1024} MiB for {args.n}")
    print(f"largest worker's own memory (cgroup peak): {small_worker >> 20} MiB for 20 submissions, "
          f"{ours_worker >> 20} MiB for {args.n}")
    for label, seconds in by_tier:
        print(f"tier {label:<40}{args.n:>6} submissions {seconds:>7.1f} s  {1000 * seconds / args.n:>6.0f} ms each")


if __name__ == "__main__":
    main()
