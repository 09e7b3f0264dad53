"""Offload projection: a Recording plus a DPU profile -> a Projection (docs/projection-model.md).

Pure functions over DataFrames (no printing, no file I/O except the profile loader):

- ``profiles``: load and validate DPU profiles (TOML, every parameter sourced);
- ``inputs``: the DataFrames the model reads (``from_recording``);
- ``features``: CPU demand per subcategory, offload counts, stack-based shares;
- ``codecs``: measured cipher/codec bytes, calls and direction split (codec_calls, schema v2);
- ``accelerometer``: the Accelerometer equations (sync, sync-OS, async);
- ``offload_rows``: slicing subcategories among mechanisms and evaluating each slice;
- ``capacity``: demand at the post-offload rate beyond the card's engines/cores stays on the host;
- ``outcomes``: per-category totals, cores for AI, speedup range;
- ``allreduce``: alpha-beta ring, tree and hierarchical all-reduce at N nodes, TCP against RDMA;
- ``sweep``: one mechanism's parameter swept (--sweep) or set (--set), with flat sweeps explained;
- ``assemble``: assemble the JSON-ready dict (docs/projection-contract.md).
"""

import sys as _sys
import types as _types

from dpuprof.lazyexports import lazy_exports

#: name -> the submodule it comes from. Imported on first use (PEP 562): importing the whole model
#: (pydantic profile schema, the assembler) adds a few tenths of a second to a command that needs
#: one part of it.
_LAZY = {"ProjectionInput": "inputs", "from_recording": "inputs", "Profile": "profiles",
         "known_profiles": "profiles", "load_profile": "profiles", "PROJECTION_VERSION": "assemble",
         "build_projection": "assemble"}

_SUBMODULES = ("inputs", "profiles", "assemble")

__all__ = ["PROJECTION_VERSION", "Profile", "ProjectionInput", "from_recording", "known_profiles",
           "load_profile", "build_projection"]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _SUBMODULES, __all__)


class _CallableModule(_types.ModuleType):
    """``dpuprof.project`` is this package and, for notebooks, a function too:
    ``dpuprof.project(run, "bluefield-3")`` (dpuprof.api.project), however it was first imported."""

    def __call__(self, run, dpu: str = "bluefield-3", **options):
        from dpuprof.api import project as api_project

        return api_project(run, dpu, **options)


_sys.modules[__name__].__class__ = _CallableModule
