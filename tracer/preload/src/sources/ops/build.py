# Builds cuprof's native operator observer (observer.cpp) against one torch: the one the traced
# program imported (recorder.py calls _cuprof_observer(torch, ...)) or, ahead of time, the one a
# given Python imports (`cuprof observer build`, which runs this file as a script). The result
# is cached per torch build under CUPROF_CACHE (default ~/.cache/cuprof): ranks that start at
# once take a lock, one builds, the others wait for it and load what it built.
#
# Every failure is an ObserverUnavailable whose text is one line: the cause and the remedy.
import os

_OBSERVER_NAME = "libcuprof_observer.so"
# Past this, a rank stops waiting for another's build and records through the fallback.
_LOCK_WAIT_S = 180.0
_BUILD_TIMEOUT_S = 600.0


class ObserverUnavailable(Exception):
    pass


def _dynamic_tls(source):
    """The source of the observer's global-dynamic build. Its thread-local is initial-exec
    (observer.cpp, t_bufs), which needs a few bytes of the static TLS glibc keeps spare for
    libraries loaded later; where a process's libraries took all of it, this build loads
    instead, its two thread-local reads per operator a call each. Built only where needed, and
    ahead of time by `cuprof observer build`."""
    return "#define CUPROF_DYNAMIC_TLS 1\n" + source


def _cache_root():
    root = os.environ.get("CUPROF_CACHE")
    if root:
        return root
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cuprof")


def _torch_build(torch):
    """What identifies a torch build: version, where it is, its C++ ABI, its library file."""
    here = os.path.dirname(os.path.realpath(torch.__file__))
    lib = os.path.join(here, "lib")
    include = os.path.join(here, "include")
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    try:
        st = os.stat(os.path.join(lib, "libtorch_cpu.so"))
    except OSError:
        raise ObserverUnavailable(
            "torch %s at %s has no lib/libtorch_cpu.so: reinstall torch from its wheel"
            % (torch.__version__, here)
        )
    if not os.path.isfile(os.path.join(include, "ATen", "record_function.h")):
        raise ObserverUnavailable(
            "torch %s at %s ships no C++ headers (include/ATen/record_function.h): install a "
            "torch wheel that has them" % (torch.__version__, here)
        )
    return {
        "version": str(torch.__version__),
        "dir": here,
        "lib": lib,
        "include": include,
        "abi": abi,
        "stamp": (st.st_size, st.st_mtime_ns),
    }


def _key(build, source):
    import hashlib

    h = hashlib.sha256()
    h.update(repr((build["version"], build["dir"], build["abi"], build["stamp"])).encode())
    h.update(source.encode())
    safe = "".join(c if c.isalnum() or c in ".+-" else "_" for c in build["version"])
    return "torch-%s-%s" % (safe, h.hexdigest()[:16])


def _compiler():
    import shlex
    import shutil

    cxx = shlex.split(os.environ.get("CXX") or "c++")
    if not cxx or shutil.which(cxx[0]) is None:
        raise ObserverUnavailable(
            "no C++ compiler (%s) on PATH to build it: install one (Debian: g++), or build "
            "it ahead of time with `cuprof observer build --python PYTHON` on a machine that "
            "has one and share CUPROF_CACHE" % (cxx[0] if cxx else "c++")
        )
    return cxx


