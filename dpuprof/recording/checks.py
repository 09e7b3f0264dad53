"""Checks every value the reader takes from a Recording file: damage is one clear line
(``UserError``), never a traceback or a silently wrong number.
"""

from __future__ import annotations

from dpuprof.errors import UserError

#: Largest magnitude accepted for a number in a table or the metadata: 2**53, where floats stop being
#: exact integers (8 PiB of bytes per interval); larger values are damage, and summing them would
#: overflow 64-bit integers.
MAX_ABS = float(2 ** 53)

# Columns whose values must be text (everything else must be numbers).
_TEXT_COLUMNS = {"comm", "cmdline", "category", "subcategory", "folded", "vector", "dev", "op",
                 "direction", "protocol", "event", "field", "kind", "state", "lib", "func", "cgroup", "cause",
                 "program"}


def fail(path, why: str):
    """Raise the one-line error for a damaged ``path``."""
    raise UserError(f"{path}: {why}")


def check_types(path, table, df):
    """``df`` (one table read from ``path``) with text columns as str ("" for NULL) and the rest as
    numbers (NaN for NULL where a column allows missing values); damage raises ``UserError``."""
    import pandas as pd  # noqa: PLC0415 -- pandas: the recorder and agent import dpuprof.recording without it

    from pandas.api.types import infer_dtype, is_bool_dtype, is_numeric_dtype  # noqa: PLC0415 -- pandas: the recorder and agent import dpuprof.recording without it

    for col in df.columns:
        s = df[col]
        if col in _TEXT_COLUMNS:
            # SQL NULL reads as None, or as NaN where a whole column is NULL: both are missing.
            # infer_dtype is one C pass; the per-value check only runs where it finds other types.
            if infer_dtype(s, skipna=True) not in ("string", "empty") and not s.map(
                    lambda v: v is None or isinstance(v, str) or (isinstance(v, float) and v != v)).all():
                fail(path, f"damaged table {table}: column {col} holds non-text values")
            df[col] = s.fillna("")
            continue
        # pandas reads SQL NULL in a numeric column as NaN (SQLite itself stores NaN as NULL), so
        # NaN is "missing" here; whether missing is allowed is checked below per column. A column
        # pandas typed int64/float64 holds only numbers (checked at once); an object column (text,
        # blobs, integers beyond int64) is checked value by value, exactly, before floats round.
        if is_numeric_dtype(s) and not is_bool_dtype(s):
            if (s.abs() > MAX_ABS).any():
                fail(path, f"damaged table {table}: column {col} holds values out of range (beyond 2**53)")
        else:
            if not s.map(lambda v: v is None or isinstance(v, (int, float))).all():
                fail(path, f"damaged table {table}: column {col} holds non-numeric values")
            if not s.map(lambda v: v is None or v != v or abs(v) <= MAX_ABS).all():
                fail(path, f"damaged table {table}: column {col} holds values out of range (beyond 2**53)")
        num = pd.to_numeric(df[col], errors="coerce")
        if col not in ("ppid", "first_seen", "last_seen", "util_pct", "mem_used_bytes", "ns_pid",
                       "mem_total_bytes", "sm_util_pct", "waits_s") and num.isna().any():
            fail(path, f"damaged table {table}: column {col} has missing values")
        if col in ("samples", "cpu_s", "bytes", "ios", "count", "packets", "calls", "time_ns",
                   "seconds", "user_s", "system_s", "on_cpu_ns", "runq_ns", "off_cpu_ns", "ns",
                   "duration_ns", "runs", "run_ns", "waits_s") and (num < 0).any():
            fail(path, f"damaged table {table}: column {col} has negative values")
        df[col] = num
    return df
