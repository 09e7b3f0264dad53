"""A mapping of bounded size that forgets its least recently used entries.

The recorder runs for weeks as ``dpuprof agent``: anything it caches by stack, address or file
must stop growing somewhere. ``functools.lru_cache`` bounds a function's results but cannot say
what it dropped, and the stack interning must say (the rotating writer keeps a copy of each stack
row until the drainer lets the id go: dpuprof/agent/rotate.py), so this is the standard library's
OrderedDict used as an LRU list (no new dependency for ~20 lines).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Hashable


class Lru:
    """At most ``limit`` entries; ``get`` and ``put`` make an entry the most recently used, and
    ``put`` returns the (key, value) pairs it pushed out, oldest first."""

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError("an Lru holds at least one entry")
        self.limit = limit
        self._items: OrderedDict = OrderedDict()

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value of ``key`` (now the most recently used), or ``default``."""
        try:
            value = self._items[key]
        except KeyError:
            return default
        self._items.move_to_end(key)
        return value

    def put(self, key: Hashable, value: Any) -> list[tuple]:
        """Store ``key`` -> ``value`` as the most recently used; returns the evicted pairs."""
        self._items[key] = value
        self._items.move_to_end(key)
        out = []
        while len(self._items) > self.limit:
            out.append(self._items.popitem(last=False))
        return out

    def pop(self, key: Hashable, default: Any = None) -> Any:
        return self._items.pop(key, default)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def keys(self):
        """The keys, least recently used first."""
        return self._items.keys()


__all__ = ["Lru"]
