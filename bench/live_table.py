"""Prints `spool bench live`'s JSON report as one table: spool beside Codex,
with ratios (spool / Codex; for latencies and CPU, lower is better), the
targets, and the relay floors (stdio only): the model's deltas relayed to
stdout and nothing else, the least this machine allows; and the same with
every delta kept in a file synced within 5 ms, the least a server that
keeps its deltas can do; and with every delta kept as a row of spool's own
log in a store file, committed within 5 ms: what spool's layout costs
without spool's hops. The CPU time the host took for other guests during
each paced run is beside it (`host_steal_pct`, from `/proc/stat`)."""

import json
import sys


def main(path):
    with open(path) as f:
        report = json.load(f)
    runs = {(r["server"], r["transport"]): r for r in report["runs"]}
    rows = []

    def row(name, transport, pick, better, target="", ratio_of=True):
        spool = runs.get(("spool", transport))
        codex = runs.get(("codex", transport))
        relay = runs.get(("relay", transport))
        durable = runs.get(("durable-relay", transport))
        store = runs.get(("store-relay", transport))
        a = pick(spool) if spool else None
        b = pick(codex) if codex else None
        floor = pick(relay) if relay else None
        durable_floor = pick(durable) if durable else None
        store_floor = pick(store) if store else None
        ratio = ""
        if ratio_of and a is not None and b:
            ratio = f"{a / b:.2f}x"
        rows.append((name, transport, fmt(a), fmt(b), ratio, better, target, fmt(floor),
                     fmt(durable_floor), fmt(store_floor)))

    for transport in ("stdio", "websocket"):
        sizes = [t["deltas"] for t in runs.get(("spool", transport), {}).get("throughput", [])]
        for size in sizes:
            def rate(r, size=size):
                return next(t["deltas_per_s"] for t in r["throughput"] if t["deltas"] == size)

            def cpu(r, size=size):
                return next(t["cpu_us_per_delta"] for t in r["throughput"] if t["deltas"] == size)

            row(f"deltas/s, {size:,} deltas", transport, rate, "higher", ">= 3x Codex")
            row(f"server CPU us/delta, {size:,}", transport, cpu, "lower", "<= 25 us")
        row("first turn: turn/start -> model request, ms", transport,
            lambda r: r["first_turn_request_ms"], "lower", "<= 60 ms")
        row("first turn: first delta, ms", transport,
            lambda r: r["first_turn_first_delta_ms"], "lower")
        row("later turn: first delta, ms", transport,
            lambda r: r["later_turn_first_delta_ms"], "lower")
        for n, paced in enumerate(runs.get(("spool", transport), {}).get("paced", [])):
            streams = paced["streams"]
            row(f"paced, {streams} stream(s): p50 ms", transport,
                lambda r, n=n: r["paced"][n]["p50_ms"], "lower")
            row(f"paced, {streams} stream(s): p99 ms", transport,
                lambda r, n=n: r["paced"][n]["p99_ms"], "lower",
                "<= 2 ms" if streams > 1 else "")
            row(f"paced, {streams} stream(s): server CPU us/delta, turn included", transport,
                lambda r, n=n: r["paced"][n]["cpu_us_per_delta"], "lower")
            # Each server's paced run is its own stretch of time: what the
            # host took then says how far its figures are the machine's.
            row(f"paced, {streams} stream(s): CPU stolen by the host, %", transport,
                lambda r, n=n: r["paced"][n].get("host_steal_pct"), "", ratio_of=False)
        spool = runs.get(("spool", transport))
        if spool and len(spool["throughput"]) >= 2:
            first, last = spool["throughput"][0], spool["throughput"][-1]
            kept = last["deltas_per_s"] / first["deltas_per_s"]
            rows.append((f"spool rate at {last['deltas']:,} / at {first['deltas']:,}", transport,
                         f"{kept:.2f}", "", "", "", ">= 0.90", "", "", ""))

    header = ("workload", "transport", "spool", "codex", "ratio", "better", "target",
              "relay floor", "durable relay", "store relay")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for line in [header, tuple("-" * w for w in widths)] + rows:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(line, widths)).rstrip())
    stolen = [t.get("host_steal_pct") for r in report["runs"] for t in r["throughput"] + r["paced"]]
    stolen = [pct for pct in stolen if pct is not None]
    if stolen:
        print(f"\nCPU stolen by the host (other guests of the hypervisor) during the workloads: "
              f"{min(stolen):g}-{max(stolen):g}%; a run with much stolen is the machine's, "
              f"not the server's")
    machine = report.get("machine", {})
    print(f"\nmachine: {machine.get('cores')} cores, {machine.get('cpu')}, "
          f"idle CPUs: {machine.get('cpu_idle') or '?'}, "
          f"{machine.get('build_profile')} build of spool {machine.get('spool_version')}")


def fmt(value):
    if value is None:
        return "-"
    if isinstance(value, float) and value >= 1000:
        return f"{value:,.0f}"
    return f"{value:g}" if isinstance(value, float) else str(value)


if __name__ == "__main__":
    main(sys.argv[1])
