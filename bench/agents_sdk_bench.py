"""Workloads (a)-(d) of `spool bench store` on the OpenAI Agents SDK's SQLiteSession.

The Python twin of `spool bench store`: same items, same sizes, same JSON
shape per workload, so `compare_table.py` can set the two side by side.
SQLiteSession is used exactly as shipped: its constructor, its public async
methods, its own pragmas (they are read back and reported, never changed).

Usage: python agents_sdk_bench.py [--dir DIR] [--runs 3] [--quick] > sdk.json
Progress goes to stderr, the report (JSON) to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from agents import SQLiteSession

# --- The items: a twin of crates/spool-cli/src/commands/bench/items.rs ------

FILLER = (
    "The quick brown fox jumps over the lazy dog while the agent keeps "
    "a durable log of every item it produces. "
)
USER_CHARS = 135
ASSISTANT_CHARS = 200


def padded(prefix: str, length: int) -> str:
    text = prefix
    while len(text) < length:
        text += FILLER
    return text[:length]


def item(n: int) -> dict:
    """Item n: a user message for even n, an assistant output message for odd n."""
    if n % 2 == 0:
        return {"role": "user", "content": padded(f"User message {n}: ", USER_CHARS)}
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {
                "type": "output_text",
                "text": padded(f"Assistant reply {n}: ", ASSISTANT_CHARS),
                "annotations": [],
                "logprobs": [],
            }
        ],
    }


def digest(items: list[dict]) -> str:
    """FNV-1a 64 over each item's compact JSON plus a newline (as the Rust side)."""
    h = 0xCBF29CE484222325
    for it in items:
        for byte in (json.dumps(it, separators=(",", ":")) + "\n").encode():
            h ^= byte
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


# --- Sizes: a twin of Sizes::FULL / Sizes::QUICK in workloads.rs ------------

FULL = {"items": 10_000, "batch": 100, "tail_limit": 50, "tail_calls": 2_000, "all_reads": 10}
QUICK = {"items": 200, "batch": 10, "tail_limit": 50, "tail_calls": 20, "all_reads": 2}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


async def add(db: Path, items: list[dict], per_call: int) -> float:
    """(a) and (b): items in add_items calls of per_call items each."""
    session = SQLiteSession("bench", db)
    try:
        calls = [items[i : i + per_call] for i in range(0, len(items), per_call)]
        start = time.perf_counter()
        for call in calls:
            await session.add_items(call)
        seconds = time.perf_counter() - start
        stored = len(await session.get_items())
        assert stored == len(items), f"stored {stored} of {len(items)} items"
        return seconds
    finally:
        session.close()


async def filled(db: Path, items: list[dict], batch: int) -> SQLiteSession:
    session = SQLiteSession("bench", db)
    for i in range(0, len(items), batch):
        await session.add_items(items[i : i + batch])
    return session


async def get_all(db: Path, items: list[dict], sizes: dict) -> float:
    """(c): every item back, all_reads times; SQLiteSession json.loads each row."""
    session = await filled(db, items, sizes["batch"])
    try:
        got: list = []
        start = time.perf_counter()
        for _ in range(sizes["all_reads"]):
            got = await session.get_items()
        seconds = time.perf_counter() - start
        assert len(got) == len(items), f"got {len(got)} of {len(items)} items"
        return seconds
    finally:
        session.close()


async def get_tail(db: Path, items: list[dict], sizes: dict) -> float:
    """(d): the latest tail_limit items, tail_calls times (the run's total)."""
    session = await filled(db, items, sizes["batch"])
    try:
        last: list = []
        start = time.perf_counter()
        for _ in range(sizes["tail_calls"]):
            last = await session.get_items(limit=sizes["tail_limit"])
        seconds = time.perf_counter() - start
        assert len(last) == min(sizes["tail_limit"], len(items))
        assert last[-1] == items[-1], "the newest item is not last"
        return seconds
    finally:
        session.close()


def specs(s: dict) -> dict:
    """name -> (description, ops, op, unit, headline is a rate?)"""
    return {
        "a": (f"{s['items']} items, one add_items([item]) per call, sequential",
              s["items"], "item", "items/s", True),
        "b": (f"the same {s['items']} items, add_items of {s['batch']} items per call",
              s["items"], "item", "items/s", True),
        "c": (f"get_items() of all {s['items']} items, each decoded from JSON, "
              f"{s['all_reads']} times",
              s["items"] * s["all_reads"], "item", "items/s", True),
        "d": (f"get_items(limit={s['tail_limit']}) on a session of {s['items']} items, "
              f"mean of {s['tail_calls']} calls",
              s["tail_calls"], "call", "ms/call", False),
    }


