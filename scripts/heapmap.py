#!/usr/bin/env python3
"""Draw a libmbuddy heap as a map of its pageblocks.

Reads a JSON statistics report (MBUDDY_STATS_FORMAT=json, see libmbuddy(3))
and writes a PNG picture: one cell per pageblock, in address order, coloured
by the pageblock's owner (KernNoRclm, KernRclm, UserRclm or the global pool)
and shaded by how full it is (pages handed out / pages per pageblock), with
the report's headline numbers in the title.

    LD_PRELOAD=.../libmbuddy.so MBUDDY_STATS=/tmp/mb.%p.json \\
        MBUDDY_STATS_FORMAT=json some-program
    scripts/heapmap.py /tmp/mb.1234.json -o heap.png

Exit status: 0 the picture was written; 1 it could not be drawn or written
(for example matplotlib is missing); 2 bad usage, or the input is not a
complete, valid report (truncated, damaged, or missing keys).
"""

import argparse
import json
import math
import os
import sys

PROG = "heapmap.py"

TYPES = ("KernNoRclm", "KernRclm", "UserRclm")
ALIASES = {"KernNoRclm": "pinned", "KernRclm": "cache", "UserRclm": "short"}
OWNERS = TYPES + ("global",)

# Okabe-Ito colours, told apart with the common colour-vision deficiencies.
COLOURS = {
    "KernNoRclm": "#D55E00",  # vermillion
    "KernRclm": "#0072B2",    # blue
    "UserRclm": "#009E73",    # bluish green
}
GLOBAL_RESIDENT = "#9E9E9E"   # free, idle but still resident
GLOBAL_RELEASED = "#EEEEEE"   # free, handed back to the kernel or never used
EDGE = "#FFFFFF"


class BadReport(Exception):
    """The input is not a usable report; the message says why."""


# ---- reading and validation ----

def load_documents(text):
    """Every JSON document in text (reports appended to one file)."""
    decoder = json.JSONDecoder()
    docs = []
    pos = 0
    n = len(text)
    while True:
        while pos < n and text[pos] in " \t\r\n":
            pos += 1
        if pos >= n:
            break
        try:
            doc, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            where = "the report" if not docs else "report %d" % (len(docs) + 1)
            raise BadReport("%s is not valid JSON (truncated or damaged?): %s" % (where, e))
        docs.append(doc)
    if not docs:
        raise BadReport("empty file: no report in it")
    return docs


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def need(obj, key, path, kind):
    """obj[key], checked to be of the kind named ('int', 'dict', ...)."""
    where = "%s.%s" % (path, key) if path else key
    if not isinstance(obj, dict) or key not in obj:
        raise BadReport("missing key '%s'" % where)
    v = obj[key]
    ok = {
        "int": is_int(v),
        "count": is_int(v) and v >= 0,
        "dict": isinstance(v, dict),
        "list": isinstance(v, list),
        "str": isinstance(v, str),
        "bool": isinstance(v, bool),
    }[kind]
    if not ok:
        what = {"int": "an integer", "count": "an integer >= 0", "dict": "an object",
                "list": "an array", "str": "a string", "bool": "true or false"}[kind]
        raise BadReport("'%s' is not %s (found %s)" % (where, what, json.dumps(v)[:40]))
    return v


