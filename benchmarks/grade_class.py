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


def ours(work: Path, n: int, jobs: int) -> tuple[float, int, int]:
    """Wall seconds, the grader's peak RSS (KiB) and the largest worker's own memory (bytes)."""
    cls, out = make_class(work / f"class{n}", n), work / f"out{n}"
    seconds, rss = timed([str(BIN / "autograder"), "grade", str(cls), "--out", str(out), "-q", "-j", str(jobs)])
    return seconds, rss, json.loads((out / "run.json").read_text()).get("worker_peak_bytes") or 0


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


if __name__ == "__main__":
    main()
