#!/bin/bash
# The repository speaks of the project alone: no text cites a numbered issue or a numbered
# period of work (the word for either followed by a number, or "this" and that word), which a
# reader of the code cannot look up; a date, a commit id or the reason itself says the same. And every markdown
# file that a code comment cites (docs/paper.md, checkpoints/README.md, ...) exists, with the
# section named beside it ('docs/design.md "Conventions"') where one is named.
# Run from anywhere; exits 1 listing what it found. Needs git (it reads the tracked files) and
# is skipped outside a git work tree (exit 0 with a note).
cd "$(dirname "$0")/.." || exit 2
if ! git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  echo "check_no_work_history: not a git work tree; skipped"
  exit 0
fi
status=0

# 1. Work history: the word for an issue or for a period of work, singular or plural, followed
# by a number (with or without '#'), or preceded by "this" (the pattern below). Case-insensitive;
# a word boundary in front, so that no longer word ending in those letters matches.
pattern='\bissues? #?[0-9]+|\bsessions? [0-9]+|\bthis session\b'
hits=$(git grep --untracked -nIiE "$pattern" -- . ':!tests/check_no_work_history.sh')
if [ -n "$hits" ]; then
  echo "Work history cited (say the reason, a date or a commit instead):"
  echo "$hits"
  status=1
fi

# 2. Markdown files cited in code comments exist. The comments of C++ sources (after //), of
# shell, CMake and Python sources (after #) and Python docstrings are read; a cited name is a
# path from the repository root or from the citing file's folder. A section named right after
# the path, in double quotes, must be one of that file's headings.
comments() {  # FILE: "LINE<TAB>TEXT" for each comment line of FILE that names a .md file
  awk -v kind="$2" '
    function emit(t) { if (t ~ /[A-Za-z0-9_-]\.md/) printf "%d\t%s\n", FNR, t }
    kind == "cpp" { i = index($0, "//"); if (i) emit(substr($0, i + 2)); next }
    kind == "py" {
      line = $0; n = gsub(/"""/, "&", line)
      if (indoc || n > 0) emit($0)
      if (n % 2 == 1) indoc = !indoc
      else if (!indoc && match($0, /(^|[ \t])#/)) emit(substr($0, RSTART))
      next
    }
    { if (match($0, /(^|[ \t])#/)) emit(substr($0, RSTART)) }
  ' "$1"
}
token=$'(^|[[:space:]([`\'"])([A-Za-z0-9_][A-Za-z0-9_./-]*\\.md)([^A-Za-z0-9_].*)?$'
section_re=$'^[[:space:]]*\\(?"([^"]+)"'
missing=$(
  git grep --untracked -lIE '[A-Za-z0-9_-]\.md\b' -- '*.cpp' '*.hpp' '*.h' '*.py' '*.pyi' '*.sh' \
    '*CMakeLists.txt' '*.cmake' 'scripts/*' 'tools/*' 'experiments/*' 'bench/*' |
    while read -r file; do
      case "$file" in
        *.cpp | *.hpp | *.h) kind=cpp ;;
        *.py | *.pyi) kind=py ;;
        *) if head -1 "$file" | grep -q python; then kind=py; else kind=sh; fi ;;
      esac
      dir=$(dirname "$file")
      comments "$file" "$kind" | while IFS=$'\t' read -r line rest; do
        # Every token that ends in .md and starts after a space, a quote, a parenthesis or a
        # backtick (not after / or $: "$OUT/summary.md" is a file a script writes).
        while [[ $rest =~ $token ]]; do
          cited=${BASH_REMATCH[2]}
          rest=${BASH_REMATCH[3]}
          if [ -f "$cited" ]; then target=$cited
          elif [ -f "$dir/$cited" ]; then target=$dir/$cited
          else echo "$file:$line: cites $cited, which does not exist"; continue
          fi
          if [[ $rest =~ $section_re ]]; then
            section=${BASH_REMATCH[1]}
            grep -qxF -e "# $section" -e "## $section" -e "### $section" -e "#### $section" \
              "$target" || echo "$file:$line: cites $cited \"$section\", which has no such heading"
          fi
        done
      done
    done
)
if [ -n "$missing" ]; then
  echo "Cited documents that are not there:"
  echo "$missing"
  status=1
fi
exit $status
