"""A copy of the project with one file changed, where a mutant's tests run.

The copy holds the files git knows (tracked or untracked, not ignored), so the tests see the
project as it is; its ``build`` is a link to one shared folder, so unmutated Verilog and
simulator builds are made once per campaign. Nothing of the project's own tree is changed.
"""

import shutil
import subprocess
from pathlib import Path

__all__ = ["project_files", "Sandbox"]


def project_files(root):
    """Relative paths of the project's files (git: tracked and untracked, ignores honoured)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=root, check=True, capture_output=True).stdout.decode()
    return [p for p in out.split("\0") if p and (Path(root) / p).is_file()]


class Sandbox:
    """``Sandbox(root, files, where, build)``: ``files`` of ``root`` copied to ``where``, ``where/build``
    linking to ``build``. :meth:`mutate` writes one file's mutated text, :meth:`restore` the
    original back."""

    def __init__(self, root, files, where, build):
        self.root, self.where = Path(root), Path(where)
        if self.where.exists():
            shutil.rmtree(self.where)
        for rel in files:
            dst = self.where / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.root / rel, dst)
        Path(build).mkdir(parents=True, exist_ok=True)
        (self.where / "build").symlink_to(Path(build).resolve(), target_is_directory=True)

    def mutate(self, rel, text):
        (self.where / rel).write_text(text)

    def restore(self, rel):
        shutil.copy2(self.root / rel, self.where / rel)

    def remove(self):
        shutil.rmtree(self.where, ignore_errors=True)
