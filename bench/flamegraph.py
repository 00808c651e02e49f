#!/usr/bin/env python3
"""Renders folded stacks (one line per stack: "process;frame;frame... count", as `perf script report
stackcollapse` writes them) as a flame graph in SVG: the x axis is the share of samples, each box a frame,
its children stacked above it; hovering a box shows its frame and share. Debian 12 packages no flame graph
renderer and perf's own `flamegraph` report loads its template from the web, hence this one.

Usage: flamegraph.py FOLDED OUT.svg [--title T] [--min-share 0.002] [--frames A,B,...]
Prints each process's share of the samples, and with --frames the share of samples whose stack holds each
frame (a substring of the frame's name), for tables beside the graph.
"""
import argparse
import html
import re
import zlib

WIDTH = 1400
ROW = 16
FONT = 11


def stacks(path):
    """(stack, samples) of each line of a folded file; the stack is "process;frame;...", root first."""
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if stack and count.isdigit():
                yield stack, int(count)


def parse(path):
    root = {"n": 0, "kids": {}}
    for stack, n in stacks(path):
        node = root
        node["n"] += n
        for frame in stack.split(";"):
            node = node["kids"].setdefault(frame, {"n": 0, "kids": {}})
            node["n"] += n
    return root


def shares(path, frames):
    """{process: share}, {frame: share of stacks holding it}."""
    total, by_process, holding = 0, {}, dict.fromkeys(frames, 0)
    for stack, n in stacks(path):
        total += n
        process = stack.split(";", 1)[0]
        by_process[process] = by_process.get(process, 0) + n
        for frame in frames:
            holding[frame] += n if frame in stack else 0
    return ({k: v / total for k, v in by_process.items()}, {k: v / total for k, v in holding.items()})


def colour(name):
    h = zlib.crc32(name.encode())
    return f"rgb({205 + h % 50},{80 + (h >> 8) % 120},{30 + (h >> 16) % 40})"


def layout(node, x, depth, total, min_share, boxes):
    for name, kid in sorted(node["kids"].items()):
        share = kid["n"] / total
        if share >= min_share:
            boxes.append((x, depth, share, name))
            layout(kid, x, depth + 1, total, min_share, boxes)
        x += share


def render(root, title, min_share):
    boxes = []
    layout(root, 0.0, 0, root["n"], min_share, boxes)
    depth = 1 + max((d for _, d, _, _ in boxes), default=0)
    height = (depth + 2) * ROW + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="monospace" '
           f'font-size="{FONT}">',
           f'<rect width="100%" height="100%" fill="#f8f8f0"/>',
           f'<text x="{WIDTH // 2}" y="{ROW}" text-anchor="middle" font-size="{FONT + 3}">'
           f'{html.escape(title)} ({root["n"]} samples)</text>']
    for x, d, share, name in boxes:
        px, w = x * WIDTH, share * WIDTH
        y = height - (d + 1) * ROW - 4
        label = html.escape(name)
        name = re.sub(r"\btpserve::(internal::)?(isa_\w+::)?", "", name)
        chars = int((w - 4) / (FONT * 0.6))
        text = label if len(name) <= chars else (html.escape(name[:chars - 2]) + ".." if chars > 3 else "")
        out.append(f'<g><title>{label} ({100 * share:.2f}%)</title>'
                   f'<rect x="{px:.1f}" y="{y}" width="{max(w - 0.5, 0.5):.1f}" height="{ROW - 1}" '
                   f'fill="{colour(name)}"/>'
                   + (f'<text x="{px + 2:.1f}" y="{y + ROW - 4}">{text}</text>' if text else "") + "</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folded")
    ap.add_argument("out")
    ap.add_argument("--title", default="flame graph")
    ap.add_argument("--min-share", type=float, default=0.002, help="leave out frames under this share")
    ap.add_argument("--frames", default="", help="comma-separated frames whose share of the stacks to print")
    args = ap.parse_args()
    root = parse(args.folded)
    if root["n"] == 0:
        raise SystemExit(f"{args.folded}: no samples")
    with open(args.out, "w") as f:
        f.write(render(root, args.title, args.min_share))
    by_process, holding = shares(args.folded, [f for f in args.frames.split(",") if f])
    print(f"{args.title}: {root['n']} samples")
    for name, share in sorted(by_process.items(), key=lambda kv: -kv[1]):
        print(f"  process {name}: {100 * share:.1f}%")
    for name, share in holding.items():
        print(f"  stacks holding {name}: {100 * share:.1f}%")


if __name__ == "__main__":
    main()
