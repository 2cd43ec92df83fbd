"""Per-worker cgroups (grader side): the real memory cap, a process cap, a CPU cap, and killing every descendant.

The CPU cap (`cpus` cores of CPU time per slot: CFS quota) keeps one submission, however many processes it
starts, from taking the CPU its neighbours are graded on.

cgroup v1 (separate memory and pids hierarchies) and v2 (unified) are both handled. Job groups are created under
the grader's own cgroup, so nested containers work. `available()` says whether the real cap can be had here.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


def _own_path(controller: str) -> str | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(",") or (controller == "" and names == ""):
            return path
    return None


def _layout() -> tuple[str, dict[str, Path]] | None:
    """('v1', {'memory': dir, 'pids': dir}) or ('v2', {'unified': dir}) for our own cgroup, if writable."""
    if (ROOT / "cgroup.controllers").exists():
        path = _own_path("")
        controllers = (ROOT / "cgroup.controllers").read_text().split()
        if path is not None and {"memory", "pids"} <= set(controllers):
            return "v2", {"unified": ROOT / path.lstrip("/")}
        return None
    dirs = {}
    for controller in ("memory", "pids", "cpu"):
        path = _own_path(controller)
        if path is None or not (ROOT / controller).is_dir():
            if controller == "cpu":
                continue  # optional: without it there is no CPU cap (see `cpu_controller`, said by the tier)
            return None
        dirs[controller] = ROOT / controller / path.lstrip("/")
    return "v1", dirs


def cpu_controller() -> bool:
    """Can job groups here also cap CPU time (a cpu controller beside memory and pids)?"""
    layout = _layout()
    if layout is None:
        return False
    if layout[0] == "v1":
        return "cpu" in layout[1]
    return "cpu" in (ROOT / "cgroup.controllers").read_text().split()


def available() -> str | None:
    """Why job cgroups cannot be used here, or None when they can."""
    if os.geteuid() != 0:
        return "not running as root"
    layout = _layout()
    if layout is None:
        return "no memory and pids cgroup controllers found under /sys/fs/cgroup"
    for d in layout[1].values():
        if not os.access(d, os.W_OK):
            return f"{d} is not writable"
    return None


def remove_stale() -> None:
    """Kill and remove job groups left by graders that no longer run (e.g. one killed with kill -9)."""
    layout = _layout()
    if layout is None:
        return
    for base in layout[1].values():
        for d in sorted((base / "autograder").glob("*-*")):
            owner = d.name.split("-", 1)[0]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                JobGroup.adopt(layout[0], d).remove()


class JobGroup:
    """A worker slot's cgroup(s), reused from one worker to the next: `add(pid)` before the worker runs,
    `signal_all()` to kill it and every descendant, `drain()` until they are gone, `remove()` at the end."""

    def __init__(self, name: str, memory_bytes: int, processes: int, cpus: float = 1.0):
        version, bases = _layout()
        self.version = version
        self.dirs = {}
        for controller, base in bases.items():
            d = base / "autograder" / name
            d.mkdir(parents=True, exist_ok=True)
            self.dirs[controller] = d
        period = 100_000
        quota = max(1000, int(cpus * period))
        if version == "v1":
            (self.dirs["memory"] / "memory.limit_in_bytes").write_text(str(memory_bytes))
            (self.dirs["pids"] / "pids.max").write_text(str(processes))
            if "cpu" in self.dirs:
                (self.dirs["cpu"] / "cpu.cfs_period_us").write_text(str(period))
                (self.dirs["cpu"] / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            parent = self.dirs["unified"].parent
            (parent / "cgroup.subtree_control").write_text("+memory +pids")
            (self.dirs["unified"] / "memory.max").write_text(str(memory_bytes))
            (self.dirs["unified"] / "memory.swap.max").write_text("0")
            (self.dirs["unified"] / "pids.max").write_text(str(processes))
            try:
                (parent / "cgroup.subtree_control").write_text("+cpu")
                (self.dirs["unified"] / "cpu.max").write_text(f"{quota} {period}")
            except OSError:
                pass  # no cpu controller delegated here
        self.baseline = self._memory_events()

    @classmethod
    def adopt(cls, version: str, directory: Path) -> "JobGroup":
        """An existing group directory (one hierarchy is enough to kill its processes and remove it)."""
        group = cls.__new__(cls)
        group.version, group.dirs = version, {"pids" if version == "v1" else "unified": directory}
        return group

    def add(self, pid: int) -> None:
        for d in self.dirs.values():
            (d / "cgroup.procs").write_text(str(pid))

    def pids(self) -> list[int]:
        d = self.dirs.get("pids") or self.dirs["unified"]
        try:
            return [int(x) for x in (d / "cgroup.procs").read_text().split()]
        except FileNotFoundError:
            return []

    def _memory_events(self) -> int:
        """How often the memory cap was hit since the group was made (v1 failcnt; v2 max + oom_kill events)."""
        try:
            if self.version == "v1":
                return int((self.dirs["memory"] / "memory.failcnt").read_text())
            events = (self.dirs["unified"] / "memory.events").read_text().split()
            return int(events[events.index("oom_kill") + 1]) + int(events[events.index("max") + 1])
        except (OSError, ValueError, KeyError):
            return 0

    def peak_memory(self) -> int | None:
        """The most memory any worker of this slot has used so far, in bytes (None if the kernel does not say)."""
        path = (self.dirs["memory"] / "memory.max_usage_in_bytes" if self.version == "v1"
                else self.dirs["unified"] / "memory.peak")
        try:
            return int(path.read_text())
        except (OSError, ValueError):
            return None

    def hit_memory_limit(self) -> bool:
        """Did the current worker run into the memory cap?"""
        return self._memory_events() > self.baseline

    def signal_all(self) -> list[int]:
        """SIGKILL every process now in the group; returns their pids."""
        if self.version == "v2":
            try:
                (self.dirs["unified"] / "cgroup.kill").write_text("1")
            except OSError:
                pass
        pids = self.pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def drain(self) -> None:
        """Kill until the group is empty (a fork storm is bounded by pids.max); ready for the next worker."""
        for _ in range(5000):
            if not self.signal_all():
                break
            time.sleep(0.002)
        self.baseline = self._memory_events()

    def remove(self) -> None:
        self.drain()
        for d in self.dirs.values():
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # busy while the last processes exit
                    time.sleep(0.01)
