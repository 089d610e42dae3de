"""Prints the Session API against the Agents SDK, side by side, from the two benchmark reports.

Usage: python3 compare_table.py sdk.json spool.json

Standard library only (it runs outside the SDK's virtualenv). Ratios are
speed ratios: spool's operations per second over the SDK's, computed from
the median runs. A missed target is reported, not an error; a mismatch in
the items the two sides stored is an error (exit 1), since the numbers
would not be comparable.
"""

from __future__ import annotations

import json
import sys

# The targets relative to the Agents SDK (spool's speed / the SDK's), and
# against spool's own floors: (a) within FLOOR_FACTOR of the one-row floor
# (h)'s time, (b) within BATCH_FLOOR_FACTOR of the batch floor (i)'s.
SDK_TARGETS = {"a": 1.5, "b": 3.0, "c": 5.0, "d": 8.0}
FLOOR_FACTOR = 1.3
BATCH_FLOOR_FACTOR = 2.0
# Short names; the full descriptions, with sizes, follow the table.
LABELS = {
    "a": "(a) add_items, 1 item per call",
    "b": "(b) add_items, batches",
    "c": "(c) get_items(), all, decoded",
    "d": "(d) get_items(limit), per call",
    "e": "(e) concurrent durable appenders",
    "f": "(f) deltas, committed",
    "g": "(g) llm view under a budget",
    "h": "(h) floor: (a) on bare rusqlite",
    "i": "(i) batch floor: (b) on bare rusqlite",
    "j": "(j) layout floor: (a)'s rows, bare rusqlite",
    "k": "(k) layout floor: (b)'s rows, bare rusqlite",
    "l": "(l) layout floor: (e)'s rows, bare rusqlite",
    "m": "(m) hand-off floor: (j) through a writer thread",
    "n": "(n) get_items_raw(limit), per call",
    "o": "(o) read floor: (d)'s rows, bare rusqlite",
    "p": "(p) read floor: (n)'s rows, bare rusqlite",
    "q": "(q) read floor: (c)'s rows, bare rusqlite",
    "r": "(r) group-commit floor: (l)'s rows, 16 callers",
}


def fail(msg: str) -> None:
    print(f"compare_table: {msg}", file=sys.stderr)
    sys.exit(1)


def by_name(report: dict) -> dict:
    return {w["name"]: w for w in report["workloads"]}


def fmt(w: dict) -> str:
    """A workload's headline value with its unit."""
    value = w["value"]
    if w["unit"].endswith("/s"):
        return f"{value:,.0f} {w['unit']}"
    return f"{value:.3f} {w['unit']}"


def spread(w: dict) -> str:
    """How far apart the runs were: (slowest - fastest) / median."""
    runs = w["runs_s"]
    return f"{(max(runs) - min(runs)) / w['median_s'] * 100:.0f}%"


def wanted_value(w: dict, speedup: float) -> float:
    """The headline value of `w` made `speedup` times as fast."""
    return w["value"] * speedup if w["unit"].endswith("/s") else w["value"] / speedup


def yes_no(holds: bool) -> str:
    return "yes" if holds else "NO"


