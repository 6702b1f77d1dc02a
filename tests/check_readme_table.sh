#!/usr/bin/env bash
# The README's GCX_* table must be exactly what `gcx-info --markdown` prints.
set -euo pipefail
gcx_info=$1 readme=$2
expected=$("$gcx_info" --markdown)
actual=$(sed -n '/<!-- gcx-config-table:begin -->/,/<!-- gcx-config-table:end -->/p' "$readme" | sed '1d;$d')
if [[ "$expected" != "$actual" ]]; then
  echo "README.md's configuration table is out of date. Regenerate it with:" >&2
  echo "  build/programs/gcx-info/gcx-info --markdown   (paste between the gcx-config-table markers)" >&2
  diff <(echo "$expected") <(echo "$actual") >&2 || true
  exit 1
fi
echo "README table matches the config table (1 passed, 0 failed)"
