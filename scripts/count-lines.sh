#!/usr/bin/env bash
# Production lines, as issue 24 counts them: each src/**/*.rs up to its unit-test module (a
# `#[cfg(test)]` followed by `mod name {`), src/config/tests.rs left out. Prints the total and
# every file over 600 lines.
#
#   scripts/count-lines.sh [checkout]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
find src -name '*.rs' ! -path src/config/tests.rs | sort | while read -r file; do
  awk -v file="$file" '
    after_cfg && /^mod [a-z_]+ \{/ { n--; exit }
    { after_cfg = /^#\[cfg\(test\)\]/; n++ }
    END { print n, file }' "$file"
done | awk '{ total += $1; if ($1 > 600) over = over "\n" $0 } END { print "total", total over }'
