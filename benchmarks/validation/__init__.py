"""The projection's validation benchmark (issue 10, section 3), driven by
``benchmarks/validate_projection.py``.

- ``cells``: the matrix: each cell's baseline (A) and emulated offload (B) of examples/train_ddp.py;
- ``runner``: the load check, interleaved A/B pairs, the baseline's recording and its projection;
- ``stats``: median of per-pair ratios and its bootstrap CI;
- ``report``: judging each cell against the targets, VALIDATION.md and validation.json.
"""
