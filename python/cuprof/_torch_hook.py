"""`cuprof.install()`: `torch.profiler.profile` becomes `cuprof.profile` in this process, now
if torch.profiler is imported, else the moment it is (an import hook), so a program or a tool
written against torch.profiler records with cuprof unchanged."""

import importlib.abc
import sys

#: torch's own `torch.profiler.profile`, once replaced.
TORCH_PROFILE = None


def install():
    module = sys.modules.get("torch.profiler")
    if module is not None:
        _patch(module)
        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def _patch(module):
    global TORCH_PROFILE
    from ._profile import profile

    current = getattr(module, "profile", None)
    if current is profile:
        return
    TORCH_PROFILE = current
    module.profile = profile


class _Finder(importlib.abc.MetaPathFinder):
    """Finds `torch.profiler` through the other finders and patches it once it is executed."""

    def find_spec(self, name, path, target=None):
        if name != "torch.profiler":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        _patch(module)
