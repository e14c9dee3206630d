#!/usr/bin/env python3
"""Checks every number a findings page quotes against the committed file it comes from.

A number is tagged by an HTML comment right after it (invisible in the rendered page):

    12.4 [11.0, 14.0]<!-- num: results/noiseless/compare_d4.verdicts.csv | scope=window | ratio ratio_lo ratio_hi -->

The tag names a CSV file (a path from the repository root), filters that pick exactly one row
(`column=value`, several separated by commas; none when the file has one row) and the columns
whose values the numbers just before the tag quote, in order. The numbers matched are the last
ones written between the previous tag (or the start of the table cell or line) and this tag.
A column may be scaled for display with `*100` (a percentage) or read as a magnitude with
`abs()`. A quoted number agrees with its file when it equals the file's value rounded to the
decimals it is written with: |file - quoted| <= half a unit of its last digit (so 12.4 quotes
12.41 and 12.36; 1.2e-3 quotes 0.00124).

In a findings table (a markdown table under a heading that contains "Findings"), every number
outside the columns headed Question, Basis or Source must be tagged: an untagged number there
fails. Usage: tools/check_numbers.py PAGE [PAGE ...] (markdown pages); exit 0 when every tag
agrees, 1 listing each difference, 2 on a malformed tag or a source that cannot be read.
"""
import csv
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = re.compile(r"<!--\s*num:(.*?)-->", re.S)
# A quoted number: optional sign (ASCII or the minus sign), digits with optional thousands
# commas, optional decimals, optional exponent (e-3 or ×10^-3 is not used in pages).
NUMBER = re.compile(r"(?<![\w.])[-\u2212]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?:[eE][-+]?\d+)?"
                    r"|(?<![\w.])[-\u2212]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
EXEMPT_COLUMNS = ("question", "basis", "source")


class Malformed(Exception):
    pass


def parse_number(text):
    """The value and the half-unit of the last digit written (the rounding it was quoted at)."""
    t = text.replace("\u2212", "-").replace(",", "")
    mantissa, _, exponent = t.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    scale = 10.0 ** int(exponent) if exponent else 1.0
    return float(t), 0.5 * 10.0 ** (-decimals) * scale


_tables = {}


def read_table(path):
    if path not in _tables:
        full = os.path.join(ROOT, path)
        if not os.path.isfile(full):
            raise Malformed(f"source '{path}' does not exist")
        with open(full, newline="") as f:
            _tables[path] = list(csv.DictReader(f))
    return _tables[path]


def lookup(source, filters, column):
    rows = read_table(source)
    for key, value in filters:
        if rows and key not in rows[0]:
            raise Malformed(f"'{source}' has no column '{key}'")
        rows = [r for r in rows if r[key] == value]
    if len(rows) != 1:
        where = ",".join(f"{k}={v}" for k, v in filters) or "(no filter)"
        raise Malformed(f"'{source}' {where} selects {len(rows)} rows, expected exactly one")
    m = re.fullmatch(r"(abs\()?([\w.:]+)\)?(\*100)?", column)
    if not m or m.group(2) not in rows[0]:
        raise Malformed(f"'{source}' has no column '{column}'")
    raw = rows[0][m.group(2)]
    try:
        value = float(raw)
    except ValueError:
        raise Malformed(f"'{source}' column '{m.group(2)}' holds '{raw}', not a number")
    if m.group(1):
        value = abs(value)
    if m.group(3):
        value *= 100.0
    return value


def parse_tag(body):
    parts = [p.strip() for p in body.split("|")]
    if len(parts) == 2:
        parts = [parts[0], "", parts[1]]
    if len(parts) != 3 or not parts[0] or not parts[2]:
        raise Malformed(f"tag '{body.strip()}': expected 'FILE | FILTERS | COLUMNS'")
    filters = []
    for f in filter(None, (x.strip() for x in parts[1].split(","))):
        if "=" not in f:
            raise Malformed(f"tag '{body.strip()}': filter '{f}' is not column=value")
        k, v = f.split("=", 1)
        filters.append((k.strip(), v.strip()))
    return parts[0], filters, parts[2].split()


def check_segment(text, tag_body, where, errors):
    """The numbers in `text` (the span before one tag) against the tag's columns."""
    source, filters, columns = parse_tag(tag_body)
    quoted = NUMBER.findall(text)
    if len(quoted) < len(columns):
        raise Malformed(f"{where}: tag names {len(columns)} columns but {len(quoted)} numbers "
                        f"precede it")
    for q, col in zip(quoted[-len(columns):], columns):
        value, half_unit = parse_number(q)
        actual = lookup(source, filters, col)
        if abs(actual - value) > half_unit * (1 + 1e-9) + 1e-300:
            errors.append(f"{where}: quotes {q} for {source} {col} but the file has {actual:.6g}")
    return len(quoted) - len(columns)


def split_cells(line):
    # Table cells; a '|' inside a tag is not a cell border.
    cells, depth, cur, i = [], 0, "", 0
    while i < len(line):
        if line.startswith("<!--", i):
            depth += 1
        if line.startswith("-->", i):
            depth -= 1
        if line[i] == "|" and depth == 0:
            cells.append(cur)
            cur = ""
        else:
            cur += line[i]
        i += 1
    cells.append(cur)
    return [c.strip() for c in cells[1:-1]] if line.strip().startswith("|") else cells


def strip_links(text):
    # A link's target is a path, not a quoted number.
    return re.sub(r"\]\([^)]*\)", "]", text)


def check_text(text, where, errors, require_tags):
    """Tags in one cell or line; returns the count of untagged numbers left over."""
    text = strip_links(text)
    untagged, pos = 0, 0
    for m in TAG.finditer(text):
        untagged += check_segment(text[pos:m.start()], m.group(1), where, errors)
        pos = m.end()
    if require_tags:
        untagged += len(NUMBER.findall(text[pos:]))
    return untagged


def check_file(path, errors):
    in_findings, header, level = False, None, 0
    with open(path) as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        where = f"{path}:{n}"
        h = re.match(r"(#+)\s+(.*)", line)
        if h:
            if "findings" in h.group(2).lower():
                in_findings, level = True, len(h.group(1))
            elif in_findings and len(h.group(1)) <= level:
                in_findings = False
            header = None
            continue
        if in_findings and line.strip().startswith("|"):
            cells = split_cells(line)
            if header is None:
                header = [c.lower() for c in cells]
                continue
            if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
                continue
            for i, cell in enumerate(cells):
                exempt = i < len(header) and header[i].split()[0:1] and \
                    header[i].split()[0] in EXEMPT_COLUMNS
                left = check_text(cell, where, errors, not exempt)
                if left and not exempt:
                    errors.append(f"{where}: {left} untagged number(s) in findings column "
                                  f"'{header[i] if i < len(header) else i}': {cell[:80]}")
        else:
            if not line.strip().startswith("|"):
                header = None
            check_text(line, where, errors, False)


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().split("\n")[0])
        print("usage: tools/check_numbers.py PAGE [PAGE ...] (markdown files)", file=sys.stderr)
        return 2
    errors, tags = [], 0
    try:
        for path in argv[1:]:
            with open(path) as f:
                tags += len(TAG.findall(f.read()))
            check_file(path, errors)
    except (Malformed, OSError) as e:
        print(f"check_numbers: {e}", file=sys.stderr)
        return 2
    for e in errors:
        print(e)
    print(f"check_numbers: {tags} tags in {len(argv) - 1} file(s), {len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