def validate(doc):
    """Check the parts of a report the map uses; return them, normalised."""
    if not isinstance(doc, dict):
        raise BadReport("the report is not a JSON object")

    pages_per_pb = None
    if is_int(doc.get("pageblock_bytes")) and is_int(doc.get("page_bytes")) and doc["page_bytes"] > 0:
        pages_per_pb = doc["pageblock_bytes"] // doc["page_bytes"]
    elif is_int(doc.get("pageblock_order")) and 0 <= doc["pageblock_order"] < 32:
        pages_per_pb = 1 << doc["pageblock_order"]
    if not pages_per_pb or pages_per_pb <= 0:
        raise BadReport("cannot tell the pages per pageblock: need 'pageblock_bytes' and "
                        "'page_bytes', or 'pageblock_order'")

    types = need(doc, "types", "", "list")
    per_type = {}
    for i, t in enumerate(types):
        path = "types[%d]" % i
        if not isinstance(t, dict):
            raise BadReport("'%s' is not an object" % path)
        name = need(t, "name", path, "str")
        per_type[name] = need(t, "pageblocks", path, "count")
    for name in TYPES:
        if name not in per_type:
            raise BadReport("'types' has no entry named '%s'" % name)

    glob = need(doc, "global", "", "dict")
    g_free = need(glob, "free_pageblocks", "global", "count")
    g_res = need(glob, "resident_pageblocks", "global", "count")

    heap = need(doc, "heap", "", "dict")
    resident = need(heap, "resident_bytes", "heap", "int")
    live = need(heap, "live_bytes", "heap", "int")
    buddy = heap.get("buddy_allocated_bytes") if is_int(heap.get("buddy_allocated_bytes")) else None

    counters = need(doc, "counters", "", "dict")
    steals = need(counters, "global_steals", "counters", "count")
    refills = need(counters, "global_refills", "counters", "count")

    pb_total = doc.get("pageblocks_total") if is_int(doc.get("pageblocks_total")) else None
    blocks = {}
    for i, pb in enumerate(need(doc, "pageblocks", "", "list")):
        path = "pageblocks[%d]" % i
        if not isinstance(pb, dict):
            raise BadReport("'%s' is not an object" % path)
        index = need(pb, "index", path, "count")
        owner = need(pb, "owner", path, "str")
        used = need(pb, "used_pages", path, "count")
        res = need(pb, "resident", path, "bool")
        if owner not in OWNERS:
            raise BadReport("'%s.owner' is '%s', not one of %s" % (path, owner, ", ".join(OWNERS)))
        if used > pages_per_pb:
            raise BadReport("'%s.used_pages' is %d, more than the %d pages of a pageblock"
                            % (path, used, pages_per_pb))
        if pb_total is not None and index >= pb_total:
            raise BadReport("'%s.index' is %d, beyond the %d pageblocks of the heap"
                            % (path, index, pb_total))
        if index in blocks:
            raise BadReport("pageblock %d appears twice in 'pageblocks'" % index)
        blocks[index] = (owner, used, res)

    return {
        "pid": doc.get("pid"),
        "program": doc.get("program") if isinstance(doc.get("program"), str) else None,
        "pages_per_pb": pages_per_pb,
        "pb_bytes": doc.get("pageblock_bytes") if is_int(doc.get("pageblock_bytes")) else None,
        "pb_total": pb_total,
        "per_type": per_type,
        "global_free": g_free,
        "global_resident": g_res,
        "resident": resident,
        "live": live,
        "buddy": buddy,
        "steals": steals,
        "refills": refills,
        "blocks": blocks,
    }


def read_report(path, which):
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
    except OSError as e:
        raise BadReport("cannot read it: %s" % (e.strerror or e))
    docs = load_documents(text)
    try:
        doc = docs[which]
    except IndexError:
        raise BadReport("has %d report(s); there is no report %d" % (len(docs), which))
    return validate(doc)


# ---- drawing ----

