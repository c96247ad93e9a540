"""A step's figures from Python (`cuprof.step(tokens=..., kv_len=...)`): the arguments checked
as the library checks them (raising, as torch does for bad arguments), then attached to the
running step through `cuprof_step_tokens` and `cuprof_step_figure`."""

import math
import numbers

# The library's bounds (tracer/core/src/figures.rs).
MAX_FIGURES = 16
MAX_NAME = 64


def check(tokens, figures):
    """`(tokens, [(name bytes, value), ...])` of a step's arguments, else TypeError/ValueError
    naming the argument."""
    if tokens is not None:
        if isinstance(tokens, bool) or not isinstance(tokens, numbers.Integral):
            raise TypeError(f"tokens must be an int, got {tokens!r}")
        if tokens < 0 or tokens >= 1 << 64:
            raise ValueError(f"tokens must be 0 or more (and under 2**64), got {tokens!r}")
    if len(figures) > MAX_FIGURES:
        raise ValueError(f"a step keeps at most {MAX_FIGURES} named figures, got {len(figures)}")
    out = []
    for name, value in figures.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"a step figure needs a non-empty name, got {name!r}")
        raw = name.encode("utf-8", "replace")
        if len(raw) > MAX_NAME or "\0" in name:
            raise ValueError(f"step figure name {name[:MAX_NAME]!r}... must be at most {MAX_NAME} bytes, without NUL")
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"step figure {name} must be a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"step figure {name} must be finite, got {value!r}")
        out.append((raw, value))
    return tokens, out


def attach(lib, tokens, pairs):
    """Attaches checked figures to the running step of the library `lib`; a library without
    `cuprof_step_figure` (an older build) gets the tokens only."""
    if tokens is not None:
        lib.cuprof_step_tokens(tokens)
    if pairs and not hasattr(lib, "cuprof_step_figure"):
        from . import _native

        _native.say(
            "the libcuprof.so in this process predates step figures (an older build?): only tokens are recorded; run the program with this package's `cuprof run`",
            key="figures-old",
        )
        return
    for name, value in pairs:
        lib.cuprof_step_figure(name, value)
