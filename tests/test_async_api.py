"""AsyncMemoryLedger: every public verb of MemoryLedger as a coroutine, safe under concurrent tasks (both backends)."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any

import pytest

from ledger.errors import BadInput
from memledger import AsyncMemoryLedger, MemoryLedger
from memledger.aio import public_methods


def test_every_public_method_of_memory_ledger_has_an_async_twin():
    names = public_methods(MemoryLedger)
    assert {"remember", "assert_fact", "profile", "history", "search", "context", "erase", "close"} <= set(names)
    for name in names:
        twin = getattr(AsyncMemoryLedger, name, None)
        assert twin is not None, f"AsyncMemoryLedger lacks {name}"
        assert inspect.iscoroutinefunction(twin), name
        assert inspect.signature(twin) == inspect.signature(getattr(MemoryLedger, name)), name
        if name != "close":  # close is AsyncMemoryLedger's own (it waits for calls in flight)
            assert twin.__doc__ == getattr(MemoryLedger, name).__doc__, name


def test_a_verb_added_to_memory_ledger_gets_a_twin():
    from memledger.aio import _install

    class Ledger(MemoryLedger):
        def brand_new_verb(self, user_id: str, *, n: int = 1) -> int:
            """A verb nobody wrote a twin for."""
            return n

    class Async(AsyncMemoryLedger):
        pass

    _install(Async, Ledger, public_methods(Ledger))
    assert inspect.iscoroutinefunction(Async.brand_new_verb)
    assert str(inspect.signature(Async.brand_new_verb)) == "(self, user_id: 'str', *, n: 'int' = 1) -> 'int'"


def test_fifty_concurrent_writes_are_all_recorded_exactly(store_args: dict[str, Any]):
    statements = ["I have a cat named Luna", "I live in Lisbon", "My favourite colour is green", "I work at Acme",
                  "I listen to jazz every evening", "My phone is a Pixel 8", "I play the cello", "I drive a red Civic",
                  "My sister is called Maya", "I speak Portuguese"]

    async def main() -> tuple[Any, ...]:
        async with AsyncMemoryLedger(**store_args, embedder="hash") as ml:
            tasks = [ml.assert_fact("u1", f"item.k{i}", i, text=f"item {i}") for i in range(20)]
            tasks += [ml.assert_fact("u2", "counter.value", i) for i in range(20)]
            tasks += [ml.remember(f"r{i}", s) for i, s in enumerate(statements)]
            receipts = await asyncio.gather(*tasks)
            p1, p2 = await ml.profile("u1"), await ml.profile("u2")
            h2 = await ml.history("u2", "counter.value")
            remembered = [await ml.profile(f"r{i}") for i in range(len(statements))]
            return receipts, p1, p2, h2, remembered

    receipts, p1, p2, h2, remembered = asyncio.run(main())
    assert len(receipts) == 50
    assert len({r.position for r in receipts}) == 50  # fifty distinct events, none lost or merged
    assert {k: f.value for k, f in p1.facts.items()} == {f"item.k{i}": i for i in range(20)}
    assert sorted(r.value for r in h2) == list(range(20))  # every value of the contended key, once each
    assert [r.version for r in h2] == list(range(1, 21))
    assert p2.facts["counter.value"].value == h2[-1].value  # the last one recorded is the belief
    for i, (prof, s) in enumerate(zip(remembered, statements)):
        assert [f.text for f in prof.facts.values()] == [s], i


def test_errors_reach_the_awaiting_task_and_nothing_is_written(store_args: dict[str, Any]):
    async def main() -> Any:
        async with AsyncMemoryLedger(**store_args, embedder="hash") as ml:
            with pytest.raises(BadInput, match="observed_at"):
                await ml.assert_fact("u1", "a.b", 1, observed_at="2024-01-01T00:00:00")  # naive: refused
            ok = ml.assert_fact("u1", "a.c", 2)
            bad = ml.assert_fact("u1", "Not A Key", 3)
            results = await asyncio.gather(ok, bad, return_exceptions=True)
            return results, await ml.profile("u1")

    (ok, bad), prof = asyncio.run(main())
    assert ok.key == "a.c" and isinstance(bad, BadInput) and bad.field == "key"
    assert list(prof.facts) == ["a.c"]


def test_a_cancelled_call_finishes_before_the_next_one_starts(tmp_path):
    """Cancelling the awaiting task does not stop a call already in its thread; the next call waits for it."""
    order: list[str] = []

    async def main() -> None:
        async with AsyncMemoryLedger(home=tmp_path / "s", embedder="hash") as ml:
            real = ml.ledger.assert_fact
            started = threading.Event()

            def slow(*args: Any, **kwargs: Any) -> Any:
                import time

                order.append("slow start")
                started.set()
                time.sleep(0.3)
                out = real(*args, **kwargs)
                order.append("slow end")
                return out

            ml.ledger.assert_fact = slow
            task = asyncio.create_task(ml.assert_fact("u1", "a.b", 1))
            await asyncio.to_thread(started.wait, 10)
            task.cancel()
            ml.ledger.assert_fact = real
            order.append("next call")
            prof = await ml.profile("u1")
            order.append(f"profile sees {sorted(prof.facts)}")

    asyncio.run(main())
    assert order == ["slow start", "next call", "slow end", "profile sees ['a.b']"]


def test_open_close_and_wrapping(tmp_path):
    async def main() -> None:
        ml = AsyncMemoryLedger(home=tmp_path / "s", embedder="hash")
        assert ml.ledger is None  # opened on first use
        await ml.assert_fact("u1", "a.b", "x")
        assert isinstance(ml.ledger, MemoryLedger)
        await ml.close()
        await ml.close()  # idempotent
        with pytest.raises(RuntimeError, match="closed"):
            await ml.profile("u1")
        with MemoryLedger(home=tmp_path / "s", embedder="hash") as sync:
            wrapped = AsyncMemoryLedger(ledger=sync)
            assert (await wrapped.profile("u1")).facts["a.b"].value == "x"
        with pytest.raises(BadInput, match="ledger: given together with home"):
            AsyncMemoryLedger(tmp_path / "s", ledger=sync)

    asyncio.run(main())


def test_the_event_loop_is_free_while_a_call_runs(tmp_path):
    async def main() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        async with AsyncMemoryLedger(home=tmp_path / "s", embedder="hash") as ml:
            real = ml.ledger.profile

            def slow(*args: Any, **kwargs: Any) -> Any:
                import time

                time.sleep(0.3)
                return real(*args, **kwargs)

            ml.ledger.profile = slow
            t = asyncio.create_task(ticker())
            await ml.profile("u1")
            t.cancel()
        return ticks

    assert asyncio.run(main()) >= 5


def test_one_object_serves_several_event_loops(tmp_path):
    """A script may call asyncio.run more than once on the same object, with contention each time."""
    ml = AsyncMemoryLedger(home=tmp_path / "s", embedder="hash")

    async def burst(start: int) -> None:
        await asyncio.gather(*[ml.assert_fact("u1", f"k.n{i}", i) for i in range(start, start + 5)])

    asyncio.run(burst(0))
    asyncio.run(burst(5))

    async def finish() -> Any:
        prof = await ml.profile("u1")
        await ml.close()
        return prof

    assert sorted(asyncio.run(finish()).facts) == sorted(f"k.n{i}" for i in range(10))