def size_str(n):
    neg = n < 0
    n = abs(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            s = ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
            return "-" + s if neg else s
        n /= 1024.0
    return str(n)


def mix(hex_colour, amount):
    """hex_colour blended with white: amount 0 gives white, 1 the colour."""
    h = hex_colour.lstrip("#")
    rgb = [int(h[i:i + 2], 16) / 255.0 for i in (0, 2, 4)]
    return tuple(1.0 - amount * (1.0 - c) for c in rgb)


def shade(owner, used, pages_per_pb, resident):
    if owner == "global":
        return GLOBAL_RESIDENT if resident else GLOBAL_RELEASED
    fill = used / float(pages_per_pb)
    return mix(COLOURS[owner], 0.12 + 0.88 * fill)


def reexec_with_system_python():
    """A python3 of its own (pyenv, a venv) may lack the Debian module that
    the system's interpreter has: run the script again with that one, once,
    before anything is read."""
    try:
        import matplotlib  # noqa: F401
        return
    except ImportError:
        pass
    sysexe = "/usr/bin/python3"
    if (os.environ.get("_HEAPMAP_REEXEC") != "1" and os.path.exists(sysexe)
            and os.path.realpath(sys.executable) != os.path.realpath(sysexe)):
        os.environ["_HEAPMAP_REEXEC"] = "1"
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            os.execv(sysexe, [sysexe, os.path.abspath(__file__)] + sys.argv[1:])
        except OSError:
            pass


def import_pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.collections import PatchCollection
        from matplotlib.patches import Patch, Rectangle
    except ImportError:
        return None
    return plt, PatchCollection, Patch, Rectangle


def no_matplotlib():
    sys.stderr.write("%s: matplotlib is not available to %s: install python3-matplotlib "
                     "(Debian) or run the script with a python3 that has it\n"
                     % (PROG, sys.executable))
    return 1


def draw(rep, out, title, columns):
    mods = import_pyplot()
    if mods is None:
        return no_matplotlib()
    plt, PatchCollection, Patch, Rectangle = mods

    blocks = rep["blocks"]
    n = (max(blocks) + 1) if blocks else 0
    if columns:
        cols = columns
    elif n <= 16:
        cols = max(n, 1)
    else:
        cols = min(128, int(math.ceil(math.sqrt(2.0 * n))))
    rows = max(1, int(math.ceil(n / float(cols)))) if n else 1

    cell = min(0.8 if n <= 8 else 0.5, 9.0 / cols)
    grid_w = cols * cell
    grid_h = rows * cell
    head_h, foot_h = 1.45, 1.4
    fig_w = max(grid_w + 1.4, 8.5)
    fig_h = grid_h + head_h + foot_h
    fig = plt.figure(figsize=(fig_w, fig_h), dpi=110)
    ax = fig.add_axes([(fig_w - grid_w) / 2 / fig_w, foot_h / fig_h, grid_w / fig_w, grid_h / fig_h])

    rects, faces = [], []
    for i in range(n):
        owner, used, res = blocks.get(i, ("global", 0, False))
        r, c = divmod(i, cols)
        rects.append(Rectangle((c, r), 1, 1))
        faces.append(shade(owner, used, rep["pages_per_pb"], res))
    if rects:
        lw = 1.0 if cols <= 32 else 0.4
        ax.add_collection(PatchCollection(rects, facecolors=faces, edgecolors=EDGE, linewidths=lw))
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_aspect("equal")
    for side in ax.spines.values():
        side.set_visible(False)

    # Percent full, written in the cells while they are large enough.
    if n and cols <= 24 and rows <= 24:
        for i in range(n):
            owner, used, res = blocks.get(i, ("global", 0, False))
            if owner == "global":
                continue
            fill = used / float(rep["pages_per_pb"])
            r, c = divmod(i, cols)
            ax.text(c + 0.5, r + 0.5, "%d%%" % round(100 * fill), ha="center", va="center",
                    fontsize=max(5, min(9, 60.0 / cols)),
                    color="white" if fill > 0.55 else "#222222")

    # Row labels: the index of the first pageblock of the row.
    step = max(1, int(math.ceil(rows / 16.0)))
    ax.set_yticks([r + 0.5 for r in range(0, rows, step)])
    ax.set_yticklabels([str(r * cols) for r in range(0, rows, step)], fontsize=7)
    cstep = max(1, int(math.ceil(cols / 16.0)))
    ax.set_xticks([c + 0.5 for c in range(0, cols, cstep)])
    ax.set_xticklabels([("+%d" % c) for c in range(0, cols, cstep)], fontsize=7)
    ax.tick_params(length=0, pad=2)
    ax.xaxis.tick_top()
    if rows >= 4:
        ax.set_ylabel("first pageblock of the row", fontsize=8)

    if not n:
        ax.text(cols / 2.0, rows / 2.0, "no pageblock has been used", ha="center", va="center",
                fontsize=10, color="#444444")
        ax.set_xticks([])
        ax.set_yticks([])

    # Title and headline numbers.
    who = rep["program"] or "?"
    if rep["pid"] is not None:
        who += " (pid %s)" % rep["pid"]
    fig.text(0.5, 1 - 0.22 / fig_h, title or ("libmbuddy heap map: %s" % who),
             ha="center", va="top", fontsize=13, weight="bold")
    line1 = "resident (process RSS) %s    live %s" % (size_str(rep["resident"]), size_str(rep["live"]))
    if rep["buddy"] is not None:
        line1 += "    taken from the buddy %s" % size_str(rep["buddy"])
    pt = rep["per_type"]
    line2 = ("pageblocks: KernNoRclm %d    KernRclm %d    UserRclm %d    global free %d (%d resident)"
             % (pt["KernNoRclm"], pt["KernRclm"], pt["UserRclm"], rep["global_free"], rep["global_resident"]))
    line3 = "global steals %d    global refills %d" % (rep["steals"], rep["refills"])
    y = 1 - 0.55 / fig_h
    for text, size in ((line1, 9.5), (line2, 9.5), (line3, 9.5)):
        fig.text(0.5, y, text, ha="center", va="top", fontsize=size)
        y -= 0.21 / fig_h

    # Legend: owners, then how shading reads.
    # matplotlib fills legend columns first: this order reads by rows.
    def patch(colour, label):
        return Patch(facecolor=colour, edgecolor="#555555", linewidth=0.5, label=label)
    handles = [patch(COLOURS["KernNoRclm"], "KernNoRclm (pinned)"),
               patch(GLOBAL_RESIDENT, "global pool, idle resident"),
               patch(COLOURS["KernRclm"], "KernRclm (cache)"),
               patch(GLOBAL_RELEASED, "global pool, returned / never used"),
               patch(COLOURS["UserRclm"], "UserRclm (short)")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 0.86 / fig_h))
    # The shading scale: each type's colour from an empty to a full pageblock.
    sw, sh = 2.4, 0.2
    sax = fig.add_axes([(fig_w - sw) / 2 / fig_w, 0.42 / fig_h, sw / fig_w, sh / fig_h])
    steps = 50
    sax.imshow([[mix(COLOURS[t], 0.12 + 0.88 * k / (steps - 1.0)) for k in range(steps)] for t in TYPES],
               aspect="auto", extent=(0, 100, 3, 0), interpolation="nearest")
    sax.set_yticks([])
    sax.set_xticks([0, 25, 50, 75, 100])
    sax.set_xticklabels(["0%", "25%", "50%", "75%", "100%"], fontsize=6.5)
    sax.tick_params(length=2, pad=1)
    sax.set_title("pages in use per pageblock", fontsize=7, pad=2)
    shown = "pageblocks 0 to %d" % (n - 1) if n else "no pageblock"
    total = rep["pb_total"]
    size = size_str(rep["pb_bytes"]) if rep["pb_bytes"] else "%d pages" % rep["pages_per_pb"]
    note = "%s of %s, %s each, in address order; colour shade = share of the pageblock's pages in use" % (
        shown, ("%d" % total) if total is not None else "?", size)
    if total is not None and n < total:
        note += "; the others were never used"
    fig.text(0.5, 0.05 / fig_h, note, ha="center", va="bottom", fontsize=7.5, color="#333333")

    try:
        fig.savefig(out, format="png")
    except (OSError, ValueError) as e:
        sys.stderr.write("%s: cannot write %s: %s\n" % (PROG, out, getattr(e, "strerror", None) or e))
        return 1
    finally:
        plt.close(fig)
    return 0


