"""`python -m cuprof ARGS...`: runs the `cuprof` command installed with this package."""

import os
import shutil
import sys
import sysconfig

from . import LIBRARY


def _command():
    """The `cuprof` executable pip put in this package's scheme's scripts directory."""
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = []
    for scheme in sysconfig.get_scheme_names():
        paths = sysconfig.get_paths(scheme)
        if os.path.commonpath([paths["purelib"], here]) == paths["purelib"]:
            dirs.append(paths["scripts"])
    dirs += [sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]
    for d in dirs:
        exe = os.path.join(d, "cuprof")
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            return exe
    return shutil.which("cuprof")


def main():
    exe = _command()
    if exe is None:
        sys.stderr.write(
            "cuprof: the cuprof command installed with this package is missing: reinstall it (pip install --force-reinstall cuprof)\n"
        )
        return 1
    if os.path.isfile(LIBRARY):
        # The library of this very package, whichever scheme it was installed in.
        os.environ.setdefault("CUPROF_LIB", LIBRARY)
    os.execv(exe, [exe, *sys.argv[1:]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
