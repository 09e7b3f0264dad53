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
- ``assemble``: assemble the typed Projection (dpuprof.projection.schema, docs/projection-contract.md).

Importing any part of the package imports the whole model (0.8 s on the 2-CPU VM, against 0.3 s
for ``profiles`` alone): the commands that import it (``dpuprof project``, the agent's
projection) run all of it anyway.
"""

from dpuprof.project.assemble import PROJECTION_VERSION, build_projection
from dpuprof.project.inputs import ProjectionInput, from_recording
from dpuprof.project.profiles import Profile, known_profiles, load_profile

__all__ = ["PROJECTION_VERSION", "Profile", "ProjectionInput", "from_recording", "known_profiles",
           "load_profile", "build_projection"]
