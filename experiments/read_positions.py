#!/usr/bin/env python3
"""Where each quantity is decodable at positions that later computation reads.

The family report of experiments/probing.sh reads k = n at the y-token of the last example,
which no later token attends to. This summary reads the same learners' ridge probes at
k = K (default 11 = n - 1) in two places that are read: the y-token of example K (the state;
every later token can attend to it) and the x-token of example K + 1 (the query, where the
prediction of y_{K+1} is read). Per learner and target it takes the layer with the best test R^2,
its 95% bootstrap interval, and each control's R^2 at that layer, and applies the rule of
docs/methodology.md: beyond the controls when the interval's lower end is above every control's
upper end; "weakly decodable" when the best R^2 (point) is below 0.5.

Inputs are the tidy CSVs probe writes (`--csv`): LEARNER/probes_targets.csv (state rows and
".query" rows) and LEARNER/probes_ridge.csv (state rows of every target, for those absent from
the first). Writes a CSV and a Markdown table (read_positions.*) in --out; refuses to overwrite
without --force. Standard library only.
"""
import argparse
import csv
import os
import sys

WEAK_R2 = 0.5  # analysis/report.cpp's kWeakR2
COLUMNS = ["learner", "target", "position", "k", "layer", "r2", "r2_lo", "r2_hi",
           "controls", "control_r2", "control_r2_hi", "verdict"]


def fail(msg):
    print(f"read_positions: {msg}", file=sys.stderr)
    sys.exit(2)


def read_rows(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail(f"cannot read '{path}': {e.strerror}")
    need = {"target", "source", "layer", "k", "r2", "r2_lo", "r2_hi"}
    if not rows or not need <= set(rows[0]):
        fail(f"'{path}' is not a probe's tidy CSV (expected columns {', '.join(sorted(need))})")
    for r in rows:
        try:
            r["layer"], r["k"] = int(r["layer"]), int(r["k"])
            for c in ("r2", "r2_lo", "r2_hi"):
                r[c] = float(r[c])
        except ValueError:
            fail(f"'{path}': a row has a non-numeric layer, k or R2 ({r})")
    return rows


def best(rows, learner, target, position, k):
    model = [r for r in rows if r["target"] == target and r["k"] == k and r["source"] == "model"]
    if not model:
        return None
    top = max(model, key=lambda r: r["r2"])
    ctl = sorted((r for r in rows if r["target"] == target and r["k"] == k
                  and r["layer"] == top["layer"] and r["source"] != "model"),
                 key=lambda r: r["source"])
    if not ctl:
        fail(f"{learner}: target {target} at k = {k} has no control rows")
    beyond = all(top["r2_lo"] > c["r2_hi"] for c in ctl)
    if not beyond:
        verdict = "not beyond its controls"
    elif top["r2"] < WEAK_R2:
        verdict = "weakly decodable"
    else:
        verdict = "decodable"
    return {"learner": learner, "target": target.removesuffix(".query"), "position": position,
            "k": k, "layer": top["layer"], "r2": top["r2"], "r2_lo": top["r2_lo"],
            "r2_hi": top["r2_hi"], "controls": ";".join(c["source"] for c in ctl),
            "control_r2": max(c["r2"] for c in ctl), "control_r2_hi": max(c["r2_hi"] for c in ctl),
            "verdict": verdict}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("learners", nargs="+", help="folders holding probes_targets.csv and probes_ridge.csv")
    ap.add_argument("--k", type=int, default=11, help="examples before the read (default 11)")
    ap.add_argument("--out", required=True, help="folder for read_positions.csv and .md")
    ap.add_argument("--force", action="store_true", help="overwrite existing outputs")
    a = ap.parse_args()
    if a.k < 1:
        fail(f"--k {a.k}: expected a count of examples >= 1")
    csv_out, md_out = os.path.join(a.out, "read_positions.csv"), os.path.join(a.out, "read_positions.md")
    for p in (csv_out, md_out):
        if os.path.exists(p) and not a.force:
            fail(f"'{p}' exists; pass --force to replace it")
    out = []
    for folder in a.learners:
        learner = os.path.basename(os.path.normpath(folder))
        targets = read_rows(os.path.join(folder, "probes_targets.csv"))
        ridge = read_rows(os.path.join(folder, "probes_ridge.csv"))
        names = sorted({r["target"] for r in targets})
        for t in [n for n in names if not n.endswith(".query")]:
            for pos, name in (("state", t), ("query", t + ".query")):
                row = best(targets, learner, name, pos, a.k)
                if row:
                    out.append(row)
        for t in sorted({r["target"] for r in ridge} - set(names)):
            row = best(ridge, learner, t, "state", a.k)
            if row:
                out.append(row)
    if not out:
        fail(f"no rows at k = {a.k} in the inputs")
    os.makedirs(a.out, exist_ok=True)
    for path, write in ((csv_out, write_csv), (md_out, write_md)):
        tmp = path + ".tmp"
        with open(tmp, "w", newline="") as f:
            write(f, out, a.k)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    print(f"wrote {csv_out} and {md_out}")


def write_csv(f, out, k):
    w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in out:
        w.writerow({c: (f"{r[c]:.6g}" if isinstance(r[c], float) else r[c]) for c in COLUMNS})


def write_md(f, out, k):
    f.write(f"Ridge probes at k = {k}, at two positions later computation reads: the y-token of "
            f"example {k} (state) and the x-token of example {k + 1} (query). Per learner and "
            "target: the best layer's test R2 [95% bootstrap interval over test prompts], the "
            "largest control R2 at that layer (upper end), and the verdict (beyond the controls "
            f"when the lower end exceeds every control's upper end; weakly decodable below R2 {WEAK_R2}).\n\n")
    f.write("| learner | target | position | layer | R2 [95%] | control (upper) | verdict |\n")
    f.write("|---|---|---|---:|---|---|---|\n")
    for r in out:
        f.write(f"| {r['learner']} | {r['target']} | {r['position']} | {r['layer']} | "
                f"{r['r2']:.3f} [{r['r2_lo']:.3f}, {r['r2_hi']:.3f}] | "
                f"{r['control_r2']:.3f} ({r['control_r2_hi']:.3f}) | {r['verdict']} |\n")
    groups = {}
    for r in out:
        groups.setdefault((r["target"], r["position"]), []).append(r)
    f.write("\nOver the learners:\n\n")
    for (t, pos), rs in sorted(groups.items()):
        verdicts = sorted({r["verdict"] for r in rs})
        lo, hi = min(r["r2"] for r in rs), max(r["r2"] for r in rs)
        agree = f"all {len(rs)}: {verdicts[0]}" if len(verdicts) == 1 else \
            "; ".join(f"{sum(r['verdict'] == v for r in rs)} of {len(rs)} {v}" for v in verdicts)
        f.write(f"- {t} at the {pos}: {agree} (best R2 {lo:.3f} to {hi:.3f}; layers "
                f"{', '.join(str(r['layer']) for r in rs)})\n")


if __name__ == "__main__":
    main()