def cpu_ticks() -> tuple[int, int] | None:
    """(all CPU time, the host's steal) of the machine in clock ticks, from the
    `cpu` line of /proc/stat (user through steal; guest time is already in
    user), or None without it: as spool's benches measure it."""
    try:
        with open("/proc/stat") as f:
            line = next(l for l in f if l.startswith("cpu "))
        fields = [int(v) for v in line.split()[1:9]]
    except (OSError, StopIteration, ValueError):
        return None
    return sum(fields), (fields[7] if len(fields) > 7 else 0)


def steal_pct(before: tuple[int, int] | None) -> float | None:
    """The share of CPU time, percent, the host took since `before`."""
    after = cpu_ticks()
    if before is None or after is None or after[0] <= before[0]:
        return None
    return round((after[1] - before[1]) * 100 / (after[0] - before[0]), 1)


async def run_once(name: str, db: Path, items: list[dict], sizes: dict) -> float:
    if name == "a":
        return await add(db, items, 1)
    if name == "b":
        return await add(db, items, sizes["batch"])
    if name == "c":
        return await get_all(db, items, sizes)
    return await get_tail(db, items, sizes)


def session_defaults(base: Path) -> dict:
    """The pragmas SQLiteSession's own connections run with, read back from one."""
    with tempfile.TemporaryDirectory(prefix="agents-sdk-probe-", dir=base) as tmp:
        session = SQLiteSession("probe", Path(tmp) / "probe.db")
        try:
            # Its private accessor, only to read what its connections use.
            with session._locked_connection() as conn:
                journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
                sync = conn.execute("PRAGMA synchronous").fetchone()[0]
        finally:
            session.close()
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return {"journal_mode": journal, "synchronous": names.get(sync, str(sync))}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workloads", default="a,b,c,d")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if not args.dir.is_dir():
        parser.error(f"--dir {args.dir}: not a directory")
    sizes = QUICK if args.quick else FULL
    chosen = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in chosen if w not in specs(sizes)]
    if unknown:
        parser.error(f"unknown workloads {unknown}: the SDK side runs a, b, c, d")

    items = [item(n) for n in range(sizes["items"])]
    reports = []
    for name in chosen:
        description, ops, op, unit, is_rate = specs(sizes)[name]
        log(f"({name}) {description}")
        runs_s, stolen = [], []
        for run in range(1, args.runs + 1):
            # A fresh file for every run, removed afterwards.
            before = cpu_ticks()
            with tempfile.TemporaryDirectory(prefix="agents-sdk-bench-", dir=args.dir) as tmp:
                seconds = await run_once(name, Path(tmp) / "sdk.db", items, sizes)
            pct = steal_pct(before)
            log(f"    run {run}/{args.runs}: {seconds:.3f} s"
                + ("" if pct is None else f" ({pct:g}% of the CPU stolen by the host)"))
            runs_s.append(seconds)
            if pct is not None:
                stolen.append(pct)
        median_s = statistics.median(runs_s)
        per_s = ops / median_s
        value = per_s if is_rate else median_s * 1000 / ops
        log(f"    median: {value:.3f} {unit}")
        reports.append({
            "name": name, "description": description, "ops": ops, "op": op,
            "runs_s": runs_s, "median_s": median_s, "per_s": per_s,
            "value": value, "unit": unit, "extra": {"host_steal_pct": stolen},
        })

    report = {
        "sdk": {
            "package": "openai-agents",
            "version": importlib.metadata.version("openai-agents"),
            "session": "agents.SQLiteSession (file database, its defaults)",
            **session_defaults(args.dir),
            "sqlite_version": sqlite3.sqlite_version,
            "python": platform.python_version(),
        },
        "machine": {"cores": os.cpu_count(), "os": platform.platform()},
        "settings": {"runs": args.runs, "quick": args.quick, "dir": str(args.dir)},
        "items": {"count": len(items), "fnv1a64": digest(items)},
        "workloads": reports,
    }
    json.dump(report, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    asyncio.run(main())
