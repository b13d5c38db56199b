#!/usr/bin/env bash
# Download the default embedding model for the vector channel: Qwen3-Embedding-0.6B, Q8_0 GGUF
# (~640 MB, 1024-dim, pooling LAST), then print the line that enables it.
#
#   scripts/download_model.sh [DEST_DIR]          # default: ~/.local/share/memory-mcp/models
#   eval "$(scripts/download_model.sh | tail -1)" # export MEMORY_MODEL_PATH in this shell
#
# Override the source with MEMORY_MODEL_URL (any GGUF embedding model works: prompts and pooling
# are read from its metadata).
set -euo pipefail
DEST="${1:-${XDG_DATA_HOME:-$HOME/.local/share}/memory-mcp/models}"
FILE="Qwen3-Embedding-0.6B-Q8_0.gguf"
URL="${MEMORY_MODEL_URL:-https://huggingface.co/Qwen/Qwen3-Embedding-0.6B-GGUF/resolve/main/$FILE}"
OUT="$DEST/$(basename "${URL%%\?*}")"
mkdir -p "$DEST"
if [ -s "$OUT" ] && [ "$(head -c 4 "$OUT")" = "GGUF" ]; then
    echo "already present: $OUT" >&2
else
    echo "downloading $URL" >&2
    if command -v curl >/dev/null 2>&1; then
        curl -fL --retry 3 -C - -o "$OUT.part" "$URL"
    elif command -v wget >/dev/null 2>&1; then
        wget -c -O "$OUT.part" "$URL"
    else
        echo "error: need curl or wget" >&2; exit 1
    fi
    if [ "$(head -c 4 "$OUT.part")" != "GGUF" ]; then
        echo "error: $URL did not return a GGUF file" >&2; rm -f "$OUT.part"; exit 1
    fi
    mv "$OUT.part" "$OUT"
fi
echo "Enable the vector channel (then run 'memory-mcp backfill' once for existing memories):" >&2
echo "export MEMORY_MODEL_PATH=\"$OUT\""
