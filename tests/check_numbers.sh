#!/bin/bash
# Every number the findings quote equals the committed file it names (tools/check_numbers.py):
# first the checker itself on fixtures with a known answer (a right page passes, a wrong digit
# and an untagged number fail), then README.md and the documentation's findings pages.
cd "$(dirname "$0")/.." || exit 2
py=${PYTHON:-python3}
fx=tests/fixtures/numbers
status=0
"$py" tools/check_numbers.py "$fx/good.md" > /dev/null || { echo "a right page failed"; status=1; }
for bad in wrong untagged; do
  if "$py" tools/check_numbers.py "$fx/$bad.md" > /dev/null; then
    echo "the $bad page passed: the checker cannot fail"
    status=1
  fi
done
pages=(README.md)
for p in docs/findings/*.md docs/index.md; do [ -f "$p" ] && pages+=("$p"); done
"$py" tools/check_numbers.py "${pages[@]}" || status=1
exit $status
