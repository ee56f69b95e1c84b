"""The application's own functions for a run: ``Host.run_start`` returns a
``ClientRun`` whose calls the application answers; ``Host.run`` and
``Host.run_async`` with ``functions={name: callable}`` answer them with the
callables.

Each call of such a function pauses the run (a durable pause: the host
keeps no interpreter waiting), and the answer resumes it: the code runs
again to the call without making any earlier call twice, then goes on with
the time and fuel it had left. The wait counts in no limit of the run's.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

if TYPE_CHECKING:
    from ._sandwit import AgentCtx, Cancel, Host, RunOutcome, Toolbox

# The provider the host names the run's own functions by (`paused["plugin"]`).
CLIENT = "client"


@dataclass(frozen=True)
class Call:
    """A call the code made of one of the run's functions, waiting for the
    application's answer: ``name(*args, **kwargs)``. ``call_id`` is the
    paused run's token (``Host.resume`` takes it too)."""

    name: str
    args: list[Any]
    kwargs: dict[str, Any]
    call_id: str = field(repr=False)


def call_of(outcome: RunOutcome) -> Call | None:
    """The call ``outcome`` waits at, if it paused at one of its functions."""
    paused = outcome.paused
    if outcome.status != "paused" or paused is None or paused["plugin"] != CLIENT:
        return None
    args = paused["args"]
    return Call(paused["method"], list(args["args"]), dict(args["kwargs"]), paused["token"])


class ClientRun:
    """A run of ``Host.run_start``: iterate for its calls, answer each with
    ``answer`` (a value) or ``fail`` (an exception, raised in the code with
    its type: a builtin one as itself, any other as a ``PluginError``
    subclass of its name) before the next; ``outcome`` is the run's once
    ``call`` is None. A run that pauses for a person instead (the policy's
    ``pause_for``) ends the iteration with that outcome. ``close`` (or
    leaving a ``with`` block) ends a run still waiting at a call, freeing
    its chat's place for a paused run."""

    def __init__(
        self,
        host: Host,
        outcome: RunOutcome,
        *,
        ctx: AgentCtx | None = None,
        plugins: Toolbox | None = None,
        on_event: Callable[..., object] | None = None,
        cancel: Cancel | None = None,
    ) -> None:
        self._host = host
        self._resume: dict[str, Any] = {
            "ctx": ctx,
            "plugins": plugins,
            "on_event": on_event,
            "cancel": cancel,
        }
        self.outcome: RunOutcome = outcome
        self.call: Call | None = call_of(outcome)

    def close(self) -> None:
        """Ends the run if it waits at a call, without answering: the call
        is never answered, and its token is spent (``Host.discard``)."""
        call, self.call = self.call, None
        if call is not None:
            self._host.discard(call.call_id, ctx=self._resume["ctx"])

    def __enter__(self) -> ClientRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Call]:
        while (call := self.call) is not None:
            yield call
            if self.call is call:
                raise RuntimeError(
                    f"the call of {call.name!r} was not answered: answer(value) or fail(exception)"
                )

    def answer(self, value: Any = None) -> None:
        """The waiting call returns ``value`` (a plain value, as a method's)."""
        self._went_on(self._host.answer(self._waiting().call_id, value, **self._resume))

    def fail(self, exception: BaseException) -> None:
        """The waiting call raises ``exception``'s type with its message."""
        self._went_on(self._host.resume(self._waiting().call_id, raise_=exception, **self._resume))

    def deny(self, reason: str) -> None:
        """The waiting call raises ``PluginError`` of kind ``denied``."""
        self._went_on(self._host.resume(self._waiting().call_id, deny=reason, **self._resume))

    def drive(self, functions: Mapping[str, Callable[..., Any]]) -> RunOutcome:
        """Answers every call with ``functions[name](*args, **kwargs)``:
        its value, or the exception it raised (a value that cannot cross
        raises ``TypeError`` in the code). The run's outcome."""
        for call in self:
            function = functions[call.name]
            try:
                value = function(*call.args, **call.kwargs)
            except Exception as e:
                self.fail(e)
            else:
                self.answer_or_fail(value)
        return self.outcome

    def answer_or_fail(self, value: Any) -> None:
        """``answer(value)``, or, for a value that cannot cross, the
        ``TypeError`` saying why raised in the code."""
        try:
            self.answer(value)
        except TypeError as e:
            self.fail(TypeError(f"{self._waiting().name} returned a value that cannot cross: {e}"))

    def _waiting(self) -> Call:
        if self.call is None:
            raise RuntimeError("the run waits at no call: it ended")
        return self.call

    def _went_on(self, outcome: RunOutcome) -> None:
        self.outcome = outcome
        self.call = call_of(outcome)

    def __repr__(self) -> str:
        return f"ClientRun(status={self.outcome.status!r}, call={self.call!r})"


async def drive_async(
    host: Host,
    started: Any,
    functions: Mapping[str, Callable[..., Any]],
    **resume: Any,
) -> RunOutcome:
    """``Host.run_async`` with ``functions``: awaits the run, then answers
    each call with its function's value (a coroutine's awaited here). The
    resumes run in a worker thread: their events reach ``on_event`` there."""
    import asyncio

    run = ClientRun(host, await started, **resume)
    while (call := run.call) is not None:
        function = functions[call.name]
        try:
            value = function(*call.args, **call.kwargs)
            if inspect.isawaitable(value):
                value = await value
        except Exception as e:
            await asyncio.to_thread(run.fail, e)
        else:
            await asyncio.to_thread(run.answer_or_fail, value)
    return run.outcome
