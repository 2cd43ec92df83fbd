"""Tier landlock: the worker's view of the filesystem without namespaces, enforced by Landlock (Linux >= 5.13).

Where no mount namespace can be made (root in a container under Docker's default seccomp profile: Gradescope,
Kubernetes), the secrets stay on disk. Instead each worker, before student code runs, restricts itself with a
Landlock ruleset that grants
- read access to the system directories and the Python installation (`rootfs.SYSTEM_DIRS`, `rootfs.python_dirs`),
  minus every secret inside them: a granted directory that holds a secret is granted entry by entry instead,
  leaving out the entry on the way to the secret (`view`, computed once in the zygote);
- read and write on /dev/null, zero, full, random and urandom;
- read access to its own /proc/<pid> (not to /proc: no other process is visible);
- everything inside its own private temporary directory (HOME and TMPDIR), made for its uid alone.
The course repository, the hidden references, the gradebook, other submissions, /tmp, /dev/shm, /sys and every other
process's /proc are then out of reach, whatever their permission bits. With ABI 4 TCP bind and connect are denied
too, and with ABI 6 so are abstract Unix sockets and signals to processes outside the worker (seccomp already denies
socket(2), and the worker's uid is its own).
"""
from __future__ import annotations

import os

from .rootfs import DEVICES, SYSTEM_DIRS, inside, python_dirs

try:
    import landlockpy as _ll
    _IMPORT_ERROR: str | None = None
except Exception as e:  # noqa: BLE001 (not installed, or an unusable platform)
    _ll, _IMPORT_ERROR = None, f"landlockpy unusable: {e}"

MAX_RULES = 4096  # a secret inside a huge directory would mean one rule per entry: refuse beyond this


def available() -> str | None:
    """Why Landlock cannot confine a worker here, or None when it can."""
    if _IMPORT_ERROR:
        return _IMPORT_ERROR
    if not _ll.supported():
        return "the kernel has no Landlock (CONFIG_SECURITY_LANDLOCK, or 'landlock' missing from the lsm= list)"
    return None


def abi() -> int:
    return _ll.abi_version() if _IMPORT_ERROR is None and _ll.supported() else 0


def view(secrets: list[str]) -> list[str]:
    """The paths a worker may read: system and Python directories, with each secret cut out of them."""
    secrets = [os.path.realpath(s) for s in secrets]
    granted: list[str] = []
    for top in [*SYSTEM_DIRS, *python_dirs(secrets)]:
        real = os.path.realpath(top)
        if os.path.exists(real) and not any(inside(real, g) for g in granted):
            granted += _without(real, secrets)
        if len(granted) > MAX_RULES:
            raise OSError(f"Landlock view: more than {MAX_RULES} rules to cut the secrets out of {top}")
    return granted


def _without(path: str, secrets: list[str]) -> list[str]:
    """`path` itself when no secret lies inside it, else its entries (recursively) minus the secrets."""
    if not any(inside(s, path) for s in secrets):
        return [path]
    out = []
    for entry in sorted(os.listdir(path)):
        full = os.path.join(path, entry)
        if full not in secrets and not os.path.islink(full):  # a link is reached through its target's own rule
            out += _without(full, secrets)
    return out


def restrict(readable: list[str], private_tmp: str) -> None:
    """In the worker, before its uid changes: allow `readable` (read only), the devices, its own /proc/<pid> and
    `private_tmp` (everything); deny every other file access, TCP, abstract Unix sockets and outside signals."""
    read_file = _ll.AccessFS.READ_FILE | _ll.AccessFS.EXECUTE
    with _ll.Ruleset(scoped=_ll.Scope.ABSTRACT_UNIX_SOCKET | _ll.Scope.SIGNAL) as rules:
        for path in readable:  # a rule on a file may hold only file rights (else EINVAL)
            rules.allow_path(path, read_file | _ll.AccessFS.READ_DIR if os.path.isdir(path) else read_file)
        for name in DEVICES:
            rules.allow_path(f"/dev/{name}", _ll.AccessFS.READ_FILE | _ll.AccessFS.WRITE_FILE)
        rules.allow_path(f"/proc/{os.getpid()}", _ll.AccessFS.READ_FILE | _ll.AccessFS.READ_DIR)
        rules.allow_path(private_tmp, _ll.fs_for_abi(rules.abi_version))
        rules.restrict()  # also sets no_new_privs


def make_private_tmp(base: str, uid: int) -> str:
    """`base`/w-<pid>: a directory for this worker alone (mode 0700, owned by its uid). `base` belongs to the grader,
    which removes each worker's directory once the worker is gone."""
    path = os.path.join(base, f"w-{os.getpid()}")
    os.mkdir(path, 0o700)
    if uid:
        os.chown(path, uid, uid)
    return path
