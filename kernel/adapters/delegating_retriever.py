"""A retriever that wraps another and offers exactly what the wrapped one offers.

The engine decides how to rank from what its retriever has: ``retrieve_ranked`` makes it take
the retriever's own order, ``ranking_weights`` sets the weights it ranks ``retrieve``'s
candidates with, and neither means the kernel's defaults. A wrapper that defines only
``retrieve`` hides both, and turns silently rank differently from the store's own recall.
Subclass this instead: every attribute the subclass does not define (``retrieve``,
``retrieve_ranked``, ``ranking_weights``, the store's own) is the wrapped retriever's.
"""

from __future__ import annotations

from typing import Any

from affect_memory.kernel.errors import InvalidInputError

__all__ = ["DelegatingRetriever"]

_METHODS = ("retrieve", "retrieve_ranked")


class DelegatingRetriever:
    """Wraps a retriever, forwarding every attribute it does not override to it.

    Override ``retrieve`` or ``retrieve_ranked`` to observe or adjust a call (calling the same
    method of ``wrapped``); override only what the wrapped retriever has, or the engine would
    take a path the wrapped one cannot serve (refused on construction).
    """

    def __init__(self, wrapped: object) -> None:
        """Wrap ``wrapped``; refuse an override of a retrieval method it lacks."""
        for name in _METHODS:
            overridden = any(name in vars(cls) for cls in type(self).__mro__[:-2])
            if overridden and not callable(getattr(wrapped, name, None)):
                raise InvalidInputError(
                    f"{type(self).__name__} overrides {name} but the retriever it wraps "
                    f"({wrapped!r}) has no {name}"
                )
        self.__wrapped__ = wrapped

    @property
    def wrapped(self) -> Any:
        """The retriever this one delegates to."""
        return self.__wrapped__

    def __getattr__(self, name: str) -> Any:
        """The wrapped retriever's attribute (only asked for what this object lacks)."""
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        wrapped = self.__dict__.get("__wrapped__")
        if wrapped is None:
            raise AttributeError(name)
        return getattr(wrapped, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__wrapped__!r})"
