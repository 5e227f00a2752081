#!/usr/bin/env python3
"""Turns hack/bench.sh results (TSV) into one Markdown table, and writes it
into docs/benchmarks.md between the BEGIN/END markers."""
import argparse
import collections
import statistics
import sys

OPTIONS = {
    "s1": "-x 1 -y 1 -s 12 -a", "s2": "-x 2 -y 0 -s 12", "s3": "-x 1 -y 1 -s 12 -a -f mandatory",
    "s4": "-x 1 -y 1 -q 100", "s5": "-x 1 -y 1 -q 100 -c 100", "s6": "-x 1 -y 1 -q 100 -c 100 -f persistent",
    "s7": "-x 1 -y 1 -s 5000 -a", "s8": "-x 1 -y 1 -q 1", "s9": "-x 1 -y 1 -q 10", "s10": "-x 1 -y 1 -q 100",
    "s11": "-x 1 -y 1 -q 1000", "s12": "-x 1 -y 1 -s 100 -c 1", "s13": "5 producers, 5 queues, 5 consumers, 10,000 msg/s each",
}


def load(path):
    rows = collections.defaultdict(lambda: collections.defaultdict(list))
    for line in open(path):
        parts = line.rstrip("\n").split("\t")
        if len(parts) < 6:
            continue
        broker, sc, _pass, rate, lat, clat = parts[:6]
        cpu = (parts[6:9] + ["-", "-", "-"])[:3]  # broker µs/msg, PerfTest µs/msg, idle %
        rows[sc][broker].append((float(rate or 0), lat, clat, *cpu))
    return rows


def mean(vals):
    vals = [v for v in vals if v]
    return statistics.mean(vals) if vals else 0


def median_of(entries, i):
    """Median of field i (a latency in µs, a CPU figure) over the passes that have one; 0 if none."""
    vals = [float(e[i]) for e in entries if e[i] not in ("-", "")]
    return statistics.median(vals) if vals else 0


def fmt_lat(entries, i):
    m = median_of(entries, i)
    return f"{m / 1000:.2f} ms" if m else "-"


def table(rows, machine, command):
    out = [f"Machine: {machine}. Command: `{command}`.", "",
           "| scenario | PerfTest options | Warren msg/s | RabbitMQ msg/s | Warren/RabbitMQ | Warren latency (median, consumer / confirm) | RabbitMQ latency (median, consumer / confirm) |",
           "| --- | --- | ---: | ---: | ---: | --- | --- |"]
    for sc in sorted(rows, key=scenario_key):
        w, r = rows[sc].get("warren", []), rows[sc].get("rabbitmq", [])
        wr, rr = mean([e[0] for e in w]), mean([e[0] for e in r])
        ratio = f"{wr / rr:.2f}x" if wr and rr else "-"
        unit = "KiB" if "rss" in sc else ""
        wl = f"{fmt_lat(w, 1)} / {fmt_lat(w, 2)}" if w else "-"
        rl = f"{fmt_lat(r, 1)} / {fmt_lat(r, 2)}" if r else "-"
        out.append(f"| {sc} | {OPTIONS.get(sc, '')} | {wr:,.0f}{unit} | {rr:,.0f}{unit} | {ratio} | {wl} | {rl} |")
    return "\n".join(out)


