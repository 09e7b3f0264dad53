"""The Recording: the file ``record`` writes and every later stage reads."""

from dpuprof.recording.reader import DEFAULT_NAME, Recording, find_default, load
from dpuprof.recording.schema import SCHEMA_VERSION

__all__ = ["DEFAULT_NAME", "Recording", "SCHEMA_VERSION", "find_default", "load"]
