"""Isolation tiers, each exercised for real: the sandbox and hostile suites run again (as their own pytest process)
as root without CAP_SYS_ADMIN (`setpriv --bounding-set -sys_admin`: tier userns with the worker uid block mapped
in, and cgroups), as an ordinary user (`setpriv --reuid`: tier userns, rlimits instead of cgroups) and as root in a
Docker-like container (`docker_like.py`: Docker's capabilities and seccomp denials, read-only cgroups: tier
landlock); a class is graded as that user, and the Gradescope zip, installed by its own setup.sh, runs in the
Docker-like container. Each run says its tier.

The ordinary user needs an interpreter it may execute: the Python of this venv lives under /root (mode 700), so the
user gets a venv made from the system's /usr/bin/python3.11 whose site-packages point at this venv's (same CPython
3.11 ABI), and traverse permission on the folders above it, for the duration of these tests only."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, SOLUTION

NOBODY = 65534
SYSTEM_PYTHON = Path("/usr/bin/python3.11")
DROP_SYS_ADMIN = ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin"]
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
DOCKER_LIKE = [sys.executable, str(ROOT / "tests" / "docker_like.py"), "--"]
SUITES = ["tests/test_sandbox.py", "tests/test_hostile.py"]
NO_CGROUP = {"a private temporary directory of capped size (tmpfs)",
             "real memory cap (cgroup; otherwise an address-space limit)",
             "CPU cap per worker, so no submission starves its neighbour (cgroup)"}

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                                     reason="needs root and setpriv to emulate the other tiers")]


@pytest.fixture(scope="module")
def user_python():
    """A python the ordinary user may run, importing this venv's packages (and so this checkout)."""
    if not SYSTEM_PYTHON.exists():
        pytest.fail(f"{SYSTEM_PYTHON} is missing: the ordinary-user tier needs a Python outside /root")
    folder = Path(tempfile.mkdtemp(prefix="autograder-user-"))
    opened = []
    try:
        opened = _traversable([Path(sysconfig.get_paths()["purelib"]), ROOT / "tests", ROOT / "autograder"])
        yield make_user_python(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        for path, mode in opened:
            path.chmod(mode)


def make_user_python(folder: Path) -> tuple[str, Path]:
    """In `folder`: a venv of the system Python whose site-packages import this venv's, and a home for the user."""
    folder.mkdir(mode=0o755, exist_ok=True)
    folder.chmod(0o755)
    subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(folder / "venv")], check=True)
    user_site = next((folder / "venv" / "lib").glob("python3*/site-packages"))
    site = sysconfig.get_paths()["purelib"]
    (user_site / "autograder-packages.pth").write_text(f"import site; site.addsitedir({site!r})\n")
    home = folder / "home"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    return str(folder / "venv" / "bin" / "python"), home


def _traversable(paths: list[Path]) -> list[tuple[Path, int]]:
    """Give others read/traverse permission on every folder above `paths` that lacks it; returns what to restore."""
    changed = []
    for path in paths:
        for folder in [path, *path.parents]:
            mode = folder.stat().st_mode
            if mode & stat.S_IXOTH == 0 or mode & stat.S_IROTH == 0:
                changed.append((folder, stat.S_IMODE(mode)))
                folder.chmod(stat.S_IMODE(mode) | stat.S_IXOTH | stat.S_IROTH)
    return changed


def run_suites(prefix: list[str], python: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, "env", *[f"{k}={v}" for k, v in env.items()], python, "-m", "pytest", *SUITES,
                           "-q", "-p", "no:cacheprovider", "-x"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)


