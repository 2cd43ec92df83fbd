"""Per-submission limits (one place for their defaults)."""
from __future__ import annotations

from dataclasses import dataclass, asdict


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 2 << 30      # real cap: the job's memory cgroup
    cpu_seconds: int = 60            # RLIMIT_CPU for the worker and each descendant
    cpus: float = 1.0                # CPU time per worker, all its processes together (cgroup CFS quota), in cores
    processes: int = 32              # RLIMIT_NPROC for the job's own uid, and the cgroup's pids.max
    file_bytes: int = 1 << 20        # RLIMIT_FSIZE: the largest file (and captured output) a worker can write
    tmp_bytes: int = 64 << 20        # size of the private /tmp tmpfs
    open_files: int = 64             # RLIMIT_NOFILE
    load_seconds: float = 20.0       # wall clock for importing the submission (runs the notebook's demo cells)
    call_seconds: float = 10.0       # wall clock for one call into student code
    total_seconds: float = 90.0      # wall clock for the whole submission; checks after this fail as timeouts
    reply_bytes: int = 64 << 20      # largest reply accepted from a worker
    output_excerpt: int = 4000       # characters of captured stdout/stderr kept for feedback

    def to_json(self) -> dict:
        return asdict(self)