def cpu_table(rows):
    """CPU per message: the broker process and PerfTest's working threads,
    median over the passes; empty if the run measured none."""
    scs = [sc for sc in sorted(rows, key=scenario_key)
           if any(median_of(rows[sc].get(b, []), 3) for b in ("warren", "rabbitmq"))]
    if not scs:
        return ""
    out = ["", "", "CPU per message received, between PerfTest's per-second reports at a third of each pass and"
           " two seconds before its end (median over the passes): the broker process, all its threads, system time"
           " included (a thread's share of loopback TCP counts); PerfTest's producer, consumer and connection"
           " threads; idle: the share of the machine's CPU time nobody used.", "",
           "| scenario | Warren µs/msg | RabbitMQ µs/msg | RabbitMQ/Warren | PerfTest µs/msg, on Warren | PerfTest µs/msg, on RabbitMQ | idle, Warren / RabbitMQ |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    def cell(v, fmt, unit=""):
        return format(v, fmt) + unit if v else "-"
    for sc in scs:
        w, r = rows[sc].get("warren", []), rows[sc].get("rabbitmq", [])
        wb, rb = median_of(w, 3), median_of(r, 3)
        ratio = f"{rb / wb:.2f}x" if wb and rb else "-"
        out.append(f"| {sc} | {cell(wb, '.2f')} | {cell(rb, '.2f')} | {ratio} | {cell(median_of(w, 4), '.2f')} |"
                   f" {cell(median_of(r, 4), '.2f')} | {cell(median_of(w, 5), '.0f', '%')} / {cell(median_of(r, 5), '.0f', '%')} |")
    return "\n".join(out)


def scenario_key(sc):
    if sc.startswith("s") and sc[1:].isdigit():
        return (0, int(sc[1:]), sc)
    return (1, 0, sc)


def targets(rows):
    """The broker issue's targets, each with its figure from this run and
    whether it is met. Lines only for what the run measured."""
    def rate(sc, broker):
        return mean([e[0] for e in rows.get(sc, {}).get(broker, [])])

    def verdict(ok):
        return "met" if ok else "**not met**"

    out = []
    for sc in ("s1", "s5", "s6", "s12"):
        w, r = rate(sc, "warren"), rate(sc, "rabbitmq")
        if w and r:
            out.append(f"- {sc}: {w / r:.2f}x the messages per second (target: at least 2x): {verdict(w / r >= 2)}")
    w12, r12 = rows.get("s12", {}).get("warren", []), rows.get("s12", {}).get("rabbitmq", [])
    wc, rc = median_of(w12, 2), median_of(r12, 2)
    if wc and rc:
        out.append(f"- s12 as confirm latency: median {wc:.0f} µs against {rc:.0f} µs, {rc / wc:.2f}x lower"
                   " (the scenario is the confirm-latency one; its target read as latency: at least 2x lower):"
                   f" {verdict(rc / wc >= 2)}")
    for a, b, limit, what in (("s3", "s1", 0.10, "mandatory against plain"),
                              ("s10", "s11", 0.15, "prefetch 100 against 1000")):
        wa, wb = rate(a, "warren"), rate(b, "warren")
        if wa and wb:
            gap = (wb - wa) / wb
            side = f"{gap:.1%} below" if gap >= 0 else f"{-gap:.1%} above"
            ca, cb = median_of(rows[a]["warren"], 4), median_of(rows[b]["warren"], 4)
            client = f"; PerfTest's own CPU: {ca:.2f} µs/msg in {a}, {cb:.2f} in {b}" if ca and cb else ""
            out.append(f"- {a} on Warren: {side} {b} ({what}; target: within {limit:.0%}{client}):"
                       f" {verdict(gap <= limit)}")
    fill = [k for k in rows if k.startswith("backlog-fill-")]
    for k in fill:
        n = k[len("backlog-fill-"):]
        parts = []
        ok = True
        for phase in ("fill", "drain"):
            w, r = rate(f"backlog-{phase}-{n}", "warren"), rate(f"backlog-{phase}-{n}", "rabbitmq")
            if w and r:
                parts.append(f"{phase} {w / r:.1f}x")
                ok = ok and w / r >= 2
        wm, rm = rate("backlog-peak-rss-kib", "warren"), rate("backlog-peak-rss-kib", "rabbitmq")
        if wm and rm:
            parts.append(f"peak RSS {wm / 1024:.0f} MiB against {rm / 1048576:.1f} GiB ({wm / rm:.1%})")
            ok = ok and wm <= rm / 10
        if parts:
            out.append(f"- backlog of {int(n):,}: {', '.join(parts)} (targets: at least 2x faster, at most a tenth"
                       f" of the memory): {verdict(ok)}")
    if not out:
        return ""
    lines = ["", "", "Targets of the broker issue, from this run:", ""] + out
    spread = spread_notes(rows)
    if spread:
        lines += ["", "Passes that disagree by more than 30% (a mean over them says little; rerun with more"
                  " BENCH_PASSES):", ""] + spread
    return "\n".join(lines)


def spread_notes(rows):
    """One line per scenario and broker whose passes' rates differ by more
    than 30% (highest against lowest)."""
    out = []
    for sc in sorted(rows):
        if "rss" in sc:
            continue
        for broker in ("warren", "rabbitmq"):
            rates = [e[0] for e in rows[sc].get(broker, []) if e[0]]
            if len(rates) >= 2 and max(rates) > 1.3 * min(rates):
                out.append(f"- {sc} {broker}: " + ", ".join(f"{r:,.0f}" for r in rates) + " msg/s")
    return out


def write_docs(doc, table_file):
    text = open(doc).read()
    tbl = open(table_file).read().strip()
    begin, end = "<!-- BEGIN bench table -->", "<!-- END bench table -->"
    if begin in text and end in text:
        text = text[: text.index(begin) + len(begin)] + "\n" + tbl + "\n" + text[text.index(end):]
    else:
        text += f"\n{begin}\n{tbl}\n{end}\n"
    open(doc, "w").write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="?")
    ap.add_argument("--machine", default="")
    ap.add_argument("--command", default="make bench")
    ap.add_argument("--write-docs")
    ap.add_argument("--table-file")
    a = ap.parse_args()
    if a.write_docs:
        write_docs(a.write_docs, a.table_file)
        return
    rows = load(a.results)
    print(table(rows, a.machine, a.command) + cpu_table(rows) + targets(rows))


if __name__ == "__main__":
    sys.exit(main())
