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
        rows[sc][broker].append((float(rate or 0), lat, clat))
    return rows


def mean(vals):
    vals = [v for v in vals if v]
    return statistics.mean(vals) if vals else 0


def fmt_lat(entries, i):
    vals = [float(e[i]) for e in entries if e[i] not in ("-", "")]
    return f"{statistics.median(vals) / 1000:.2f} ms" if vals else "-"


def table(rows, machine, command):
    out = [f"Machine: {machine}. Command: `{command}`.", "",
           "| scenario | PerfTest options | Warren msg/s | RabbitMQ msg/s | Warren/RabbitMQ | Warren latency (median, consumer / confirm) | RabbitMQ latency (median, consumer / confirm) |",
           "| --- | --- | ---: | ---: | ---: | --- | --- |"]
    def key(sc):
        if sc.startswith("s") and sc[1:].isdigit():
            return (0, int(sc[1:]), sc)
        return (1, 0, sc)
    for sc in sorted(rows, key=key):
        w, r = rows[sc].get("warren", []), rows[sc].get("rabbitmq", [])
        wr, rr = mean([e[0] for e in w]), mean([e[0] for e in r])
        ratio = f"{wr / rr:.2f}x" if wr and rr else "-"
        unit = "KiB" if "rss" in sc else ""
        wl = f"{fmt_lat(w, 1)} / {fmt_lat(w, 2)}" if w else "-"
        rl = f"{fmt_lat(r, 1)} / {fmt_lat(r, 2)}" if r else "-"
        out.append(f"| {sc} | {OPTIONS.get(sc, '')} | {wr:,.0f}{unit} | {rr:,.0f}{unit} | {ratio} | {wl} | {rl} |")
    return "\n".join(out)


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
    print(table(load(a.results), a.machine, a.command))


if __name__ == "__main__":
    sys.exit(main())
