"""Views derived from one Recording, computed once per Recording however many sections ask.

The HTML report asks for the per-step view and the kernel-by-cause frame twice each (its own
sections, then the JSON copy of the data it embeds); each is a pure function of the recording, so
the second ask gets the first answer. Results are kept only while the Recording lives (weakly
keyed), and callers must treat them as read-only.
"""

from __future__ import annotations

import functools
import weakref


def per_recording(fn):
    """``fn(rec)`` computed once per Recording object ``rec`` (by identity)."""
    cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @functools.wraps(fn)
    def wrapper(rec):
        try:
            return cache[rec]
        except KeyError:
            pass
        except TypeError:  # not weakly referable: nothing to key on, so no caching
            return fn(rec)
        out = cache[rec] = fn(rec)
        return out

    wrapper.cache = cache
    return wrapper
