"""Worker uids that no two workers share: not within a run, and not across grader runs on the same host.

Some kernel state is kept per uid and outlives a worker: the user keyrings, the RLIMIT_NPROC count, who may
signal or see whom in /proc. A fixed uid per slot (61000 + slot, the same in every grader run on the host) is
therefore a channel between students. Instead each Sandbox claims a block of 65536 uids at random and gives
each worker a fresh one: base+1, base+2, ... A uid is never handed out twice in a run. When all 65535 are
used, the run claims another block.

Which uids. Blocks lie in [0x77390000, 0x7FFE0000), 2245 blocks, below 2**31 because some programs treat uids as
signed. This range avoids what systemd reserves (dynamic users, systemd-nspawn's 0x80000-0x6FFFFFFF container
range, the foreign range 0x7FFE0000 and up), LXD/Incus's default 1000000-1001000000, and sssd's AD id mapping
(up to 2000200000). Blocks that overlap a range in /etc/subuid or /etc/subgid (rootless containers) are skipped
too. Workers use the same number as their gid.

The lock. A block is held with an exclusive flock on `<dir>/block-<n>` for as long as the UidBlock lives. The
kernel drops the lock when the process dies, so a killed grader leaves nothing held. The lock means something
only if no one else can unlink or replace the file, so the directory must be writable by its owner alone:
- As root (the only case where isolation, and so uid switching, happens): `/run/autograder-uids`, mode 0700.
  /run is root's own directory. /run/lock and /tmp are world-writable (1777), and any local user could create
  `autograder-uids` there first. Then they own it, and can delete a held lock file, which lets two runs hold
  the same block. A shared 1777 directory would be wrong for the same reason.
- As an ordinary user (no isolation, so the uids are never used): a private `autograder-uids-<euid>` in
  $XDG_RUNTIME_DIR or /tmp.
The directory is refused if it is a symlink, or is not owned by us and writable only by us.
$AUTOGRADER_UID_LOCK_DIR overrides it, for example a directory bind-mounted into every grader container on a
host: containers with separate /run directories do not see each other's locks. Their random blocks then
collide with a chance of about 1 in 2245 per pair of concurrent runs.
On release the file is unlinked while still locked. A claimer that locked a file that was unlinked in the
meantime sees that the path no longer names its inode, and tries again.
"""
from __future__ import annotations

import fcntl
import os
import random
import stat
import threading

PER_BLOCK = 1 << 16


class UidBlock:
    FIRST_BLOCK, END_BLOCK = 0x77390000 // PER_BLOCK, 0x7FFE0000 // PER_BLOCK
    SUBID_FILES = ("/etc/subuid", "/etc/subgid")

    def __init__(self, directory: str):
        self.directory = directory
        self.blocks: list[int] = []  # every block held, the current one last
        self._fds: list[int] = []
        self._next = 0  # the last uid handed out is blocks[-1] * PER_BLOCK + _next
        self._released = False
        self._mutex = threading.Lock()

    @classmethod
    def claim(cls, block: int | None = None, directory: str | None = None) -> "UidBlock":
        """A UidBlock holding `block`, or a random free block when it is None (BlockingIOError if `block` is held)."""
        self = cls(directory or lock_dir())
        self._claim(block)
        return self

    def next(self) -> int:
        """A uid no one else has been given (thread-safe)."""
        with self._mutex:
            if self._released:
                raise ValueError("UidBlock already released")
            if not self._fds or self._next >= PER_BLOCK - 1:
                self._claim(None)  # all 65535 used: a fresh block
            self._next += 1
            return self.blocks[-1] * PER_BLOCK + self._next

    def release(self) -> None:
        with self._mutex:
            for n, fd in zip(self.blocks, self._fds):
                try:
                    os.unlink(self._path(n))  # unlinked while locked: see the module docstring
                except FileNotFoundError:
                    pass
                os.close(fd)
            self.blocks, self._fds, self._released = [], [], True

    def __enter__(self) -> "UidBlock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def _path(self, n: int) -> str:
        return os.path.join(self.directory, f"block-{n}")

    def _claim(self, block: int | None) -> None:
        candidates = [block] if block is not None else self._candidates()
        for n in candidates:
            if not 1 <= n < PER_BLOCK - 1 or n in self.blocks:  # not root's block, nor one reaching uid -1
                continue
            fd = os.open(self._path(n), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.stat(self._path(n), follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                    self.blocks.append(n)
                    self._fds.append(fd)
                    self._next = 0
                    return
            except (BlockingIOError, FileNotFoundError):
                pass
            os.close(fd)
        raise BlockingIOError(f"uid block {block} is held" if block is not None else "no free uid block")

    def _candidates(self) -> list[int]:
        reserved = []
        for name in self.SUBID_FILES:
            try:
                with open(name) as f:
                    for line in f:
                        parts = line.strip().split(":")
                        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                            reserved.append((int(parts[1]), int(parts[1]) + int(parts[2])))
            except OSError:
                pass
        blocks = [n for n in range(self.FIRST_BLOCK, self.END_BLOCK)
                  if not any(lo < (n + 1) * PER_BLOCK and n * PER_BLOCK < hi for lo, hi in reserved)]
        random.SystemRandom().shuffle(blocks)
        return blocks


def lock_dir() -> str:
    """The host-wide lock directory (created if needed), checked to be writable by us alone."""
    euid = os.geteuid()
    path = os.environ.get("AUTOGRADER_UID_LOCK_DIR")
    if not path:
        path = "/run/autograder-uids" if euid == 0 and os.path.isdir("/run") else \
            os.path.join(os.environ.get("XDG_RUNTIME_DIR") or "/tmp", f"autograder-uids-{euid}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != euid or st.st_mode & 0o022:
        raise PermissionError(f"{path}: uid lock directory must be a real directory owned by uid {euid}, "
                              "writable by it alone")
    return path
