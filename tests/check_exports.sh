#!/usr/bin/env bash
# libgcx.so must export the public API and nothing else: every defined
# dynamic text/data symbol starts with gcx_ and is declared in a header under
# include/gcx/ (comments stripped); every function declared there is
# exported (a declaration without GCX_API is hidden, and a program that links
# only the shared library cannot call it).
# Usage: check_exports.sh LIBGCX_SO INCLUDE_GCX_DIR
set -euo pipefail
lib=$1 incdir=$2

# the headers' text without comments, one string
decls=$(perl -0777 -pe 's{/\*.*?\*/}{ }gs; s{//[^\n]*}{}g' "$incdir"/*.h)

# defined dynamic symbols of kind text (T, W, i) or data (D, B, R, V, G, S)
syms=$(nm -D --defined-only "$lib" |
  awk 'NF >= 3 && $2 ~ /^[TtWwiDdBbRrVvGgSs]$/ { print $3 }' | sed 's/@.*//' |
  sort -u)

fail=0 nsyms=0
for s in $syms; do
  nsyms=$((nsyms + 1))
  if [[ $s != gcx_* ]]; then
    echo "exported but not gcx_: $s" >&2
    fail=$((fail + 1))
  elif ! grep -Eq "(^|[^A-Za-z0-9_])$s[[:space:]]*[(;[]" <<<"$decls"; then
    echo "exported but not declared in $incdir: $s" >&2
    fail=$((fail + 1))
  fi
done

# functions the headers declare: a gcx_ name right before '(' (not '(*':
# a type in a function-pointer member); the static inline ones (gcx/wset.h)
# are defined in the header, not exported, and calls inside their bodies
# name only those
declared=$(grep -Eo '(^|[^A-Za-z0-9_])gcx_[A-Za-z0-9_]+[[:space:]]*\(([^*]|$)' \
  <<<"$decls" | sed -E 's/^[^g]//; s/[[:space:]]*\(.?$//' | sort -u)
inlines=$(grep -Eo 'static[[:space:]]+inline[^(;{]*[^A-Za-z0-9_]gcx_[A-Za-z0-9_]+[[:space:]]*\(' \
  <<<"$decls" | grep -Eo 'gcx_[A-Za-z0-9_]+' | sort -u)
declared=$(comm -23 <(printf '%s\n' $declared) <(printf '%s\n' $inlines))
for d in $declared; do
  if ! grep -qx "$d" <<<"$syms"; then
    echo "declared in $incdir but not exported (GCX_API missing?): $d" >&2
    fail=$((fail + 1))
  fi
done

if ((fail)); then
  echo "$fail bad symbol(s); $nsyms exported by $lib" >&2
  exit 1
fi
echo "$nsyms exported symbols, all public gcx_ API (1 passed, 0 failed)"
