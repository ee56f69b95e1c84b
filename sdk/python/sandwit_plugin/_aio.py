"""Awaitables for host calls, which complete at once: a method may `await`
them (as Nekro plugins do) or call `.result()` from a plain function."""

from __future__ import annotations

from typing import Any, Callable, Coroutine, Generator, Generic, TypeVar

T = TypeVar("T")


class Ready(Generic[T]):
    """The outcome of a host call made when it was created."""

    __slots__ = ("_value", "_error")

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self._value = value
        self._error = error

    @classmethod
    def of(cls, call: Callable[[], T]) -> "Ready[T]":
        """Makes the call now and keeps its value or exception."""
        try:
            return cls(call())
        except Exception as e:  # handed to whoever awaits it
            return cls(error=e)

    def result(self) -> T:
        """The value, or the call's exception raised."""
        if self._error is not None:
            raise self._error
        return self._value

    def __await__(self) -> Generator[Any, None, T]:
        return self.result()
        yield  # makes this a generator


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Runs a coroutine that awaits only host calls (which never suspend)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError(
        "the method awaited something other than a sandwit call (e.g. asyncio.sleep); "
        "a plugin has no event loop"
    )
