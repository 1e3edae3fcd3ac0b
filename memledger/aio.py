"""``AsyncMemoryLedger``: every public verb of :class:`~memledger.api.MemoryLedger` as a coroutine.

::

    from memledger import AsyncMemoryLedger

    async with AsyncMemoryLedger(home="/tmp/demo") as ml:
        await ml.remember("u1", "I switched to hot lattes")
        print((await ml.profile("u1")).facts)

The ledger is synchronous (SQLite or PostgreSQL, an in-memory search index); each call runs it in a worker thread
(:func:`asyncio.to_thread`) so the event loop never blocks on the store, and calls are serialised: an
:class:`asyncio.Lock` queues the tasks on the loop, and a :class:`threading.RLock` held by the worker thread keeps a
cancelled task's call from overlapping the next one (cancelling the awaiting task does not stop a call already
running; the next call waits for it). One ledger object is never entered by two threads at once, as in the servers
(memledger/servers/ops.py). Any number of tasks may share one ``AsyncMemoryLedger``.

The coroutines are generated from ``MemoryLedger``'s public methods (:func:`public_methods`), so a verb added there
has its async twin here with the same signature and docstring; ``tests/test_async_api.py`` checks that none is
missing. Callbacks a verb takes (``ingest``'s and ``rebuild``'s ``on_progress``) are called in the worker thread.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ledger.errors import BadInput

T = TypeVar("T")


def public_methods(cls: type) -> list[str]:
    """The names of ``cls``'s public methods (its own and inherited; properties and ``_private`` names left out),
    sorted."""
    names = []
    for name in dir(cls):
        if name.startswith("_"):
            continue
        if inspect.isfunction(inspect.getattr_static(cls, name)):
            names.append(name)
    return sorted(names)


class Serialised:
    """Runs calls on one synchronous object in worker threads, one at a time (see the module docstring).

    ``open`` makes the object on first use (in a worker thread, under the lock); ``target`` is then the object.
    """

    def __init__(self, open: Callable[[], Any]) -> None:
        self._open = open
        self._target: Any = None
        self._thread_lock = threading.RLock()
        self._task_lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._closed = False

    def _queue(self) -> asyncio.Lock:
        """The lock queueing this event loop's tasks (a new one under another loop: a script may call
        ``asyncio.run`` several times on one object; the thread lock still keeps loops from overlapping)."""
        loop = asyncio.get_running_loop()
        if self._task_lock is None or self._task_lock[0] is not loop:
            self._task_lock = (loop, asyncio.Lock())
        return self._task_lock[1]

    def _locked(self, fn: Callable[[Any], T]) -> T:
        """In the worker thread: open the target if needed and call ``fn(target)`` under the thread lock."""
        with self._thread_lock:
            if self._closed:
                raise RuntimeError("closed (fix: open a new one)")
            if self._target is None:
                self._target = self._open()
            return fn(self._target)

    async def run(self, fn: Callable[[Any], T]) -> T:
        """``fn(target)`` in a worker thread, after every call started before it has finished."""
        async with self._queue():
            return await asyncio.to_thread(self._locked, fn)

    async def close(self, close: Callable[[Any], None]) -> None:
        """Close the target (if it was opened) with ``close(target)``, after every call started before; idempotent."""

        def shut() -> None:
            with self._thread_lock:
                if self._target is not None and not self._closed:
                    close(self._target)
                self._closed = True

        async with self._queue():
            await asyncio.to_thread(shut)


def async_twin(cls: type, name: str) -> Callable[..., Any]:
    """A coroutine function calling ``cls.name`` on the wrapped object through ``self._runner`` (a
    :class:`Serialised`), with the same signature and docstring (``functools.wraps``)."""
    method = getattr(cls, name)

    @functools.wraps(method)
    async def twin(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await self._runner.run(lambda target: getattr(target, name)(*args, **kwargs))

    twin.__qualname__ = f"Async{cls.__name__}.{name}"
    return twin


def _ledger_class() -> type:
    from .api import MemoryLedger

    return MemoryLedger


class AsyncMemoryLedger:
    """A :class:`~memledger.api.MemoryLedger` whose verbs are coroutines, safe to share between tasks.

    Args:
        home, dsn, schema, projection_mode, embedder, cjk_embedder, half_lives: as for ``MemoryLedger`` (the store
            is opened on ``async with`` or the first call, in a worker thread).
        ledger: an opened ``MemoryLedger`` to wrap instead (then the store arguments must be left out; ``close``
            closes it).

    Every public method of ``MemoryLedger`` is here as a coroutine with the same arguments and result
    (``await ml.remember(user, text)``, ``await ml.profile(user)``, ...), ``close()`` included. Use
    ``async with``, or ``await ml.close()`` when done.

    Raises:
        BadInput: ``ledger`` given together with store arguments; store arguments ``MemoryLedger`` refuses (raised
            by ``__aenter__`` or the first call).
        RuntimeError: a call after ``close()``.
    """

    def __init__(self, home: str | os.PathLike[str] | None = None, *, dsn: str | None = None,
                 schema: str | None = None, projection_mode: str | None = None, embedder: Any = None,
                 cjk_embedder: Any = None, half_lives: dict[str, float] | None = None, ledger: Any = None) -> None:
        store_args = {"home": home, "dsn": dsn, "schema": schema, "projection_mode": projection_mode,
                      "embedder": embedder, "cjk_embedder": cjk_embedder, "half_lives": half_lives}
        given = {k: v for k, v in store_args.items() if v is not None}
        if ledger is not None:
            if given:
                raise BadInput("ledger", f"given together with {', '.join(sorted(given))}",
                               "pass either an opened MemoryLedger as ledger= or the store arguments, not both")
            self._runner = Serialised(lambda: ledger)
        else:
            self._runner = Serialised(lambda: _ledger_class()(**given))

    @property
    def ledger(self) -> Any:
        """The wrapped ``MemoryLedger`` (None until opened). Calling it directly bypasses the serialisation: do so
        only when no coroutine of this object is running."""
        return self._runner._target

    async def open(self) -> AsyncMemoryLedger:
        """Open the store now (else the first call does). Returns self. Raises what ``MemoryLedger`` raises."""
        await self._runner.run(lambda target: None)
        return self

    async def close(self) -> None:
        """Close the store once every call started before has finished (``MemoryLedger.close``); idempotent."""
        await self._runner.close(lambda target: target.close())

    async def __aenter__(self) -> AsyncMemoryLedger:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _install(cls: type, source: type, names: Iterable[str], skip: Iterable[str] = ()) -> None:
    """Give ``cls`` an async twin of each of ``source``'s methods ``names`` (those in ``skip`` and those ``cls``
    defines itself are left as they are)."""
    for name in names:
        if name in skip or name in cls.__dict__:
            continue
        setattr(cls, name, async_twin(source, name))


_install(AsyncMemoryLedger, _ledger_class(), public_methods(_ledger_class()))