def rows(sdk: dict, spool: dict) -> list[list[str]]:
    out = []
    # (n) is (d) with the items as JSON text: the SDK's (d) is its match.
    for name, theirs in (("a", "a"), ("b", "b"), ("c", "c"), ("d", "d"), ("n", "d")):
        if theirs not in sdk or (name == "n" and name not in spool):
            continue
        s, p = sdk[theirs], spool.get(name)
        if p is None:
            out.append([LABELS[name], fmt(s), "(not run)", "", f">= {SDK_TARGETS[theirs]:g}x SDK",
                        "", f"{spread(s)} / -"])
            continue
        ratio = p["per_s"] / s["per_s"]
        target = SDK_TARGETS[theirs]
        out.append([LABELS[name], fmt(s), fmt(p), f"{ratio:.1f}x",
                    f">= {target:g}x SDK", yes_no(ratio >= target),
                    f"{spread(s)} / {spread(p)}"])
        if name == "a" and "h" in spool:
            h = spool["h"]
            sdk_vs_floor = s["median_s"] / h["median_s"]
            spool_vs_floor = p["median_s"] / h["median_s"]
            out.append(["(a) time / floor (h) time", f"{sdk_vs_floor:.2f}x",
                        f"{spool_vs_floor:.2f}x", "", f"<= {FLOOR_FACTOR:g}x (h)",
                        yes_no(spool_vs_floor <= FLOOR_FACTOR), ""])
        if name == "b" and "i" in spool:
            i = spool["i"]
            spool_vs_floor = p["median_s"] / i["median_s"]
            out.append(["(b) time / batch floor (i) time", f"{s['median_s'] / i['median_s']:.2f}x",
                        f"{spool_vs_floor:.2f}x", "", f"<= {BATCH_FLOOR_FACTOR:g}x (i)",
                        yes_no(spool_vs_floor <= BATCH_FLOOR_FACTOR), ""])
    for name in "efghijklmopqr":
        if name not in spool:
            continue
        p = spool[name]
        value = fmt(p)
        if name == "g" and "cold_ms" in p.get("extra", {}):
            cold = sorted(p["extra"]["cold_ms"])[len(p["extra"]["cold_ms"]) // 2]
            value += f" (first call {cold:.0f} ms)"
        t = p.get("target")
        target = f"{t['op']} {t['value']:,g} {t['unit']}" if t else "(reference)"
        holds = yes_no(t["holds"]) if t else ""
        out.append([LABELS[name], "-", value, "", target, holds, f"- / {spread(p)}"])
    return out


def print_table(header: list[str], body: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in body:
        print(line(r))


def main() -> None:
    if len(sys.argv) != 3:
        fail("usage: compare_table.py sdk.json spool.json")
    with open(sys.argv[1]) as f:
        sdk_report = json.load(f)
    with open(sys.argv[2]) as f:
        spool_report = json.load(f)
    if sdk_report["items"] != spool_report["items"]:
        fail(f"the two sides stored different items: SDK {sdk_report['items']}, "
             f"spool {spool_report['items']}")

    m, sdk = spool_report["machine"], sdk_report["sdk"]
    print(f"machine: {m['cores']} cores, {m.get('cpu') or '?'}, {m['os']}, "
          f"kernel {m.get('kernel') or '?'}, idle CPUs: {m.get('cpu_idle') or '?'}")
    print(f"spool {m['spool_version']} ({m['build_profile']} build), "
          f"SQLite {m['sqlite_version']}, durability {spool_report['settings']['durability']}")
    print(f"Agents SDK: {sdk['package']} {sdk['version']}, {sdk['session']}: "
          f"journal_mode={sdk['journal_mode']}, synchronous={sdk['synchronous']}, "
          f"SQLite {sdk['sqlite_version']}, Python {sdk['python']}")
    settings = spool_report["settings"]
    print(f"median of {settings['runs']} runs, each on a fresh file under {settings['dir']}; "
          f"{spool_report['items']['count']} items (fnv1a64 "
          f"{spool_report['items']['fnv1a64']}, the same on both sides)")
    for side, side_report in (("the SDK's", sdk_report), ("spool's", spool_report)):
        stolen = sorted(pct for w in side_report["workloads"]
                        for pct in w.get("extra", {}).get("host_steal_pct", []))
        if stolen:
            print(f"CPU stolen by the host (other guests of the hypervisor) during {side} runs: "
                  f"median {stolen[len(stolen) // 2]:g}%, worst run {stolen[-1]:g}% "
                  f"(`host_steal_pct` of each run in the JSON)")
    if settings["quick"]:
        print("QUICK SIZES: these numbers only show that everything runs")
    print()
    header = ["workload", "Agents SDK", "spool", "ratio", "target", "holds",
              "run spread SDK / spool"]
    sdk_w, spool_w = by_name(sdk_report), by_name(spool_report)
    print_table(header, rows(sdk_w, spool_w))
    print()
    if "b" in sdk_w and "i" in spool_w:
        # Can (b)'s target be met at all with one row per item?
        wanted = SDK_TARGETS["b"] * sdk_w["b"]["per_s"]
        floor = spool_w["i"]["per_s"]
        print(f"(b): {SDK_TARGETS['b']:g}x the SDK would be {wanted:,.0f} items/s; the batch "
              f"floor (i) is {floor:,.0f} items/s ({floor / sdk_w['b']['per_s']:.1f}x the SDK)")
        print()
    # Where (a)'s and (b)'s time goes: spool's code (over the layout floor)
    # and its layout (the layout floor over the one-row floor).
    for mine, layout, floor in (("a", "j", "h"), ("b", "k", "i")):
        if all(n in spool_w for n in (mine, layout, floor)):
            m, l, f = (spool_w[n]["median_s"] for n in (mine, layout, floor))
            print(f"({mine}) = {m / f:.2f}x ({floor})'s time: spool's code {m / l:.2f}x "
                  f"(({mine}) over ({layout})), its rows {l / f:.2f}x (({layout}) over ({floor}))")
    if all(n in spool_w for n in ("a", "m", "j")):
        a, m, j = (spool_w[n]["median_s"] for n in ("a", "m", "j"))
        print(f"(a) over (j), {a / j:.2f}x, is spool's code alone: a lone caller's append runs on "
              f"its own thread, so (a) makes no hand-off; two would cost {m / j:.2f}x "
              f"((m) over (j)), which concurrent callers pay")
    # The reads: spool's code over the read floors, and whether 8x the SDK
    # is within what reading these rows allows at all.
    for mine, floor, theirs in (("c", "q", "c"), ("d", "o", "d"), ("n", "p", "d")):
        if mine in spool_w and floor in spool_w:
            m, f = spool_w[mine]["median_s"], spool_w[floor]["median_s"]
            line = f"({mine}) = {m / f:.2f}x its read floor ({floor})'s time"
            if theirs in sdk_w:
                s, p = sdk_w[theirs], spool_w[floor]
                target = SDK_TARGETS[theirs]
                # Both are speeds ratios: operations per second.
                line += (f"; {target:g}x the SDK's ({theirs}) would be "
                         f"{fmt({**s, 'value': wanted_value(s, target)})}, "
                         f"({floor}) gives {fmt(p)} ({p['per_s'] / s['per_s']:.1f}x the SDK)")
            print(line)
    if "e" in spool_w and "l" in spool_w:
        e, l = spool_w["e"], spool_w["l"]
        print(f"(e): {e['per_s']:,.0f} items/s; its layout floor (l), the same rows in groups of "
              f"one call per session, {l['per_s']:,.0f} items/s")
        if "r" in spool_w:
            r = spool_w["r"]
            # One figure per run; the middle one.
            groups = sorted(r.get("extra", {}).get("calls_per_commit", []))
            size = f", {groups[len(groups) // 2]:.1f} calls a commit" if groups else ""
            print(f"(e) = {e['median_s'] / r['median_s']:.2f}x its group-commit floor (r)'s "
                  f"time ((r): {r['per_s']:,.0f} items/s, the same rows from 16 waiting "
                  f"callers through a bare group commit{size}); (r) = "
                  f"{r['median_s'] / l['median_s']:.2f}x (l)'s time")
    print()
    for w in spool_report["workloads"]:
        print(f"({w['name']}) {w['description']}")


if __name__ == "__main__":
    main()
