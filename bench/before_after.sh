#!/usr/bin/env bash
# The SQLite path before and after a change, in one run: bench/scale.py and bench/bench_service.py
# of revision REV (a git worktree, imported ahead of the installed packages through PYTHONPATH)
# and of the working tree, alternately, so both see the same machine.
#
#   bash bench/before_after.sh 0610f26 [scale args] > before_after.json
set -euo pipefail
rev=${1:?usage: before_after.sh REV}
shift
repo=$(cd "$(dirname "$0")/.." && pwd)
old=$(mktemp -d -p "$(dirname "$repo")" before.XXXX)  # a sibling: ../shared/data resolves
trap 'git -C "$repo" worktree remove --force "$old"' EXIT
git -C "$repo" worktree add --detach --quiet "$old" "$rev"
# Plugins installed now that REV did not have are shadowed by empty packages in its runs: their
# entry points would load today's code against REV's core.
shadow="$old/.shadow"
for init in "$repo"/plugins/*/*/*/__init__.py; do
    rel=${init#"$repo"/}
    if [ ! -e "$old/$rel" ]; then
        pkg=$(basename "$(dirname "$init")")
        mkdir -p "$shadow/$pkg" && echo '"""Not in this revision."""' > "$shadow/$pkg/__init__.py"
    fi
done
paths() {  # the core and every plugin package of tree $1, for PYTHONPATH
    [ "$1" = "$old" ] && printf '%s:' "$shadow"
    printf '%s' "$1/core"
    for dir in "$1"/plugins/*/*/; do printf ':%s' "${dir%/}"; done
}
run() {  # label tree command...
    local label=$1 tree=$2
    shift 2
    echo "{\"tree\": \"$label\", \"bench\": \"$1\", \"result\": "
    (cd "$tree" && PYTHONPATH=$(paths "$tree") uv run --all-packages --project "$repo" \
        python "bench/$1" "${@:2}" 2>/dev/null)
    echo "}"
}
for round in 1 2; do
    run "$rev" "$old" scale.py --sizes 100000 "$@"
    run HEAD "$repo" scale.py --sizes 100000 "$@"
done
run "$rev" "$old" bench_service.py --seconds 5 --cold-runs 7
run HEAD "$repo" bench_service.py --seconds 5 --cold-runs 7
