"""A filesystem view without secrets, built once in the zygote: only the OS, Python and its packages.

The zygote moves into a new mount namespace and pivots into a small tmpfs root into which the system directories,
the Python installation and the site-packages it imports from are bind-mounted read-only. The course repository,
the hidden tests and references, the solutions, the gradebook and other students' submissions are simply absent.
Every directory we create is world-traversable, so an unprivileged uid can still lazily import from the standard
library even when the Python lives under a private home (pyenv under /root).
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from . import linux

SYSTEM_DIRS = ("/usr", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin")
DEVICES = ("null", "zero", "full", "random", "urandom")
PRIVATE_TMP_CHOICES = ("/tmp", "/var/tmp", "/.private-tmp")


def python_dirs(secrets: list[str]) -> list[str]:
    """Directories Python needs: its prefixes and import paths, minus any that hold or sit inside a secret."""
    wanted = {sys.base_prefix, sys.prefix, *[p for p in sys.path if p and os.path.isdir(p)]}
    keep = []
    for p in sorted(os.path.realpath(x) for x in wanted):
        if any(inside(s, p) for s in secrets) and not inside(p, sys.prefix):
            continue  # e.g. the repository root put on sys.path by an editable install
        if not any(inside(p, k) for k in keep):
            keep.append(p)
    return keep


def enter_secret_free_root(secrets: list[str], keep_proc: bool = False) -> str:
    """Move the calling process (root) into a fresh mount namespace whose root holds no secret. Returns the
    directory where each worker gets its private tmpfs: /tmp, unless Python itself lives under it (a checkout in
    /tmp), in which case /var/tmp (or /.private-tmp) so the private mount never hides the interpreter."""
    secrets = [os.path.realpath(s) for s in secrets]
    linux.unshare(linux.CLONE_NEWNS)
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    new = tempfile.mkdtemp(prefix="autograder-root-")
    linux.mount("tmpfs", new, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, "mode=0755,size=8m")
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            os.symlink(os.readlink(path), new + path)
        elif os.path.isdir(path):
            _bind_readonly(path, new + path)
    kept = python_dirs(secrets)
    for path in kept:
        _bind_readonly(path, new + path)
    for secret in secrets:  # a secret inside something we kept (an installed package's data): hide it
        if any(inside(secret, k) for k in kept) and os.path.isdir(new + secret):
            linux.mount("tmpfs", new + secret, "tmpfs", linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV, "size=4k")
    os.makedirs(new + "/dev", mode=0o755)
    for name in DEVICES:
        open(f"{new}/dev/{name}", "w").close()
        linux.mount(f"/dev/{name}", f"{new}/dev/{name}", None, linux.MS_BIND)
    private_tmp = next(d for d in PRIVATE_TMP_CHOICES if not any(inside(k, d) for k in kept))
    for mountpoint in ("/proc", private_tmp, "/.old"):
        os.makedirs(new + mountpoint, mode=0o755, exist_ok=True)
    if keep_proc:  # inside a user namespace a fresh /proc may be mounted only where one is already visible
        linux.mount("/proc", new + "/proc", None, linux.MS_BIND | linux.MS_REC)
    linux.pivot_root(new, new + "/.old")
    os.chdir("/")
    linux.umount("/.old")
    os.rmdir("/.old")
    linux.mount(None, "/", None, linux.MS_REMOUNT | linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV)
    return private_tmp


def _bind_readonly(source: str, target: str) -> None:
    Path(target).mkdir(parents=True, exist_ok=True, mode=0o755)
    linux.mount(source, target, None, linux.MS_BIND | linux.MS_REC)
    linux.mount(None, target, None, linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV
                | _kept_flags(source))


def _kept_flags(path: str) -> int:
    """The source mount's noexec and atime flags: inside a user namespace a remount may add restrictions to a
    mount it inherited but never drop these (they are locked), so they are passed on as they are."""
    flags = os.statvfs(path).f_flag
    kept = {os.ST_NOEXEC: linux.MS_NOEXEC, os.ST_NOATIME: linux.MS_NOATIME, os.ST_NODIRATIME: linux.MS_NODIRATIME,
            os.ST_RELATIME: linux.MS_RELATIME}
    return sum(ms for st, ms in kept.items() if flags & st)


def inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")
