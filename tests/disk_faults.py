"""Real file systems that misbehave, for durability tests: a loop-mounted ext4 image
with `errors=remount-ro` that ext4's own error path turns read-only (and e2fsck
repairs), and a small tmpfs that fills up. Mounting needs root and a loop device: the
fixtures skip, saying why, where the machine cannot."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

_TIMEOUT_S = 60


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)


def _need_root(what: str) -> None:
    if os.geteuid() != 0:
        pytest.skip(f"{what} needs root")


@contextlib.contextmanager
def tmpfs(mount_point: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's syntax: 64k, 8m) at `mount_point`, unmounted after."""
    _need_root("mounting a tmpfs")
    mount_point.mkdir(parents=True, exist_ok=True)
    done = _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(mount_point))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        _run("umount", "-l", str(mount_point))


@dataclass
class Ext4:
    """An ext4 file system in `image`, mounted at `mount_point` through `device`."""

    image: Path
    mount_point: Path
    device: str = ""

    @property
    def mounted(self) -> bool:
        return bool(self.device)

    def mount(self) -> None:
        done = _run("losetup", "--find", "--show", str(self.image))
        if done.returncode != 0:
            pytest.skip(f"no loop device here: {done.stderr.strip()}")
        device = done.stdout.strip()
        mounted = _run(
            "mount", "-t", "ext4", "-o", "errors=remount-ro", device, str(self.mount_point)
        )
        if mounted.returncode != 0:
            _run("losetup", "-d", device)
            pytest.skip(f"cannot mount an ext4 image here: {mounted.stderr.strip()}")
        self.device = device

    def unmount(self) -> None:
        if not self.device:
            return
        if _run("umount", str(self.mount_point)).returncode != 0:
            # Still in use (a process that outlived its test): detach it from the tree
            # now; the kernel frees the loop device once the last user is gone.
            _run("umount", "-l", str(self.mount_point))
        _run("losetup", "-d", self.device)
        self.device = ""

    def trigger_error(self) -> None:
        """Make ext4 hit an error, as a failing disk or a damaged block would: with
        errors=remount-ro it aborts its journal and goes read-only."""
        path = Path("/sys/fs/ext4") / Path(self.device).name / "trigger_fs_error"
        path.write_text("durability test\n")
        probe = self.mount_point / ".probe"
        try:
            probe.write_text("x")
        except OSError:
            return
        probe.unlink()
        raise AssertionError(f"{self.mount_point} is still writable after an ext4 error")

    def repair(self) -> str:
        """e2fsck -fy on the unmounted image, as an operator would; its output."""
        assert not self.device, "unmount before repairing"
        done = _run("e2fsck", "-fy", str(self.image))
        # 0: clean, 1: errors corrected, 2: corrected and reboot advised; 4+ failed.
        assert done.returncode < 4, f"e2fsck failed ({done.returncode}): {done.stdout}"
        return done.stdout


@contextlib.contextmanager
def ext4(base: Path, size_mb: int = 32) -> Iterator[Ext4]:
    """A fresh ext4 image mounted with errors=remount-ro (skips where it cannot be
    made: no root, no mkfs.ext4, no loop device, no trigger_fs_error)."""
    _need_root("mounting an ext4 image")
    for tool in ("mkfs.ext4", "e2fsck", "losetup"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (e2fsprogs, util-linux)")
    image = base / "fs.img"
    with image.open("wb") as f:
        f.truncate(size_mb * 1024 * 1024)
    made = _run("mkfs.ext4", "-q", "-F", str(image))
    if made.returncode != 0:
        pytest.skip(f"mkfs.ext4 failed: {made.stderr.strip()}")
    mount_point = base / "mnt"
    mount_point.mkdir()
    fs = Ext4(image, mount_point)
    fs.mount()
    try:
        trigger = Path("/sys/fs/ext4") / Path(fs.device).name / "trigger_fs_error"
        if not trigger.exists():
            pytest.skip(f"this kernel has no {trigger} to make ext4 fail")
        yield fs
    finally:
        fs.unmount()