def tier_of(prefix: list[str], python: str, env: dict) -> dict:
    code = "import json; from autograder.sandbox import tiers; print(json.dumps(tiers.detect().to_json()))"
    out = subprocess.run([*prefix, "env", *[f"{k}={v}" for k, v in env.items()], python, "-c", code], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_root_without_cap_sys_admin_grades_in_tier_userns_and_stops_every_attack():
    env = {"PYTHONDONTWRITEBYTECODE": "1"}
    tier = tier_of(DROP_SYS_ADMIN, sys.executable, env)
    assert tier["tier"] == "userns" and tier["cgroups"] and tier["own_uids"] and tier["lacks"] == []
    result = run_suites(DROP_SYS_ADMIN, sys.executable, env)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout.splitlines()[-1]


def test_an_ordinary_user_grades_in_tier_userns_and_stops_every_attack(user_python):
    python, home = user_python
    env = {"HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1"}
    tier = tier_of(AS_NOBODY, python, env)
    assert tier["tier"] == "userns" and not tier["cgroups"] and not tier["own_uids"]
    assert "a fresh uid per worker" in tier["lacks"]
    result = run_suites(AS_NOBODY, python, env)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout.splitlines()[-1]


def test_root_in_a_docker_like_container_grades_in_tier_landlock_and_stops_every_attack(user_python):
    python, _ = user_python
    env = {"PYTHONDONTWRITEBYTECODE": "1"}
    tier = tier_of(DOCKER_LIKE, python, env)
    assert tier["tier"] == "landlock" and not tier["cgroups"] and tier["own_uids"], tier
    assert set(tier["lacks"]) == NO_CGROUP, tier
    result = run_suites(DOCKER_LIKE, python, env)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout.splitlines()[-1]


def test_a_docker_like_container_whose_python_other_uids_cannot_read_refuses_and_says_why():
    """This venv's Python lives under /root (mode 700): a worker with a uid of its own could not import from it."""
    tier = tier_of(DOCKER_LIKE, sys.executable, {"PYTHONDONTWRITEBYTECODE": "1"})
    assert tier["tier"] == "none"
    code = "from autograder.sandbox.client import choose_tier\nchoose_tier(True)"
    out = subprocess.run([*DOCKER_LIKE, sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode != 0
    assert "landlock: other uids cannot read the Python installation" in out.stderr and "--no-sandbox" in out.stderr


def test_an_ordinary_user_grades_a_class_and_every_output_names_the_tier(user_python, tmp_path):
    from fixtures.compose import FIXTURES, base_solution_source, parse_expect, submission_bytes

    python, home = user_python
    work = Path(tempfile.mkdtemp(prefix="autograder-user-class-"))
    try:
        work.chmod(0o777)
        (work / "class" / "ok").mkdir(parents=True)
        shutil.copy(SOLUTION, work / "class" / "ok" / "attention.py")
        (work / "class" / "cheat").mkdir()
        (work / "class" / "cheat" / "attention.py").write_bytes(
            submission_bytes(FIXTURES / "attention" / "hostile" / "patched_allclose.py", base_solution_source()))
        out = work / "out"
        run = subprocess.run([*AS_NOBODY, "env", f"HOME={home}", "PYTHONDONTWRITEBYTECODE=1", python, "-m",
                              "autograder", "grade", str(work / "class"), "--out", str(out)], cwd=ROOT,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "isolation tier: userns" in run.stdout and "a fresh uid per worker" in run.stdout
        grades = {line.split(",")[0]: line.split(",")[1] for line in (out / "grades.csv").read_text().splitlines()[1:]}
        honest_cheat = parse_expect(FIXTURES / "attention" / "hostile" / "patched_allclose.py")["score"]
        assert grades == {"cheat": f"{honest_cheat:g}", "ok": "20"}
        assert json.loads((out / "run.json").read_text())["isolation"]["tier"] == "userns"
        assert json.loads((out / "results" / "ok.json").read_text())["extra_data"]["isolation"] == "userns"
        assert "userns" in (out / "report.html").read_text()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_the_gradescope_zip_without_cap_sys_admin_gives_full_marks_and_tampering_no_gain(tmp_path):
    from fixtures.compose import FIXTURES, base_solution_source, parse_expect, submission_bytes
    from test_integrations import gradescope_run

    honest, _ = gradescope_run(tmp_path, "honest", SOLUTION.read_bytes(), "attention.py", prefix=tuple(DROP_SYS_ADMIN))
    cheat, _ = gradescope_run(tmp_path, "cheat", submission_bytes(FIXTURES / "attention" / "hostile" / "patched_allclose.py",
                                                                  base_solution_source()),
                              "attention.py", prefix=tuple(DROP_SYS_ADMIN))
    assert honest["score"] == 20
    assert cheat["score"] == parse_expect(FIXTURES / "attention" / "hostile" / "patched_allclose.py")["score"]
    assert honest["extra_data"]["isolation"] == cheat["extra_data"]["isolation"] == "userns"


@pytest.fixture(scope="module")
def gradescope_image():
    """The Gradescope zip unpacked as Gradescope does (/autograder/source) and installed by its own setup.sh, as
    root, into a venv of the system Python 3.11: torch from this machine's CPU wheel, put beside setup.sh as its
    header says; the rest (numpy, nbformat, pyseccomp, landlockpy) from the package index."""
    from test_integrations import GRADESCOPE_ZIP

    folder = Path(tempfile.mkdtemp(prefix="autograder-gradescope-"))
    try:
        folder.chmod(0o755)  # as /autograder: the venv inside must be readable by the workers' uids
        with zipfile.ZipFile(GRADESCOPE_ZIP) as archive:
            archive.extractall(folder / "source")
        for script in ("setup.sh", "run_autograder"):
            (folder / "source" / script).chmod(0o755)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(folder / "source"),
                        "torch==2.13.0"], check=True, timeout=600)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
               "AUTOGRADER_VENV": str(folder / "venv"), "AUTOGRADER_ROOT": str(folder)}
        setup = subprocess.run(["bash", str(folder / "source" / "setup.sh")], env=env, capture_output=True,
                               text=True, timeout=1800)
        assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
        assert "autograder ready, torch 2.13.0" in setup.stdout
        yield folder, env
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def gradescope_grade(image, submission: bytes, prefix: list[str]) -> dict:
    folder, env = image
    shutil.rmtree(folder / "submission", ignore_errors=True)
    (folder / "submission").mkdir()
    (folder / "submission" / "attention.py").write_bytes(submission)
    run = subprocess.run([*prefix, str(folder / "source" / "run_autograder")], env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads((folder / "results" / "results.json").read_text(encoding="utf-8"))


def test_the_gradescope_zip_set_up_by_its_setup_sh_grades_in_a_docker_like_container(gradescope_image):
    """Honest full marks, tampering (a patched torch.allclose) and reading the installed package (the reference
    solution sits in the venv's site-packages, which workers must be able to read) no gain; tier landlock."""
    from fixtures.compose import FIXTURES, base_solution_source, parse_expect, submission_bytes

    honest = gradescope_grade(gradescope_image, SOLUTION.read_bytes(), DOCKER_LIKE)
    results = {name: gradescope_grade(gradescope_image, submission_bytes(FIXTURES / "attention" / "hostile" / f"{name}.py",
                                                                         base_solution_source()), DOCKER_LIKE)
               for name in ("patched_allclose", "read_installed_package")}
    assert honest["score"] == 20, honest["output"][:2000]
    assert {name: r["score"] for name, r in results.items()} == {
        name: parse_expect(FIXTURES / "attention" / "hostile" / f"{name}.py")["score"] for name in results}
    assert {r["extra_data"]["isolation"] for r in (honest, *results.values())} == {"landlock"}
    assert "course secret:" not in json.dumps(results["read_installed_package"])