def compile_flags(include, abi):
    """The compiler flags for observer.cpp against the torch whose headers are in `include`
    (the C++ ABI must be the one that torch was built with). The tests compile the source with
    these against torch versions they cannot import."""
    flags = [
        "-O2", "-std=c++20", "-fPIC", "-shared", "-DNDEBUG", "-fvisibility=hidden",
        "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi, "-w",
        "-isystem", include, "-isystem", os.path.join(include, "torch", "csrc", "api", "include"),
    ]
    util = os.path.join(include, "torch", "csrc", "profiler", "util.h")
    record_function_h = _text(os.path.join(include, "ATen", "record_function.h"))
    if os.path.isfile(util):
        flags.append("-DCUPROF_WITH_FLOPS")
        util_h = _text(util)
        # Keyword inputs (`_RecordFunctionFast`'s: a Triton launch's kernel file, grid, stream...;
        # torch 2.5 and later), written as torch.profiler writes them: torch 2.15 keeps its
        # metadata typed (kineto_metadata.h) and formats it itself; older torch prints each value
        # with its ivalueToStr.
        if "kwinputs()" in record_function_h and "ivalueToStr" in util_h:
            flags.append("-DCUPROF_WITH_KWINPUTS")
            # Read in place where the member is as the observer expects it (torch's accessor
            # copies the map).
            if "std::unordered_map<std::string, IValue> kwinputs_;" in record_function_h:
                flags.append("-DCUPROF_WITH_KWINPUTS_MEMBER")
            if os.path.isfile(os.path.join(include, "torch", "csrc", "profiler", "kineto_metadata.h")):
                flags.append("-DCUPROF_WITH_TYPED_KWINPUTS")
        # A collective's metadata, as torch.profiler records it: torch's saveNcclMeta and the
        # RecordFunction flag that marks `record_param_comms` (torch 2.1 and later).
        if "saveNcclMeta" in util_h and "isNcclMeta" in record_function_h:
            flags.append("-DCUPROF_WITH_COMMS_META")
            # torch 2.15 keeps the values typed, as torch.profiler writes them.
            if "saveNcclMetaTyped" in util_h and "ncclMetaToStringMap" in util_h:
                flags.append("-DCUPROF_WITH_TYPED_COMMS_META")
    return flags


def _text(path):
    """A header's text, empty when it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _compile(build, source, out, log):
    import subprocess

    cxx = _compiler()
    src = out + ".cpp"
    with open(src, "w") as f:
        f.write(source)
    flags = compile_flags(build["include"], build["abi"])
    link = ["-L", build["lib"], "-Wl,-rpath," + build["lib"], "-lc10", "-ltorch_cpu"]
    cmd = cxx + flags + [src, "-o", out] + link
    try:
        with open(log, "w") as f:
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=_BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ObserverUnavailable("%s took over %d s to build it" % (cxx[0], _BUILD_TIMEOUT_S))
    finally:
        try:
            os.unlink(src)
        except OSError:
            pass
    if r.returncode != 0:
        first = ""
        try:
            with open(log, errors="replace") as f:
                lines = [l.strip() for l in f if "error" in l]
            first = lines[0] if lines else ""
        except OSError:
            pass
        raise ObserverUnavailable(
            "%s failed to build it against torch %s (%s; full log: %s)"
            % (cxx[0], build["version"], first[:200] or "exit %d" % r.returncode, log)
        )


def _observer(torch, source, say=None):
    """The path of the observer built for this torch, building it if needed."""
    import errno
    import fcntl
    import time

    build = _torch_build(torch)
    root = _cache_root()
    where = os.path.join(root, "observer", _key(build, source))
    path = os.path.join(where, _OBSERVER_NAME)
    if os.path.isfile(path):
        return path
    try:
        os.makedirs(where, exist_ok=True)
        lock = open(os.path.join(where, ".lock"), "a")
    except OSError as e:
        raise ObserverUnavailable(
            "cache directory %s is not writable (%s): set CUPROF_CACHE to a writable directory"
            % (root, e.strerror or e)
        )
    with lock:
        deadline = time.monotonic() + _LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise ObserverUnavailable("cannot lock %s (%s)" % (where, e.strerror))
                if time.monotonic() > deadline:
                    raise ObserverUnavailable(
                        "another process has been building it in %s for %d s" % (where, _LOCK_WAIT_S)
                    )
                time.sleep(0.05)
        try:
            if os.path.isfile(path):
                return path
            if say is not None:
                say("building the native operator observer for torch %s (once; cached in %s)"
                    % (build["version"], where))
            tmp = "%s.%d.tmp" % (path, os.getpid())
            try:
                _compile(build, source, tmp, os.path.join(where, "build.log"))
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            return path
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


if __name__ == "__main__":
    # `cuprof observer build`: the observer's source comes on stdin after this file.
    import sys

    try:
        import torch
    except Exception as e:
        sys.stderr.write("cuprof: %s cannot import torch (%s)\n" % (sys.executable, e))
        sys.exit(1)
    source = os.environ["CUPROF_OBSERVER_SOURCE"]
    try:
        def say(m):
            sys.stderr.write("cuprof: " + m + "\n")

        print(_observer(torch, source, say=say))
        _observer(torch, _dynamic_tls(source), say=say)
    except ObserverUnavailable as e:
        sys.stderr.write("cuprof: the native operator observer cannot be built: %s\n" % e)
        sys.exit(1)
