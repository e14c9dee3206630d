#!/bin/sh
# The documentation site (mkdocs.yml, docs/) builds with `mkdocs build --strict`: any warning (a
# link to a page or file that is not under docs/, a page in the nav that does not exist) fails.
# Exits 77 (ctest: skipped) when MkDocs is not installed (scripts/setup installs Debian's).
# Usage: tests/check_docs_site.sh [REPOSITORY]
root=${1:-$(dirname "$0")/..}
if ! command -v mkdocs > /dev/null 2>&1; then
  echo "SKIP: mkdocs is not installed (Debian's package mkdocs; scripts/setup installs it)"
  exit 77
fi
out=$(mktemp -d) || exit 2
cd "$root" || exit 2
mkdocs build --strict -d "$out/site" > "$out/log" 2>&1
rc=$?
# Strict mode turns warnings into a failure; say so even if a version only printed them.
if grep -q WARNING "$out/log"; then rc=1; fi
cat "$out/log"
rm -rf "$out"
[ $rc -eq 0 ] || echo "mkdocs build --strict failed: fix the warnings above (see mkdocs.yml's nav)"
exit $rc
