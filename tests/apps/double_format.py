"""The native observer's double formatting (put_double in ops/observer.cpp, hand-rolled because
a stream cost more than the rest of an operator's record) against torch's own printing of the
same IValue, which is what torch.profiler writes in `Concrete Inputs`.

    python3 double_format.py OBSERVER_CPP

Builds observer.cpp with a checker appended (the observer's flags, build.py) and prints one
JSON line: how many doubles were checked and how many printed differently.
"""
import ctypes
import json
import os
import sys
import tempfile

import torch

CHECK = r"""
#include <cstring>
#include <random>
#include <sstream>

extern "C" __attribute__((visibility("default"))) long cuprof_check_doubles(long* checked) {
  std::vector<double> values = {0.0, -0.0, 1.0, -2.0, 0.5, 1e-6, 0.1, 1.0 / 3, 1e10, 1e10 + 0.5,
      12345678901.0, 9.2233720368547758e18, -9.2233720368547758e18, 9.5e18, 1e19, -1e19, 1e300,
      -1e-300, 5e-324, INFINITY, -INFINITY, NAN, -NAN, 0.7071067811865476, 1e16, 123456.0};
  std::mt19937_64 random(1);
  for (int i = 0; i < 200000; ++i) {
    uint64_t bits = random();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    values.push_back(d);  // any bit pattern: NaN payloads, subnormals, huge and tiny values
    values.push_back(static_cast<double>(random() % 100000) / 1000.0);  // model-like scalars
  }
  long bad = 0;
  Buf mine;
  for (double d : values) {
    std::ostringstream torch_printed;
    torch_printed << c10::IValue(d);
    mine.clear();
    put_double(mine, d);
    if (torch_printed.str() != std::string(mine.data(), mine.size())) ++bad;
  }
  *checked = static_cast<long>(values.size());
  return bad;
}
"""

builder = {}
here = os.path.dirname(os.path.abspath(sys.argv[1]))
with open(os.path.join(here, "build.py")) as f:
    exec(f.read(), builder)
with open(sys.argv[1]) as f:
    # The checker reaches the observer's internal functions from the same translation unit.
    source = f.read() + CHECK
out = os.path.join(tempfile.mkdtemp(), "check.so")
builder["_compile"](builder["_torch_build"](torch), source, out, out + ".log")
lib = ctypes.CDLL(out)
lib.cuprof_check_doubles.restype = ctypes.c_long
checked = ctypes.c_long(0)
bad = lib.cuprof_check_doubles(ctypes.byref(checked))
print(json.dumps({"checked": checked.value, "mismatches": bad}))