def main(argv=None):
    global PROG
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--prog")
    known, _ = pre.parse_known_args(argv)
    if known.prog:
        PROG = known.prog  # the name to show, when run as "mbuddy map"
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="Draw the pageblocks of a libmbuddy JSON statistics report as a PNG map: "
                    "one cell per pageblock, coloured by owner type, shaded by fill.",
        epilog="Exit status: 0 written, 1 cannot draw or write, 2 bad usage or invalid report.")
    ap.add_argument("input", nargs="?",
                    help="JSON report (MBUDDY_STATS_FORMAT=json), or - for standard input")
    ap.add_argument("-o", "--output", metavar="OUT.png",
                    help="picture to write (default: the input name with .png, or heapmap.png)")
    ap.add_argument("--title", help="title to use instead of the program name and pid")
    ap.add_argument("--dump", type=int, default=-1, metavar="N",
                    help="which report of a file holding several, 0 for the first "
                         "(default: -1, the last)")
    ap.add_argument("--columns", type=int, metavar="N", help="cells per row (default: chosen from the count)")
    ap.add_argument("--check", action="store_true",
                    help="only check that a picture can be drawn (matplotlib is there): exit 0, else 1")
    ap.add_argument("--prog", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.input is None and not args.check:
        ap.error("the JSON report to draw is missing")
    if args.columns is not None and not 1 <= args.columns <= 1024:
        ap.error("--columns must be from 1 to 1024")

    if argv is None:
        reexec_with_system_python()
    if args.check:
        return 0 if import_pyplot() is not None else no_matplotlib()
    try:
        rep = read_report(args.input, args.dump)
    except BadReport as e:
        sys.stderr.write("%s: %s: %s\n" % (PROG, "standard input" if args.input == "-" else args.input, e))
        return 2

    out = args.output
    if not out:
        if args.input == "-":
            out = "heapmap.png"
        else:
            base = args.input[:-5] if args.input.endswith(".json") else args.input
            out = base + ".png"
    rc = draw(rep, out, args.title, args.columns)
    if rc == 0:
        print("%s: wrote %s (%d pageblocks)" % (PROG, out, (max(rep["blocks"]) + 1) if rep["blocks"] else 0))
    return rc


if __name__ == "__main__":
    sys.exit(main())
